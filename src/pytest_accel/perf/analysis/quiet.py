"""The parts of a comparison that need no numpy, and a run compared without it when
nothing can be found.

Every finding or change of a test, class or module needs a timing of at least the
rule's ``min_duration``: now, as the baseline's median, or as either level of a change
(a level is never above the largest sample).  When no kind reaches it, here or in the
baseline, what is left to compare is the inventory (new, missing and warm-up tests),
the suite total, the runner's speed and the suite's change screen: sums and medians
over the baseline's stored summary (``Summary``), a few milliseconds for 10,000
tests, where importing numpy costs 0.1 s and 16 MB (docs/benchmarks.md).  Suites of
fast tests are the ones where that import would be most of the plugin's cost, and an
ML suite has numpy loaded anyway.

``quiet_comparison`` returns None whenever a condition fails, and ``comparison.compare``
then runs the full comparison; the two share the functions here, and a test checks
that both give the same result.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import compress, repeat
from math import fsum, log
from operator import ge
from typing import NamedTuple

from pytest_accel.perf.analysis.causes import is_explained, usual_layout
from pytest_accel.perf.analysis.changes import ChangeRule
from pytest_accel.perf.analysis.layouts import same_layout
from pytest_accel.perf.analysis.rule import (
    LOG_FLOOR,
    SHORT_HISTORY,
    SHORT_NOISE_FLOOR,
    Rule,
    plain_spread,
)
from pytest_accel.perf.analysis.speed import current_speed, median, runner_speed
from pytest_accel.perf.model.columns import Values
from pytest_accel.perf.model.findings import Comparison, Finding, TimingVerdict, TracingVerdict
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.samples import EnvHistory, Summary, has_sample
from pytest_accel.perf.model.timings import RunTimings, run_labels


class Compared(NamedTuple):
    """The tests and warm-ups a comparison judges, with their timings now."""

    tests: dict[str, float]
    warmups: dict[str, float]


def take_inventory(
    run: RunTimings,
    env: EnvHistory,
    summary: Summary,
    rule: Rule,
    *,
    overrides: Mapping[str, Override],
    new_slow: float,
    timed: Compared | None = None,
) -> tuple[Comparison, Compared]:
    """The comparison begun: the new, new and slow, missing and warm-up tests; and the
    tests to compare, and the warm-ups to compare with the baseline's warm-ups.
    ``timed``: the run's comparable tests and warm-ups, when the caller has them."""
    now, warm_now = timed or Compared(
        run.comparable(env.test_metric), run.comparable(env.test_metric, warmup=True)
    )
    # An id has a sample in some run exactly when it has a median.  Usually every id
    # has one (ids without samples are dropped), and the ids' own index is the set.
    warm_sampled = _sampled(env.ids["warmup"], summary.warmup_median, env.positions("warmup"))
    ids = env.ids["tests"]
    if in_their_order(now, ids) and None not in summary.median:
        # A suite that did not change: the tests timed now are the baseline's, in its
        # order, each sampled.  Nothing of them is new or missing, and ``now`` is its own
        # index: no index of 100,000 ids is built, no set operation walks them.
        sampled: Collection[str] = now.keys()
        new = [i for i in warm_now if i not in now and i not in warm_sampled]
        unseen = [i for i in warm_sampled if i not in now and i not in warm_now]
        missing = _missing(run, [unseen]) if unseen else []
        compared = now
    else:
        sampled = _sampled(ids, summary.median, env.positions("tests"))
        new = _new(now, warm_now, sampled, warm_sampled)
        missing = _missing(run, [sampled, warm_sampled])
        compared = _kept(now, sampled)
    seconds = {i: now[i] if i in now else warm_now[i] for i in new}
    warm_compared = _kept(warm_now, warm_sampled)
    ignored = {i for i, o in overrides.items() if o.ignore}
    if ignored:
        compared, warm_compared = _without(compared, ignored), _without(warm_compared, ignored)
    timing = TimingVerdict(
        runs=len(env.runs),
        min_samples=rule.min_samples,
        new=new,
        missing=missing,
        new_slow=sorted(
            ((i, seconds[i]) for i in new if seconds[i] >= new_slow), key=lambda item: -item[1]
        ),
        warmup=[i for i in warm_now if i in sampled and i not in warm_sampled],
        compared=len(compared) + len(warm_compared),
        run_total=fsum(now.values()) + fsum(warm_now.values()),
    )
    return Comparison(run.key, timing), Compared(compared, warm_compared)


def in_their_order(now: Mapping[str, float], ids: list[str]) -> bool:
    """Whether ``now`` times exactly the baseline's ``ids``, in their order: a suite that
    did not change, where a row is a position and no id is new or missing."""
    return len(now) == len(ids) and list(now) == ids


def _new(
    now: dict[str, float],
    warm_now: dict[str, float],
    sampled: Collection[str],
    warm_sampled: Collection[str],
) -> list[str]:
    """The ids timed now with no samples of either kind, in order.  Usually there are
    none, and C-level set operations say so: no Python loop over 100,000 ids."""
    fresh = (now.keys() - sampled).union(warm_now.keys() - sampled).difference(warm_sampled)
    return [i for i in (*now, *warm_now) if i in fresh] if fresh else []


def _kept(now: dict[str, float], sampled: Collection[str]) -> dict[str, float]:
    """The ids of ``now`` with samples: a C-level filter (one subset test when, as usual,
    every id has samples: then ``now`` itself, never changed, not a copy of 100,000)."""
    if now.keys() <= sampled:  # type: ignore[operator]  # a set or a dict's keys
        return now
    return dict(compress(now.items(), map(sampled.__contains__, now)))


def _without(timed: dict[str, float], ignored: set[str]) -> dict[str, float]:
    """``timed`` without the ``ignored`` ids (a copy only where it has some)."""
    if ignored.isdisjoint(timed):
        return timed
    return {i: t for i, t in timed.items() if i not in ignored}


def module_path_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _sampled(ids: list[str], medians: Values, index: Mapping[str, int]) -> Collection[str]:
    """The ids with a median: ``index`` itself when all have one, no copy of 10,000 ids."""
    if None not in medians:  # checked in C
        return index.keys()
    return set(compress(ids, map(has_sample, medians)))


def _missing(run: RunTimings, sampled: list[Collection[str]]) -> list[str]:
    """Tests with samples that did not run, in modules that ran here whole: they were
    removed or renamed.  A module with deselected tests (-k, -m, another shard) says
    nothing about the tests it did not run; neither does one that did not run."""
    ran = set(run.ids)
    if all(ran.issuperset(ids) for ids in sampled):  # C-level: usually every one ran
        return []
    modules = run.ran_modules() - run.partial_modules
    return sorted(
        {t for ids in sampled for t in ids if t not in ran and module_path_of(t) in modules}
    )


def suite_history(env: EnvHistory, summary: Summary) -> list[tuple[str, float]]:
    """Each baseline run's tests (warm-ups included) summed, labelled by its commit."""
    labels = run_labels([run.identity for run in env.runs])
    return [
        (label, total)
        for label, total in zip(labels, summary.totals, strict=True)
        if total is not None
    ]


def aligned(values: Values, index: Mapping[str, int], ids: list[str]) -> list[float]:
    """The summary's values of ``ids`` (rows in ``index``), None as NaN."""
    found = list(map(values.__getitem__, map(index.__getitem__, ids)))
    if None not in found:  # the usual case, checked in C
        return found  # type: ignore[return-value]
    nan = float("nan")
    return [nan if v is None else v for v in found]


def _of_tests(values: Values, env: EnvHistory, kind: str, ids: list[str]) -> list[float]:
    """``aligned`` for ``ids`` of ``kind``: where they are the baseline's ids in its
    order (as in a suite that did not change), the summary's own list (None as NaN),
    with no index of them built (8 MB at 100,000 tests)."""
    if ids != env.ids[kind]:  # C-level; the ids are shared
        return aligned(values, env.positions(kind), ids)
    if None not in values:
        return values  # type: ignore[return-value]  # no None in it
    nan = float("nan")
    return [nan if v is None else v for v in values]


def suite_finding(
    timing: TimingVerdict,
    count: int,
    accounted: float,
    rule: Rule,
    levels: Sequence[float] | None = None,
) -> tuple[str, Finding] | None:
    """The suite total's verdict (``timing.suite_now`` against ``suite_then``), where
    the findings (``accounted`` seconds of shift) do not explain it.  The floors and the
    ratio decide, and with ``min_samples`` baseline runs the z-score of its log ratio
    against the plain spread of those runs' ``levels`` (each run's log total of the
    tests compared, over the same tests' medians; one number per run: no outlier to
    clip, and two runs at another level must widen it, not be dropped): judged on
    execution time, a JAX suite's total is a few seconds of dispatch that moves 10% run
    to run, and a shard's, half as many tests, more.

    The total is judged after the runner's speed (``timing.speed``, where ``--perf-
    normalize`` estimates one): a busy runner makes every test slower alike, and that is
    the runner, not the code; the summary line says how much slower it was.  And a run
    spread over processes unlike the baseline's runs (``-n 2`` against serial runs)
    slows every test by the processes' contention, not by anything in the code, and by
    how much depends on the test (compute-bound ones most): there the total is not
    judged."""
    now, then = timing.suite_now, timing.suite_then
    if timing.layout is not None or is_explained(now - then, accounted):
        return None
    measured = now / then if then > 0 else float("inf")
    speed = timing.speed if timing.speed and timing.speed > 0 else 1.0
    ratio = measured / speed  # what is left of the move once the runner's speed is out
    now = then * ratio if then > 0 else now
    if levels is None:  # the baseline runs' whole totals, where the same tests are not known
        levels = [log(total) for _, total in timing.suite_history if total > 0]
    enough = len(levels) >= rule.min_samples
    spread = plain_spread(levels) if enough else 0.0
    if enough and len(levels) < SHORT_HISTORY:  # as for a test (docs/regressions.md)
        spread = max(spread, SHORT_NOISE_FLOOR)
    z = log(ratio) / spread if spread > 0 and 0 < ratio < float("inf") else None
    if z is not None:
        large = ratio >= rule.large_ratio or ratio * rule.large_ratio <= 1
        if abs(z) <= rule.mad_k * (rule.large_k_factor if large else 1.0):
            return None  # within the noise of the baseline runs' totals
    finding = Finding(
        "session",
        "suite total",
        then,
        timing.suite_now,
        measured,
        count,
        z=z,
        corrected=ratio if speed != 1.0 else None,
    )
    # As a test's: the runner's speed explains a finding away, never makes one, so it
    # holds as measured too (jmp's suite on a busy runner: "improved", at 0.75x for the
    # runner's speed, a total 1.19x its baseline as measured).
    measured_now = timing.suite_now
    if _slower(now, then, rule) and _slower(measured_now, then, rule):
        return ("regression" if enough else "learning"), finding
    if not enough:
        return None
    if _faster(now, then, rule) and _faster(measured_now, then, rule):
        return "improvement", finding
    return None


def _slower(now: float, then: float, rule: Rule) -> bool:
    return now >= rule.min_duration and now - then >= rule.min_delta and now > then * rule.threshold


def _faster(now: float, then: float, rule: Rule) -> bool:
    return (
        then >= rule.min_duration and then - now >= rule.min_delta and now * rule.threshold < then
    )


def may_step(series: Sequence[float | None], rule: ChangeRule) -> bool:
    """Whether ``find_steps`` could find a step in one series (oldest first, this run
    last; None: no sample): its screen, the last ``min_runs`` runs (``short_runs``, for
    a short history's tier) against the rest."""
    present = len(series) - series.count(None)
    if present < rule.short_before + rule.short_runs or series[-1] is None:
        return False
    last = rule.short_runs if present < rule.min_before + rule.min_runs else rule.min_runs
    recent = [log(max(v, LOG_FLOOR)) for v in series[-last:] if v is not None]
    rest = [log(max(v, LOG_FLOOR)) for v in series[:-last] if v is not None]
    return bool(rest) and abs(median(recent) - median(rest)) >= log(rule.threshold)


def _nothing_to_find(
    env: EnvHistory,
    summary: Summary,
    kind: str,
    now: Mapping[str, float],
    *,
    floor: float,
    change_rule: ChangeRule,
) -> bool:
    """Whether no id of ``kind`` compared ``now`` can be a finding or a change: each is
    below ``floor`` now and in every sample, or (an outlier in its history) below it as
    a median and without a step by ``find_steps``'s screen."""
    ids = env.ids[kind]
    rows: Iterable[int | None]
    if in_their_order(now, ids):
        if any(map(ge, now.values(), repeat(floor))):
            return False  # none is new, so one at the floor now can be a finding
        rows = range(len(ids))  # and no index of 100,000 ids is built
    else:
        rows = map(env.positions(kind).get, now)
    peaks = summary.peaks[kind]
    for seconds, row in zip(now.values(), rows, strict=True):
        if row is None:
            continue  # new: nothing to compare with
        if seconds >= floor:
            return False
        peak = peaks[row]
        if peak is not None and peak >= floor:
            samples = [run.sample(kind, row) for run in env.runs]
            present = [s for s in samples if s is not None]
            if present and median(present) >= floor:
                return False
            if may_step([*samples, seconds], change_rule):
                return False
    return True


def rule_spread_is_summarised(rule: Rule) -> bool:
    """Whether the summary's noise is this rule's (it is the default rule's)."""
    default = Rule()
    return rule.spread == default.spread and rule.log_space == default.log_space


def quiet_comparison(
    run: RunTimings,
    env: EnvHistory,
    rule: Rule,
    overrides: Mapping[str, Override],
    *,
    new_slow: float,
    change_rule: ChangeRule,
    timed: Compared | None = None,
) -> Comparison | None:
    """The comparison, when nothing but the suite total can be found; None otherwise.
    ``timed``: the run's comparable tests and warm-ups, when the caller has them."""
    summary = env.stored_summary()
    if summary is None or not rule_spread_is_summarised(rule):
        return None
    timed = timed or Compared(
        run.comparable(env.test_metric), run.comparable(env.test_metric, warmup=True)
    )
    tracing = run.comparable_tracing() if env.ids["trace"] else {}
    if fsum(tracing.values()) >= rule.min_duration:
        return None  # the suite's tracing, summed, can be a finding (comparison.py)
    judged = {
        "tests": timed.tests,  # ignored and new ones too: a bound needs no more care
        "warmup": timed.warmups,
        "classes": run.classes.comparable(),
        "modules": run.modules.comparable(),
    }
    for kind, now in judged.items():
        if not _nothing_to_find(
            env, summary, kind, now, floor=rule.min_duration, change_rule=change_rule
        ):
            return None
    result, compared = take_inventory(
        run, env, summary, rule, overrides=overrides, new_slow=new_slow, timed=timed
    )
    tests = list(compared.tests)
    current = list(compared.tests.values())
    medians = _of_tests(summary.median, env, "tests", tests)
    speeds: list[float] | None = None
    if rule.normalize:
        noise = _of_tests(summary.noise, env, "tests", tests)
        speed = runner_speed(current, medians, noise)
        levels = _of_tests(summary.level, env, "tests", tests)
        speeds = [*summary.speeds, current_speed(current, levels)]
        if all(s == 1.0 for s in speeds):
            speeds = None
        if speeds is not None:
            total = fsum(medians)  # compared tests have samples: no NaN
            if may_step([s * total for s in speeds], change_rule):
                return None  # a change of the suite: find_steps decides
        if speed is not None or speeds is not None:
            result = result.timed(speed=speed or 1.0)
    result = result.timed(suite_history=suite_history(env, summary))
    usual = usual_layout(env)
    if not same_layout(run.layout, usual):
        result = result.timed(layout=run.layout, baseline_layout=usual)
    elif tracing:
        result = replace(
            result, tracing=TracingVerdict(judged=True)
        )  # nothing in it could be a finding
    warm = list(compared.warmups)
    warm_medians = _of_tests(summary.warmup_median, env, "warmup", warm)
    count = len(tests) + len(warm)
    if count:
        result = result.timed(
            suite_now=fsum(current) + fsum(compared.warmups[i] for i in warm),
            suite_then=fsum(medians) + fsum(warm_medians),
        )
        if suite_finding(result.timing, count, 0.0, rule) is not None:
            return None  # the full comparison judges it, against the same tests' runs
    return result
