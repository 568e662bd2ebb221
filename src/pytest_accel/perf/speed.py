"""The runner's speed: how much slower or faster a whole run was than usual.

CI runners differ, and a run on a slower runner makes every test slower.  The speed is
estimated from the tests themselves (the median of their log ratios) and used only to
explain findings away, never to make one: a finding must hold both as measured and
with the speed divided out.  For one run against the baseline (``runner_speed``), and
for every run of a series (``run_speeds``), so that a step all tests took together (a
faster machine since Tuesday) is one change of the suite, not a change of each test.
"""

from __future__ import annotations

from math import log
from typing import TYPE_CHECKING

from pytest_accel.perf.changes import ChangeRule, Steps, find_steps
from pytest_accel.perf.rule import row_median

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

MIN_FOR_SPEED = 20  # tests a speed is estimated from, at least
AGREEMENT = 0.5  # share of the tests within their noise band of the speed estimate
SPEED_BAND = log(1.1)  # the narrowest noise band
AGREEMENT_SPREADS = 2.0  # a test's noise band: this many of its own spreads
NEGLIGIBLE = log(1.02)  # a speed closer to 1 than this is 1


def runner_speed(current: FloatArray, medians: FloatArray, noise: FloatArray) -> float | None:
    """How much slower (> 1) or faster this run was than the baseline, where the tests
    agree: most of them sit within their own noise (``noise``, log spreads) of the
    estimate.  Tests that moved for their own reasons (a warm compile cache) split the
    ratios in two, and then there is no one runner speed to apply."""
    import numpy as np

    usable = (medians > 0) & (current > 0)
    if usable.sum() < MIN_FOR_SPEED:
        return None
    ratios = np.log(current[usable] / medians[usable])
    estimate = float(np.median(ratios))
    spread = np.nan_to_num(noise[usable], nan=0.0)
    band = np.maximum(SPEED_BAND, AGREEMENT_SPREADS * spread)
    agreeing = float(np.mean(np.abs(ratios - estimate) <= band))
    if agreeing < AGREEMENT or abs(estimate) < NEGLIGIBLE:
        return None
    return float(np.exp(estimate))


def run_speeds(series: FloatArray) -> FloatArray | None:
    """Each run's speed (a column of ``series``: tests x runs in seconds, NaN where a
    test has no sample): the median, over the tests it has, of their log ratio to their
    own median.  1 for a run with fewer than MIN_FOR_SPEED tests; None when no run has
    enough."""
    import numpy as np

    if series.shape[0] < MIN_FOR_SPEED or not series.size:
        return None
    with np.errstate(all="ignore"):
        logs = np.log(np.where(series > 0, series, np.nan))
        ratios = logs - row_median(logs)[:, None]
    counts = np.sum(~np.isnan(ratios), axis=0)
    # A column holds every test: a partition per column, not a sort of 100,000 values.
    estimate = np.array(
        [
            np.median(column[~np.isnan(column)]) if n else np.nan
            for column, n in zip(ratios.T, counts, strict=True)
        ]
    )
    estimate = np.where((counts >= MIN_FOR_SPEED) & (np.abs(estimate) >= NEGLIGIBLE), estimate, 0.0)
    if not np.any(counts >= MIN_FOR_SPEED):
        return None
    speeds: FloatArray = np.exp(estimate)
    return speeds


def unexplained_steps(series: FloatArray, rule: ChangeRule, speeds: FloatArray | None) -> Steps:
    """Steps in ``series`` that hold as measured and with each run's speed divided out:
    the levels reported are as measured."""
    import numpy as np

    measured = find_steps(series, rule)
    if speeds is None or not measured.found.any():
        return measured
    corrected = find_steps(series / speeds[None, :], rule)
    same_way = np.sign(measured.after - measured.before) == np.sign(
        corrected.after - corrected.before
    )
    found = measured.found & corrected.found & same_way
    return Steps(
        found,
        np.where(found, measured.runs, 0),
        np.where(found, measured.before, np.nan),
        np.where(found, measured.after, np.nan),
    )
