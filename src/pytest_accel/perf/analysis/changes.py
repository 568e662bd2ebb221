"""Persistent shifts over runs: a robust two-segment test on log durations.

For each test (or class, or module) the baseline's runs plus this run form a series,
oldest first.  A *change* is a step: the last ``m`` runs, this one included, sit at a
new level that the runs before them did not.  For each candidate ``m`` (from
``min_runs`` to ``max_runs``) the series is cut in two and the step is judged by:

- its size, ``d = level(after) - level(before)`` in log seconds, at least
  ``log(threshold)`` (the single-run rule's ratio).  A segment's level is its mean
  winsorised two spreads around its median: an occasional 3x outlier barely moves it;
- its evidence, ``d / (sigma * sqrt(1.1/n_before + 1.1/n_after))`` (a two-sample t
  statistic with a pooled, robust spread; 1.1 is the winsorised mean's variance
  factor), at least ``t`` plus ``t_per_run`` for each run beyond
  ``min_runs``: the search tries several cuts, and an older change has had time to
  pile up evidence.  ``sigma`` is the standard deviation of both segments' residuals
  from their medians, leaving out those beyond 3.5 scaled MADs (as robust as the MAD,
  far less noisy with 20 runs);
- its persistence: every run after the cut (``hold``), this one included, clears
  ``margin`` of the step from the old level.  One slow run, or two outliers next to a
  run at the old level, is not a change (one slow run is the single-run rule's
  business).  A run far slower than its own segment is left out of that count: slow
  spikes are common in CI and must not hide an improvement;
- the same duration and delta floors as the single-run rule, so a 3 ms test that became
  6 ms is not a change.

A short history (too few runs for that rule at all, fewer than ``min_before`` plus
``min_runs``: a baseline built with the 3 runs docs/ci.md suggests) has its own tier:
``short_before`` runs before and ``short_runs`` after suffice, with the spread at
least ``short_floor`` (above the single-run rule's short-baseline floor, 10%: tuned by
``bench/signal_quality.py --mode short``), so that a step of about 1.5x or more is
named on its third run.  Not on its second: a one-run spike followed by one outlier is
two slow runs too, and was named a change 5% of the time.  Meanwhile the slowed run
folded into the baseline is *pending* (``current_level``): the next run is judged
against the runs before it, so a widened spread does not hide the second slowed run.

Where several cuts qualify, the one with the most evidence names the change point
(``since``), moved later past leading runs still closer to the old level; fewer than
``min_runs`` runs left after that is not yet a change.
docs/regressions.md has the measured error rates and why this statistic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import log
from typing import TYPE_CHECKING

from pytest_accel.perf.analysis.rule import (
    CLIP_MADS,
    LOG_FLOOR,
    MAD_SCALE,
    Rule,
    judge,
    row_median,
    sample_spread,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]

CLIP_SIGMAS = 2.0  # a segment's values are winsorised this many spreads from its median
WINSORISED_VARIANCE = 1.1  # var(winsorised mean) / var(mean) at 2 sigmas, normal data


@dataclass(frozen=True)
class ChangeRule:
    """Defaults tuned by ``bench/signal_quality.py --mode runs`` (docs/regressions.md)."""

    min_runs: int = 3
    max_runs: int = 10
    min_before: int = 5
    t: float = 3.0
    # Each run further back a cut lies needs this much more evidence: the search looks at
    # several cuts, and an old change has piled up evidence anyway.
    t_per_run: float = 0.75
    # A history of fewer than min_before + min_runs runs: this many runs before the
    # cut, this many after, and a spread of at least short_floor (log seconds).
    short_before: int = 3
    short_runs: int = 3
    short_floor: float = 0.15
    hold: float = 1.0  # share of the runs after the cut that must clear the margin
    margin: float = 0.45  # ... which is this share of the step, from the old level
    threshold: float = 1.2
    min_delta: float = 0.05
    min_duration: float = 0.1


@dataclass(frozen=True)
class Steps:
    """Per row: whether a step was found, and if so its size and where it starts."""

    found: BoolArray
    runs: IntArray  # runs at the new level, this one included (0: no change)
    before: FloatArray  # seconds: the median of the runs before the change point
    after: FloatArray  # seconds: the median of the runs from it on


def _spread(residuals: FloatArray) -> FloatArray:
    """Each row's standard deviation of residuals (from their segment's median), leaving
    out those beyond CLIP_MADS scaled MADs: as robust as the MAD, far less noisy."""
    import numpy as np

    mad = MAD_SCALE * row_median(np.abs(residuals))
    inside = np.abs(residuals) <= CLIP_MADS * mad[:, None]
    kept = np.sum(inside, axis=1)
    squares = np.sum(np.where(inside, residuals**2, 0.0), axis=1)
    clipped = np.sqrt(squares / np.maximum(kept - 2, 1))  # two levels were estimated
    spread: FloatArray = np.where(kept >= 4, clipped, mad)
    return spread


def _level(values: FloatArray, median: FloatArray, sigma: FloatArray) -> FloatArray:
    """Each row's mean, winsorised CLIP_SIGMAS spreads around its median: one 3x
    outlier barely moves it, and on normal data it is almost as precise as the mean."""
    import numpy as np

    low = (median - CLIP_SIGMAS * sigma)[:, None]
    high = (median + CLIP_SIGMAS * sigma)[:, None]
    clipped = np.clip(values, low, high)
    present = ~np.isnan(clipped)
    # Not np.nanmean: it warns on an all-NaN row, and -W error makes that an exception.
    total = np.sum(np.where(present, clipped, 0.0), axis=1)
    count = np.sum(present, axis=1)
    level: FloatArray = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return level


def _trim_leading_runs(
    x: FloatArray, runs: IntArray, before: FloatArray, after: FloatArray
) -> IntArray:
    """A found cut can sit a run early (its first run still at the old level, noisy
    enough to clear the margin): such leading runs, closer to the old level than to the
    new one, are not part of the change.  ``since`` moves to the first run that is."""
    import numpy as np

    trimmed = runs.copy()
    midpoint = (before + after) / 2
    rising = after > before
    open_ = runs > 0
    for back in range(int(runs.max(initial=0)), 1, -1):  # the earliest run after the cut first
        at = x[:, -back] if back <= x.shape[1] else np.full(len(x), np.nan)
        leading = open_ & (trimmed == back)
        old_level = np.where(rising, at <= midpoint, at >= midpoint)
        trimmed = np.where(leading & old_level, back - 1, trimmed)
    result: IntArray = trimmed
    return result


def _screen(logs: FloatArray, rule: ChangeRule) -> IntArray:
    """The rows that may hold a step: the last ``min_runs`` runs (``short_runs``, for
    the short tier) at least the rule's ratio from the rest, this run present."""
    import numpy as np

    short = _is_short(logs, rule)
    moved = np.zeros(len(logs), dtype=bool)
    for last, rows in ((rule.min_runs, ~short), (rule.short_runs, short)):
        if logs.shape[1] > last and rows.any():
            recent = row_median(logs[:, -last:])
            rest = row_median(logs[:, :-last])
            moved |= rows & (np.abs(recent - rest) >= log(rule.threshold))
    found: IntArray = np.flatnonzero(moved & ~np.isnan(logs[:, -1]))
    return found


def _is_short(series: FloatArray, rule: ChangeRule) -> BoolArray:
    """The rows with too few runs for the full rule: the short tier's."""
    import numpy as np

    short: BoolArray = np.sum(~np.isnan(series), axis=1) < rule.min_before + rule.min_runs
    return short


def find_steps(series: FloatArray, rule: ChangeRule) -> Steps:
    """Steps in ``series`` (rows of seconds, oldest run first, NaN = no sample; the
    last column is this run).  Vectorised over rows; rows that cannot hold a step
    (never at the duration floor, ``on_rows_reaching``; too few runs, or a last-three, or
    last-two, level within the threshold of the rest: ``_screen``) are left out before
    the search."""
    import numpy as np

    if not series.shape[1]:
        return _find_steps(series, rule)
    return on_rows_reaching(
        np.fmax.reduce(series, axis=1),
        rule,
        lambda rows: _find_steps(series if rows is None else series[rows], rule),
    )


def on_rows_reaching(
    peaks: FloatArray, rule: ChangeRule, search: Callable[[IntArray | None], Steps]
) -> Steps:
    """``search`` of the rows whose largest sample (``peaks``; NaN: none) reaches the
    rule's ``min_duration`` (``None``: of every row), as the steps of all rows: no step
    in the others.  Those are the only rows a step can be found in: a level is a
    winsorised mean of a row's samples, never above the largest, and a step needs one
    level at the floor.  Every row is searched where the floor is so low that a sample's
    log floor could reach it."""
    import numpy as np

    if rule.min_duration <= LOG_FLOOR:
        return search(None)
    with np.errstate(invalid="ignore"):
        reach = peaks >= rule.min_duration
    if reach.all():
        return search(None)
    rows: IntArray = np.flatnonzero(reach)
    steps, count = search(rows), len(peaks)
    found = np.zeros(count, dtype=bool)
    runs = np.zeros(count, dtype=np.int64)
    before, after = np.full(count, np.nan), np.full(count, np.nan)
    found[rows], runs[rows] = steps.found, steps.runs
    before[rows], after[rows] = steps.before, steps.after
    return Steps(found, runs, before, after)


def _find_steps(series: FloatArray, rule: ChangeRule) -> Steps:
    import numpy as np

    rows, width = series.shape
    found = np.zeros(rows, dtype=bool)
    runs = np.zeros(rows, dtype=np.int64)
    before_level = np.full(rows, np.nan)
    after_level = np.full(rows, np.nan)
    if width < min(rule.min_before + rule.min_runs, rule.short_before + rule.short_runs):
        return Steps(found, runs, before_level, after_level)
    with np.errstate(all="ignore"):
        logs = np.maximum(series, LOG_FLOOR)
        np.log(logs, out=logs)  # in place: at 100,000 tests a copy is 17 MB to fault in
        min_step = log(rule.threshold)
        candidates = _screen(logs, rule)
        if not len(candidates):
            return Steps(found, runs, before_level, after_level)
        x = logs[candidates]
        best = np.full(len(candidates), -np.inf)
        best_m = np.zeros(len(candidates), dtype=np.int64)
        best_before = np.full(len(candidates), np.nan)
        best_after = np.full(len(candidates), np.nan)
        best_short = np.zeros(len(candidates), dtype=bool)
        short = _is_short(x, rule)
        for m in range(
            min(rule.min_runs, rule.short_runs), min(rule.max_runs, width - rule.short_before) + 1
        ):
            head, tail = x[:, :-m], x[:, -m:]
            n_head = np.sum(~np.isnan(head), axis=1)
            n_tail = np.sum(~np.isnan(tail), axis=1)
            median_head, median_tail = row_median(head), row_median(tail)
            sigma = _spread(
                np.concatenate([head - median_head[:, None], tail - median_tail[:, None]], axis=1)
            )
            level_head = _level(head, median_head, sigma)
            level_tail = _level(tail, median_tail, sigma)
            step = level_tail - level_head
            error = np.where(short, np.maximum(sigma, rule.short_floor), sigma) * np.sqrt(
                WINSORISED_VARIANCE * (1 / np.maximum(n_head, 1) + 1 / np.maximum(n_tail, 1))
            )
            evidence = np.abs(step) / np.where(error > 0, error, np.nan)
            bar = level_head + rule.margin * step
            beyond = np.sign(step)[:, None] * (tail - bar[:, None]) > 0
            # A run far slower than its segment (a noisy neighbour, a cold cache) says
            # nothing about the level: it is left out of the count, never counted for it.
            spike = tail > (median_tail + CLIP_SIGMAS * sigma)[:, None]
            counted = ~np.isnan(tail) & ~(spike & (step < 0)[:, None])
            held = np.sum(beyond & counted, axis=1) / np.maximum(np.sum(counted, axis=1), 1)
            valid = (
                np.where(
                    short,
                    (n_head >= rule.short_before) & (n_tail >= rule.short_runs),
                    (n_head >= rule.min_before) & (n_tail >= rule.min_runs),
                )
                & (np.abs(step) >= min_step)
                & (
                    evidence
                    >= rule.t
                    + rule.t_per_run * (m - np.where(short, rule.short_runs, rule.min_runs))
                )
                & (held >= rule.hold)
                & (beyond[:, -1] | ~counted[:, -1])
                & (evidence > best)
            )
            best = np.where(valid, evidence, best)
            best_m = np.where(valid, m, best_m)
            best_before = np.where(valid, level_head, best_before)
            best_after = np.where(valid, level_tail, best_after)
            best_short = np.where(valid, short, best_short)
        best_m = _trim_leading_runs(x, best_m, best_before, best_after)
    before_s, after_s = np.exp(best_before), np.exp(best_after)
    big_enough = (
        (np.maximum(before_s, after_s) >= rule.min_duration)
        & (np.abs(after_s - before_s) >= rule.min_delta)
        # A cut whose leading runs were still at the old level is not yet min_runs long.
        & (best_m >= np.where(best_short, rule.short_runs, rule.min_runs))
    )
    chosen = candidates[big_enough]
    found[chosen] = True
    runs[chosen] = best_m[big_enough]
    before_level[chosen] = before_s[big_enough]
    after_level[chosen] = after_s[big_enough]
    return Steps(found, runs, before_level, after_level)


def change_rule(rule: Rule) -> ChangeRule:
    """The change detector, with the single-run rule's ratio and floors."""
    return ChangeRule(
        threshold=rule.threshold, min_delta=rule.min_delta, min_duration=rule.min_duration
    )


def pending_rows(samples: FloatArray, count: FloatArray, rule: Rule, exclude: IntArray) -> IntArray:
    """The rows of a history too short for the full change rule whose newest run was a
    regression against the runs before it: a step the short tier cannot name yet.  The
    next run is judged against the runs before that one; judged against all of them, the
    slowed run's own spread would hide a second slowed run (docs/regressions.md)."""
    import numpy as np

    steps_rule = change_rule(rule)
    newest = samples[:, -1] if samples.shape[1] else np.full(len(samples), np.nan)
    short = count + 1 < steps_rule.min_before + steps_rule.min_runs
    candidates = short & ~np.isnan(newest) & (count - 1 >= rule.min_samples)
    candidates[exclude] = False
    rows: IntArray = np.flatnonzero(candidates)
    if not len(rows):
        return rows
    slowed: IntArray = rows[judge(newest[rows], samples[rows, :-1], rule).regressed]
    return slowed


def current_level(
    samples: FloatArray,
    medians: FloatArray,
    spread: tuple[FloatArray, FloatArray],
    rule: Rule,
    known: tuple[IntArray, IntArray] | None = None,
) -> tuple[FloatArray, FloatArray, tuple[FloatArray, FloatArray], BoolArray, BoolArray]:
    """What this run is judged against: each id's samples since the last change its
    baseline's own runs show (accepted or not), else all of them: their count, median
    and spread.  After a speed-up nobody accepted, a run twice as slow as the new level
    is a regression, not hidden by the old level's samples in the median.  Also which
    ids had such a change (settled): a speed-up among them was reported when it was
    found.  A row with a pending step (``pending_rows``) is judged without its newest run
    (the last array: which rows).
    Only the rows with a change are copied (all of them are 17 MB at 100,000
    tests).  ``known``: those changes as the baseline's summary found them (the rows
    and their runs at the new level, by the same rule), not searched for again."""
    import numpy as np

    count = np.sum(~np.isnan(samples), axis=1).astype(np.float64)
    settled = np.zeros(len(samples), dtype=bool)
    pending_mask = np.zeros(len(samples), dtype=bool)
    if known is not None:
        rows, new_runs = known
    elif samples.size:
        own = find_steps(samples, change_rule(rule))
        rows = np.flatnonzero(own.found)
        new_runs = own.runs[rows]
    else:
        return count, medians, spread, settled, pending_mask
    pending = pending_rows(samples, count, rule, exclude=rows)
    if not len(rows) and not len(pending):
        return count, medians, spread, settled, pending_mask
    settled[rows] = True
    pending_mask[pending] = True
    width = samples.shape[1]
    columns = np.arange(width)[None, :]
    left_out = np.concatenate(
        [
            columns < (width - new_runs)[:, None],  # the runs before the change
            np.broadcast_to(columns == width - 1, (len(pending), width)),  # the pending run
        ]
    )
    rows = np.concatenate([rows, pending])
    part = samples[rows]  # a copy of those rows
    part[left_out] = np.nan
    count[rows] = np.sum(~np.isnan(part), axis=1)
    medians, centre, scale = medians.copy(), spread[0].copy(), spread[1].copy()
    medians[rows] = row_median(part)
    centre[rows], scale[rows] = sample_spread(part, rule)
    if rule.log_space:
        # As much evidence as the short tier asks of a change: what is pending may be
        # an outlier, and the run after one is judged on fewer samples than it had.
        scale[pending] = np.fmax(scale[pending], change_rule(rule).short_floor)
    return count, medians, (centre, scale), settled, pending_mask
