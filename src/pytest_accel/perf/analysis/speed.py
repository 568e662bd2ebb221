"""The runner's speed: how much slower or faster a whole run was than usual.

CI runners differ, and a run on a slower runner makes every test slower.  The speed is
estimated from the tests themselves (the median of their log ratios) and used only to
explain findings away, never to make one: a finding must hold both as measured and
with the speed divided out.  For one run against the baseline (``runner_speed``), and
for every run of a series, each against the tests' levels over the baseline's runs
(``column_speeds`` for the baseline's, kept in its summary; ``current_speed`` for this
one), so that a step all tests took together (a faster machine since Tuesday) is one
change of the suite, not a change of each test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from math import exp, log
from operator import and_, eq, gt, le, mul, sub, truediv
from typing import TYPE_CHECKING

from pytest_accel.perf.analysis.changes import ChangeRule, Steps, find_steps
from pytest_accel.perf.analysis.rule import row_median

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

MIN_FOR_SPEED = 20  # tests a speed is estimated from, at least
AGREEMENT = 0.5  # share of the tests within their noise band of the speed estimate
SPEED_BAND = log(1.1)  # the narrowest noise band
AGREEMENT_SPREADS = 2.0  # a test's noise band: this many of its own spreads
NEGLIGIBLE = log(1.02)  # a speed closer to 1 than this is 1


def runner_speed(
    current: Iterable[float], medians: Iterable[float], noise: Iterable[float]
) -> float | None:
    """How much slower (> 1) or faster this run was than the baseline, where the tests
    agree: most of them sit within their own noise (``noise``, log spreads; NaN:
    unknown) of the estimate.  Tests that moved for their own reasons (a warm compile
    cache) split the ratios in two, and then there is no one runner speed to apply.

    Plain Python over the compared tests, so that a comparison that finds nothing needs
    no numpy (``perf.analysis.quiet``); C-level maps keep 100,000 tests to a few milliseconds.
    """
    current, medians, noise = _listed(current), _listed(medians), _listed(noise)
    if not len(current) == len(medians) == len(noise):
        raise ValueError("runner_speed: current, medians and noise differ in length")
    # The tests timed now and before (NaN compares false), picked with C-level maps: no
    # tuple per test.
    usable = list(map(and_, map(gt, current, repeat(0.0)), map(gt, medians, repeat(0.0))))
    now, then = list(compress(current, usable)), list(compress(medians, usable))
    if len(now) < MIN_FOR_SPEED:
        return None
    spreads = compress(noise, usable)
    ratios = list(map(log, map(truediv, now, then)))
    estimate = median(ratios)
    # Each test's band: two of its spreads (NaN: unknown, the narrowest band) or 10%.
    bands = map(max, repeat(SPEED_BAND), map(mul, repeat(AGREEMENT_SPREADS), spreads))
    distances = map(abs, map(sub, ratios, repeat(estimate)))
    agreeing = sum(map(le, distances, bands)) / len(now)
    if agreeing < AGREEMENT or abs(estimate) < NEGLIGIBLE:
        return None
    return exp(estimate)


def runner_speed_of_arrays(
    current: FloatArray, medians: FloatArray, noise: FloatArray
) -> float | None:
    """``runner_speed`` over numpy arrays, for the full comparison: the same number to
    the last bit (the logs are ``math.log``'s, numpy's may differ in it; division,
    differences and comparisons are exact either way), a few numpy passes instead of
    a dozen C-level maps over 100,000 tests."""
    import numpy as np

    if not len(current) == len(medians) == len(noise):
        raise ValueError("runner_speed: current, medians and noise differ in length")
    usable = (current > 0) & (medians > 0)  # NaN compares false, as in runner_speed
    count = int(np.count_nonzero(usable))
    if count < MIN_FOR_SPEED:
        return None
    ratios = _logs(current[usable] / medians[usable])
    estimate = _array_median(ratios)
    # np.fmax, as max() there: a NaN spread (unknown) leaves the narrowest band.
    bands = np.fmax(SPEED_BAND, AGREEMENT_SPREADS * noise[usable])
    agreeing = int(np.count_nonzero(np.abs(ratios - estimate) <= bands)) / count
    if agreeing < AGREEMENT or abs(estimate) < NEGLIGIBLE:
        return None
    return exp(estimate)


def current_speed_of_arrays(current: FloatArray, centres: FloatArray) -> float:
    """``current_speed`` over numpy arrays, the same number to the last bit (as
    ``runner_speed_of_arrays``)."""
    if len(current) != len(centres):
        raise ValueError("current_speed: current and centres differ in length")
    import numpy as np

    usable = (current > 0) & ~np.isnan(centres)
    return _speed_of(_logs(current[usable]) - centres[usable])


def _logs(values: FloatArray) -> FloatArray:
    """``math.log`` of each value, as an array."""
    import numpy as np

    return np.fromiter(map(log, values.tolist()), dtype=np.float64, count=len(values))


def _array_median(values: FloatArray) -> float:
    """``median`` of a non-empty array: the same middle values, the same mean of two."""
    import numpy as np

    middle = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, middle)[middle])
    ordered = np.partition(values, [middle - 1, middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2


def _listed(values: Iterable[float]) -> list[float]:
    return values if isinstance(values, list) else list(values)


def log_centres(samples: FloatArray) -> FloatArray:
    """Each row's median log of its positive samples (NaN: none): the level a run's
    speed is measured against.  A zero (a test faster than the clock) has no log."""
    import numpy as np

    with np.errstate(all="ignore"):
        centres: FloatArray = row_median(np.log(np.where(samples > 0, samples, np.nan)))
    return centres


def column_speeds(samples: FloatArray, centres: FloatArray) -> list[float]:
    """Each baseline run's speed (a column of ``samples``: tests x runs in seconds, NaN
    where a test has no sample): the median, over the tests it has, of their log ratio
    to their own level (``log_centres``).  1 for a run with fewer than MIN_FOR_SPEED
    tests or within 2% of 1."""
    import numpy as np

    if not samples.size:
        return [1.0] * samples.shape[1]
    with np.errstate(all="ignore"):
        ratios = np.log(np.where(samples > 0, samples, np.nan)) - centres[:, None]
    speeds = []
    # A column holds every test: a partition per column, not a sort of 100,000 values.
    for column in ratios.T:
        present = column[~np.isnan(column)]
        speeds.append(_speed_of(present))
    return speeds


def current_speed(current: Sequence[float], centres: Sequence[float]) -> float:
    """This run's speed, as ``column_speeds`` measures a baseline run's: over the
    compared tests (``centres`` aligned with ``current``; NaN: no level)."""
    if len(current) != len(centres):
        raise ValueError("current_speed: current and centres differ in length")
    # The tests timed now with a level (NaN is not equal to itself), in C-level maps.
    usable = list(map(and_, map(gt, current, repeat(0.0)), map(eq, centres, centres)))
    return _speed_of(list(map(sub, map(log, compress(current, usable)), compress(centres, usable))))


def _speed_of(log_ratios: list[float] | FloatArray) -> float:
    if len(log_ratios) < MIN_FOR_SPEED:
        return 1.0
    estimate = median(log_ratios) if isinstance(log_ratios, list) else _array_median(log_ratios)
    return 1.0 if abs(estimate) < NEGLIGIBLE else exp(estimate)


def median(values: list[float]) -> float:
    """The median of a non-empty list, as numpy's (the mean of the middle two of an even
    count); ``statistics`` would cost an import of its own."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def unexplained_steps(series: FloatArray, rule: ChangeRule, speeds: FloatArray | None) -> Steps:
    """Steps in ``series`` that hold as measured and with each run's speed divided out:
    the levels reported are as measured."""
    import numpy as np

    measured = find_steps(series, rule)
    if speeds is None or not measured.found.any():
        return measured
    # Rows are searched each on its own: only those with a step as measured can hold.
    rows = np.flatnonzero(measured.found)
    corrected = find_steps(series[rows] / speeds[None, :], rule)
    same_way = np.sign(measured.after[rows] - measured.before[rows]) == np.sign(
        corrected.after - corrected.before
    )
    found = np.zeros_like(measured.found)
    found[rows[corrected.found & same_way]] = True
    return Steps(
        found,
        np.where(found, measured.runs, 0),
        np.where(found, measured.before, np.nan),
        np.where(found, measured.after, np.nan),
    )
