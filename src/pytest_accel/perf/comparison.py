"""A run compared with its baseline: findings for tests, classes, modules and the suite.

Two kinds of finding (docs/regressions.md):

- a *regression* (or improvement): this run against the baseline's samples, by the
  single-run rule (``perf.rule``);
- a *change*: a persistent shift over the baseline's recent runs plus this one
  (``perf.changes``), with the run where it began.  A test that changed is not also
  listed as a regression.

Runner speed: with at least ``MIN_FOR_SPEED`` tests compared, the median of their log
ratios estimates how fast this runner was, and is used only where the tests agree (at
least half within their own noise of it: two spreads, or 10%, whichever is wider).
A finding then needs both its raw and its corrected ratio to pass the rule: the
correction can explain findings away, never make one.

One cause, one alarm: a class, a module or the suite total is reported only where its
own members' findings do not already explain at least half of its shift; a shift of
most tests at once is one finding about the suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from math import log
from typing import TYPE_CHECKING, Any

from pytest_accel.perf.baseline import EnvHistory
from pytest_accel.perf.changes import ChangeRule, Steps, find_steps
from pytest_accel.perf.rule import Rule, judge, row_median
from pytest_accel.perf.timings import RunIdentity, RunTimings

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

MIN_FOR_SPEED = 20
AGREEMENT = 0.5  # share of the tests within their noise band of the speed estimate
SPEED_BAND = log(1.1)  # the narrowest noise band
AGREEMENT_SPREADS = 2.0  # a test's noise band: this many of its own spreads
EXPLAINED = 0.5  # share of a group's shift its members' findings must account for
SUITE_WIDE = 0.5  # share of the compared tests that, changed together, are one finding


class PerfRegressionWarning(UserWarning):
    """A test, class, module or the suite got slower than its baseline."""


@dataclass(frozen=True)
class Override:
    """A ``perf(threshold=..., min_delta=..., ignore=...)`` marker on one test."""

    threshold: float | None = None
    min_delta: float | None = None
    ignore: bool = False


@dataclass(frozen=True)
class Finding:
    kind: str  # "test", "class", "module" or "session"
    id: str
    baseline: float  # median of the samples (the sum of medians for the session)
    current: float
    ratio: float  # current / baseline, as measured
    samples: int
    z: float | None = None
    corrected: float | None = None  # the ratio after the runner-speed correction, if any
    warmup: bool = False  # a test that ran first in its process, judged against such runs

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "id": self.id,
            "baseline": round(self.baseline, 6),
            "current": round(self.current, 6),
            "ratio": round(self.ratio, 4),
            "samples": self.samples,
            "z": None if self.z is None else round(self.z, 2),
        }
        if self.corrected is not None:
            data["corrected_ratio"] = round(self.corrected, 4)
        if self.warmup:
            data["warmup"] = True
        return data


@dataclass(frozen=True)
class Change:
    kind: str  # "test", "class", "module" or "session"
    id: str
    before: float  # seconds: the level before the change point
    after: float  # seconds: the level from it on
    runs: int  # consecutive runs at the new level, this one included
    since: RunIdentity  # the first of them

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before > 0 else float("inf")

    @property
    def slower(self) -> bool:
        return self.after > self.before

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "before": round(self.before, 6),
            "after": round(self.after, 6),
            "ratio": round(self.ratio, 4),
            "runs": self.runs,
            "since": self.since.to_json(),
        }


@dataclass
class Comparison:
    env: str
    regressions: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    new_slow: list[tuple[str, float]] = field(default_factory=list)  # (test, seconds)
    missing: list[str] = field(default_factory=list)
    compared: int = 0
    speed: float = 1.0  # the runner's speed, where the correction applied (1.0: none)
    # Tests that ran first in their process here but in none of the baseline's runs.
    warmup: list[str] = field(default_factory=list)
    found: bool = True  # whether the baseline has the hardware key
    available_envs: list[str] = field(default_factory=list)  # its keys, when it has not

    @property
    def slowdowns(self) -> list[Change]:
        return [c for c in self.changes if c.slower]

    @property
    def alarms(self) -> int:
        """What ``--perf-fail`` fails on: regressions and slowdown changes."""
        return len(self.regressions) + len(self.slowdowns)

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "regressions": [f.to_json() for f in self.regressions],
            "improvements": [f.to_json() for f in self.improvements],
            "changes": [c.to_json() for c in self.changes],
            "new": self.new,
            "new_slow": [{"id": i, "current": round(s, 6)} for i, s in self.new_slow],
            "missing": self.missing,
            "compared": self.compared,
            "speed": round(self.speed, 4),
            "warmup": self.warmup,
            "available_envs": self.available_envs,
        }


def change_rule(rule: Rule) -> ChangeRule:
    """The change detector, with the single-run rule's ratio and floors."""
    return ChangeRule(
        threshold=rule.threshold, min_delta=rule.min_delta, min_duration=rule.min_duration
    )


@dataclass
class _Judged:
    """One kind's verdicts, before the findings are made."""

    ids: list[str]
    current: FloatArray
    medians: FloatArray
    noise: FloatArray  # each one's spread, in log seconds (NaN: unknown)
    regressed: BoolArray
    improved: BoolArray
    steps: Steps
    findings: list[tuple[str, Finding]]  # ("regression"|"improvement", finding)
    changes: list[Change]


def compare(
    run: RunTimings,
    env: EnvHistory,
    rule: Rule,
    overrides: Mapping[str, Override] | None = None,
    *,
    new_slow: float = 1.0,
) -> Comparison:
    """Compare ``run`` with the baseline's runs ``env`` of the same hardware key."""

    overrides = overrides or {}
    result = Comparison(run.key)
    now = run.comparable(env.test_metric)
    warm_now = run.comparable(env.test_metric, warmup=True)
    ids, matrix = env.matrix("tests")
    sampled = _sampled(ids, matrix)
    warm_ids, warm_matrix = env.matrix("warmup")
    warm_sampled = _sampled(warm_ids, warm_matrix)
    result.new = [i for i in (*now, *warm_now) if not sampled.get(i) and not warm_sampled.get(i)]
    timed = {**now, **warm_now}
    result.new_slow = sorted(
        ((i, timed[i]) for i in result.new if timed[i] >= new_slow), key=lambda item: -item[1]
    )
    result.warmup = [i for i in warm_now if sampled.get(i) and not warm_sampled.get(i)]
    result.missing = _missing(run, [i for i in ids if sampled[i]] + list(warm_sampled))
    ignored = {i for i, o in overrides.items() if o.ignore}
    compared = {i: now[i] for i in now if sampled.get(i) and i not in ignored}
    warm_compared = {i: warm_now[i] for i in warm_now if warm_sampled.get(i) and i not in ignored}
    result.compared = len(compared) + len(warm_compared)
    setting = _Setting(env, run, rule)
    tests = _judge(setting, "test", compared, (ids, matrix), overrides)
    speed = _runner_speed(tests) if rule.normalize else None
    if speed is not None:
        result.speed = speed
        setting = _Setting(env, run, rule, speed)
        tests = _judge(setting, "test", compared, (ids, matrix), overrides)
    warm = _judge(setting, "test", warm_compared, (warm_ids, warm_matrix), overrides)
    warm.findings = [(what, replace(f, warmup=True)) for what, f in warm.findings]
    _collect(result, warm)
    _suite_wide(tests, result.compared)
    _collect(result, tests)
    # A group is reported only where what it holds does not explain it: a class by its
    # tests, a module by its tests and classes, the suite by all of them.
    class_of = dict(zip(run.ids, run.cls, strict=True))
    module_of = dict(zip(run.ids, run.module, strict=True))
    classes = _judge(setting, "class", run.classes.comparable(), env.matrix("classes"), {})
    classes = _unexplained(classes, _explained([(tests, class_of)]))
    modules = _judge(setting, "module", run.modules.comparable(), env.matrix("modules"), {})
    in_module = {ident: _module_of(ident) for ident in classes.ids}
    modules = _unexplained(modules, _explained([(tests, module_of), (classes, in_module)]))
    _collect(result, classes)
    _collect(result, modules)
    _judge_suite(result, [tests, warm], [classes, modules], rule)
    result.regressions.sort(key=lambda f: (-f.ratio, f.kind, f.id))
    result.improvements.sort(key=lambda f: (f.ratio, f.kind, f.id))
    result.changes.sort(key=lambda c: (not c.slower, -abs(log(max(c.ratio, 1e-9))), c.id))
    return result


def _sampled(ids: list[str], matrix: FloatArray) -> dict[str, bool]:
    """Whether the baseline has any sample of each id."""
    import numpy as np

    if not matrix.size:
        return dict.fromkeys(ids, False)
    return dict(zip(ids, (~np.all(np.isnan(matrix), axis=1)).tolist(), strict=True))


def _module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _missing(run: RunTimings, sampled: list[str]) -> list[str]:
    """Tests with samples that did not run, in modules that ran here whole: they were
    removed or renamed.  A module with deselected tests (-k, -m, another shard) says
    nothing about the tests it did not run; neither does one that did not run."""
    ran = set(run.ids)
    modules = run.ran_modules() - run.partial_modules
    return sorted(t for t in sampled if t not in ran and _module_of(t) in modules)


def _runner_speed(tests: _Judged) -> float | None:
    """How much slower (> 1) or faster this runner was, where the tests agree: most of
    them sit within their own noise of the estimate.  Tests that moved for their own
    reasons (a warm compile cache) split the ratios in two, and then there is no one
    runner speed to apply."""
    import numpy as np

    current, medians = tests.current, tests.medians
    usable = (medians > 0) & (current > 0)
    if usable.sum() < MIN_FOR_SPEED:
        return None
    ratios = np.log(current[usable] / medians[usable])
    estimate = float(np.median(ratios))
    spread = np.nan_to_num(tests.noise[usable], nan=0.0)
    band = np.maximum(SPEED_BAND, AGREEMENT_SPREADS * spread)
    agreeing = float(np.mean(np.abs(ratios - estimate) <= band))
    if agreeing < AGREEMENT or abs(estimate) < log(1.02):
        return None
    return float(np.exp(estimate))


@dataclass(frozen=True)
class _Setting:
    """What every kind is judged with."""

    env: EnvHistory
    run: RunTimings
    rule: Rule
    speed: float | None = None


def _judge(
    setting: _Setting,
    kind: str,
    now: Mapping[str, float],
    baseline: tuple[list[str], FloatArray],
    overrides: Mapping[str, Override],
) -> _Judged:
    """One kind's single-run verdicts and changes, for the ids of ``now`` the baseline
    has samples of."""
    import numpy as np

    env, run, rule, speed = setting.env, setting.run, setting.rule, setting.speed
    ids, matrix = baseline

    index = {ident: row for row, ident in enumerate(ids)}
    present = [i for i in now if i in index]
    rows = np.array([index[i] for i in present], dtype=np.int64)
    samples = matrix[rows] if len(rows) else np.zeros((0, len(env.runs)))
    current = np.array([now[i] for i in present], dtype=np.float64)
    medians = row_median(samples) if len(rows) else np.zeros(0)
    thresholds, deltas = _overrides(present, overrides, rule)
    raw = judge(current, samples, rule, threshold=thresholds, min_delta=deltas, median=medians)
    regressed, improved = raw.regressed, raw.improved
    if speed is not None:  # explains findings away, never makes one
        corrected = judge(
            current / speed, samples, rule, threshold=thresholds, min_delta=deltas, median=medians
        )
        regressed, improved = regressed & corrected.regressed, improved & corrected.improved
    steps = find_steps(np.concatenate([samples, current[:, None]], axis=1), change_rule(rule))
    with np.errstate(all="ignore"):
        noise = raw.spread if rule.log_space else raw.spread / medians
    judged = _Judged(present, current, medians, noise, regressed, improved, steps, [], [])
    for row in np.flatnonzero(steps.found):
        cut = len(env.runs) + 1 - int(steps.runs[row])
        since = env.runs[cut].identity if cut < len(env.runs) else run.identity
        judged.changes.append(
            Change(
                kind,
                present[row],
                float(steps.before[row]),
                float(steps.after[row]),
                int(steps.runs[row]),
                since,
            )
        )
    changed = dict(zip(present, np.sign(steps.after - steps.before).tolist(), strict=True))
    for what, mask, sign in (("regression", regressed, 1.0), ("improvement", improved, -1.0)):
        for row in np.flatnonzero(mask):
            if steps.found[row] and changed[present[row]] == sign:
                continue  # a change says more: when it began, and that it held
            median = float(medians[row])
            z = float(raw.z[row])
            ratio = float(current[row]) / median if median > 0 else float("inf")
            judged.findings.append(
                (
                    what,
                    Finding(
                        kind,
                        present[row],
                        median,
                        float(current[row]),
                        ratio,
                        int(raw.count[row]),
                        None if np.isnan(z) else z,
                        None if speed is None else ratio / speed,
                    ),
                )
            )
    return judged


def _overrides(
    ids: list[str], overrides: Mapping[str, Override], rule: Rule
) -> tuple[FloatArray | None, FloatArray | None]:
    """Per-test threshold and min_delta arrays, only when some test has a perf marker."""
    import numpy as np

    if not overrides:
        return None, None
    none = Override()
    thresholds = np.array([overrides.get(i, none).threshold or rule.threshold for i in ids])
    deltas = np.array(
        [
            rule.min_delta if overrides.get(i, none).min_delta is None else overrides[i].min_delta
            for i in ids
        ],
        dtype=np.float64,
    )
    return thresholds, deltas


def _suite_wide(tests: _Judged, compared: int) -> None:
    """Most tests changed together (a new runner type under the same key, a framework
    upgrade): one change of the suite, not thousands of the tests."""
    from collections import Counter

    for slower in (True, False):
        together = [c for c in tests.changes if c.slower == slower]
        if len(together) < max(MIN_FOR_SPEED, SUITE_WIDE * compared):
            continue
        since = Counter(c.since for c in together).most_common(1)[0][0]
        runs = sorted(c.runs for c in together)[len(together) // 2]
        suite = Change(
            "session",
            "suite total",
            sum(c.before for c in together),
            sum(c.after for c in together),
            runs,
            since,
        )
        tests.changes = [c for c in tests.changes if c.slower != slower] + [suite]


def _collect(result: Comparison, judged: _Judged) -> None:
    for what, finding in judged.findings:
        (result.regressions if what == "regression" else result.improvements).append(finding)
    result.changes += judged.changes


def _explained(sources: list[tuple[_Judged, Mapping[str, str | None]]]) -> dict[str, float]:
    """Per group, the seconds its members' findings account for (+ slower, - faster);
    each source maps its ids to their group."""
    shifts: dict[str, float] = {}
    for judged, group_of in sources:
        moved = [(f.id, f.current - f.baseline) for _, f in judged.findings]
        moved += [(c.id, c.after - c.before) for c in judged.changes]
        for ident, shift in moved:
            group = group_of.get(ident)
            if group is not None:
                shifts[group] = shifts.get(group, 0.0) + shift
    return shifts


def _is_explained(shift: float, explained: float) -> bool:
    return shift * explained > 0 and abs(explained) >= EXPLAINED * abs(shift)


def _unexplained(judged: _Judged, explained: Mapping[str, float]) -> _Judged:
    """The group's findings and changes that its own tests do not explain."""
    judged.findings = [
        (what, f)
        for what, f in judged.findings
        if not _is_explained(f.current - f.baseline, explained.get(f.id, 0.0))
    ]
    judged.changes = [
        c for c in judged.changes if not _is_explained(c.after - c.before, explained.get(c.id, 0.0))
    ]
    return judged


def _judge_suite(
    result: Comparison, kinds: list[_Judged], groups: list[_Judged], rule: Rule
) -> None:
    """The suite total of ``kinds`` (the tests), on raw timings (a slower runner shows
    here, once), where the findings of the tests and of ``groups`` do not explain it."""
    import numpy as np

    count = sum(len(k.current) for k in kinds)
    if not count:
        return
    now = sum(float(k.current.sum()) for k in kinds)
    then = sum(float(k.medians.sum()) for k in kinds)
    verdict = judge(np.array([now]), np.array([[then]]), rule)
    # A group's finding stands only where its tests' do not explain it, so adding both
    # counts each cause about once.
    explained = sum(f.current - f.baseline for k in (*kinds, *groups) for _, f in k.findings)
    explained += sum(c.after - c.before for k in (*kinds, *groups) for c in k.changes)
    if _is_explained(now - then, explained):
        return
    finding = Finding(
        "session", "suite total", then, now, now / then if then > 0 else float("inf"), count
    )
    if verdict.regressed[0]:
        result.regressions.append(finding)
    elif verdict.improved[0]:
        result.improvements.append(finding)
