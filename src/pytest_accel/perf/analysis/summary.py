"""A baseline's summary per hardware key, derived from its samples (numpy) once and
kept with them (``EnvHistory.keep_summary``) and in the file: each test's median,
centre, noise and level, each run's speed and total, each id's largest sample.  And
what sharding expects of each test, its median."""

from __future__ import annotations

from dataclasses import replace
from math import isnan
from typing import TYPE_CHECKING

from pytest_accel.perf.analysis.changes import change_rule, find_steps
from pytest_accel.perf.analysis.rule import Rule, row_median, sample_spread
from pytest_accel.perf.analysis.speed import column_speeds, log_centres
from pytest_accel.perf.model.columns import Values
from pytest_accel.perf.model.samples import KINDS, EnvHistory, Summary

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


# What the summary's ``steps`` were found by: a comparison by another rule searches anew.
SUMMARY_CHANGE_RULE = change_rule(Rule())


def summary_of(env: EnvHistory) -> Summary:
    """The summary read with the file, or derived from the samples once."""
    summary = env.stored_summary()
    if summary is None:
        summary = summarise(env)
        env.keep_summary(summary)
    return summary


def summary_to_write(env: EnvHistory) -> Summary:
    """``summary_of``, with the steps of the runs where the summary read lacks them (an
    earlier release wrote none): a file written says what it holds."""
    summary = summary_of(env)
    if summary.steps is None:
        summary = replace(summary, steps=own_steps(env.matrix("tests")[1]))
        env.keep_summary(summary)
    return summary


def own_steps(tests: npt.NDArray[np.float64]) -> dict[int, int]:
    """The tests (rows of ``tests``, samples oldest first) whose own runs show a step, by
    ``SUMMARY_CHANGE_RULE``: each row and its runs at the new level."""
    found = find_steps(tests, SUMMARY_CHANGE_RULE)
    rows = found.found.nonzero()[0]
    return dict(zip(rows.tolist(), found.runs[rows].tolist(), strict=True))


def expected_durations(env: EnvHistory) -> dict[str, float]:
    """Each test's expected seconds, for planning shards: what it took as measured
    (setup, call and teardown, JAX compilation included) in the newest run that ran it,
    where the baseline keeps that (``durations_basis``); else its median sample."""
    walls = env.walls()
    expected = {
        ident: median
        for ident, median in zip(env.ids["tests"], summary_of(env).median, strict=True)
        if median is not None
    }
    expected.update(walls)
    return expected


def durations_basis(env: EnvHistory) -> str:
    """What ``expected_durations`` is of: ``wall`` (as a shard will take it), or the
    samples' own basis where the baseline keeps no wall seconds (one folded before 0.4)."""
    if env.walls():
        return "wall"
    return env.runs[-1].basis if env.runs else "wall"


def summarise(env: EnvHistory) -> Summary:
    """Derive ``env``'s summary from its samples (numpy), rounded as it is written."""
    _, tests = env.matrix("tests")
    _, warmup = env.matrix("warmup")
    centre, noise = sample_spread(tests, Rule())
    levels = log_centres(tests)
    return Summary(
        runs=len(env.runs),
        median=_rounded(row_median(tests), SUMMARY_DIGITS),
        centre=_rounded(centre, SUMMARY_DIGITS),
        noise=_rounded(noise, SUMMARY_DIGITS),
        level=_rounded(levels, SUMMARY_DIGITS),
        warmup_median=_rounded(row_median(warmup), SUMMARY_DIGITS),
        speeds=[round(speed, SUMMARY_DIGITS) for speed in column_speeds(tests, levels)],
        peaks={kind: _peaks(env.matrix(kind)[1]) for kind in KINDS},
        totals=_run_totals([tests, warmup]),
        steps=own_steps(tests),
    )


SUMMARY_DIGITS = 7  # a median of samples kept to the microsecond is exact to 7 digits


def _run_totals(matrices: list[npt.NDArray[np.float64]]) -> Values:
    """Per run (column), the sum of its samples across ``matrices`` (None: none)."""
    import numpy as np

    sampled = np.zeros(matrices[0].shape[1], dtype=bool)
    totals = np.zeros(matrices[0].shape[1])
    for matrix in matrices:
        if matrix.size:
            sampled |= np.any(~np.isnan(matrix), axis=0)
            totals += np.nansum(matrix, axis=0)
    return [
        round(total, 6) if has else None
        for total, has in zip(totals.tolist(), sampled.tolist(), strict=True)
    ]


def _peaks(matrix: npt.NDArray[np.float64]) -> Values:
    """Each row's largest sample (None: none); samples are already rounded."""
    import numpy as np

    if not matrix.shape[1]:
        return [None] * len(matrix)
    largest = np.where(np.isnan(matrix), -np.inf, matrix).max(axis=1)
    return [None if v == -np.inf else v for v in largest.tolist()]


def _rounded(values: npt.NDArray[np.float64], digits: int) -> Values:
    """An array as a list, NaN as None, each value rounded."""
    return [None if isnan(v) else round(v, digits) for v in values.tolist()]
