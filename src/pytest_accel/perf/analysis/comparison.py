"""A run compared with its baseline: findings for tests, classes, modules and the suite.

Two kinds of finding (docs/regressions.md):

- a *regression* (or improvement): this run against the baseline's samples, by the
  single-run rule (``perf.analysis.rule``);
- a *change*: a persistent shift over the baseline's recent runs plus this one
  (``perf.analysis.changes``), with the run where it began.  A test that changed is not also
  listed as a regression.

Runner speed (``perf.analysis.speed``): this run's, where the tests agree on it, and each
baseline run's.  A finding needs both its raw and its corrected ratio to pass the rule,
and a change must hold with each run's speed divided out too: the correction explains
findings away, never makes one.  A step in the speed itself is one change of the suite.

One cause, one alarm: a class, a module or the suite total is reported only where its
own members' findings do not already explain at least half of its shift; a shift of
most tests at once is one finding about the suite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import compress, repeat
from math import fsum, isnan, log
from operator import is_not
from typing import TYPE_CHECKING, TypeVar

from pytest_accel.perf.analysis.causes import (
    Judged,
    confirmed_by_groups,
    shifts_of,
    unexplained,
    usual_layout,
)
from pytest_accel.perf.analysis.changes import (
    ChangeRule,
    Steps,
    change_rule,
    current_level,
    find_steps,
    on_rows_reaching,
)
from pytest_accel.perf.analysis.compilation import with_compilation
from pytest_accel.perf.analysis.layouts import Scope, handed_out_anew, same_layout, scope_of
from pytest_accel.perf.analysis.memory import with_memory
from pytest_accel.perf.analysis.quiet import (
    Compared,
    module_path_of,
    quiet_comparison,
    rule_spread_is_summarised,
    suite_finding,
    suite_history,
    take_inventory,
)
from pytest_accel.perf.analysis.rule import Rule, judge, row_median, sample_spread
from pytest_accel.perf.analysis.speed import (
    current_speed_of_arrays,
    runner_speed_of_arrays,
    unexplained_steps,
)
from pytest_accel.perf.analysis.summary import SUMMARY_CHANGE_RULE, summary_of
from pytest_accel.perf.model.columns import Values
from pytest_accel.perf.model.findings import (
    KIND_OF_FINDING,
    MAX_WAIT_SHARE,
    Change,
    Comparison,
    Finding,
    TracingVerdict,
    busy_share,
    busy_slack,
)
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.samples import Baseline, EnvHistory, Summary
from pytest_accel.perf.model.timings import RunIdentity, RunTimings

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


def changes_in_runs(env: EnvHistory, rule: Rule) -> list[tuple[str, int, Change]]:
    """The changes the baseline's own runs show, its newest run taken as this one: per
    change, the kind of samples it is in (``tests``, ``classes``, ..., ``trace`` for the
    tests' tracing), its row there and the change.  What ``baseline --accept`` accepts
    and a report of a baseline alone draws.  Only the runs timed and laid out as the
    newest one are searched (``perf.analysis.layouts``); a change's ``runs`` counts every
    run from its start."""
    if len(env.runs) < 2:
        return []
    import numpy as np

    newest = env.runs[-1]
    kept = [
        i
        for i, run in enumerate(env.runs)
        if run.basis == newest.basis and same_layout(run.layout, newest.layout)
    ]
    alike = env if len(kept) == len(env.runs) else env.with_runs(kept)
    found: list[tuple[str, int, Change]] = []
    for kind, name in (*KIND_OF_FINDING.items(), ("test", "trace")):
        ids, matrix = alike.matrix(name)
        if not ids:
            continue
        steps = find_steps(matrix, change_rule(rule))
        for row in np.flatnonzero(steps.found):
            at = len(kept) - int(steps.runs[row])
            start = kept[at]
            since, runs = env.runs[start].identity, len(env.runs) - start
            if at > 0 and since.same_commit(env.runs[kept[at - 1]].identity):
                continue  # between two runs of one commit: not a change of the code
            before, after = float(steps.before[row]), float(steps.after[row])
            previous = env.runs[kept[at - 1]].identity if at > 0 else None
            change = Change(
                kind, ids[row], before, after, runs, since, name == "trace", previous=previous
            )
            found.append((name, int(row), change))
    return found


def compare_with_baseline(
    run: RunTimings,
    baseline: Baseline,
    rule: Rule,
    overrides: Mapping[str, Override] | None = None,
    *,
    new_slow: float = 1.0,
) -> Comparison:
    """The one comparison of a run with a baseline file's runs of its hardware key: the
    plugin's, the ``compare`` command's and the HTML report's.  A key the baseline
    lacks is a comparison that says so, with the keys it has."""
    env = baseline.for_key(run.key)
    if env is None:
        return Comparison(run.key, found=False, available_keys=sorted(baseline.envs))
    return compare(run, env, rule, overrides, new_slow=new_slow)


def compare(
    run: RunTimings,
    env: EnvHistory,
    rule: Rule,
    overrides: Mapping[str, Override] | None = None,
    *,
    new_slow: float = 1.0,
) -> Comparison:
    """Compare ``run`` with the baseline's runs ``env`` of the same hardware key: on
    execution time where the suite uses JAX (``rule.time``), with the runs timed and
    laid out as it was (``perf.analysis.layouts``)."""
    overrides = overrides or {}
    scope = scope_of(run, env, rule.time, rule.min_samples)
    timed = _timed(scope)
    # A record folded in already is not a second sample of itself (a record given as
    # its own baseline, one run, is compared with itself, as asked).  The runs are
    # scoped again without it: it counted among the runs of its own layout.
    held = (
        scope.env.run_holding(scope.run.identity, timed.tests) if len(scope.env.runs) > 1 else None
    )
    if held is not None:
        held_run = scope.env.runs[held]
        env = env.with_runs([i for i, other in enumerate(env.runs) if other is not held_run])
        scope = scope_of(run, env, rule.time, rule.min_samples)
        timed = _timed(scope)
    run, env = scope.run, scope.env
    if not env.runs and scope.left_out_time:  # all of them timed the other way: say so
        return with_memory(with_compilation(Comparison(run.key), scope), scope, rule)
    quiet = (
        quiet_comparison(
            run, env, rule, overrides, new_slow=new_slow, change_rule=change_rule(rule), timed=timed
        )
        # Its screen for changes looks at every run: fine where change detection does
        # too, or where it has no run of this layout to look at.
        if not scope.change_runs
        else None
    )
    if quiet is not None:
        return with_memory(with_compilation(quiet, scope), scope, rule)
    import numpy as np

    summary = summary_of(env)
    result, (compared, warm_compared) = take_inventory(
        run, env, summary, rule, overrides=overrides, new_slow=new_slow, timed=timed
    )
    result = result.timed(suite_history=suite_history(env, summary))
    setting = _Setting(env, run, rule, summary=summary, change_runs=scope.change_runs)
    test_inputs = _inputs(setting, "test", compared, env.matrix("tests"))
    speed = speeds = None
    if rule.normalize:
        current = test_inputs.current
        speed = runner_speed_of_arrays(current, test_inputs.medians, test_inputs.noise)
        levels = _at_rows(summary.level, test_inputs.rows)
        every = [*summary.speeds, current_speed_of_arrays(current, levels)]
        speeds = None if all(s == 1.0 for s in every) else np.array(every)
    if speed is not None or speeds is not None:
        result = result.timed(speed=speed or 1.0)
        setting = replace(setting, speed=speed, run_speeds=speeds)
    tests = _judge(setting, "test", test_inputs, overrides)
    if speeds is not None:
        result = _attributed(result, _suite_change(setting, tests, speeds), setting)
    # A warm-up is mostly the process's (imports, a backend starting, a cold disk cache):
    # only a large change of it, the rule's second tier, is a finding.
    warm_rule = replace(rule, threshold=max(rule.threshold, rule.large_ratio))
    warm_setting = replace(setting, rule=warm_rule)
    warm_inputs = _inputs(warm_setting, "test", warm_compared, env.matrix("warmup"))
    warm = _judge(warm_setting, "test", warm_inputs, overrides)
    warm.findings = [(what, replace(f, warmup=True)) for what, f in warm.findings]
    warm.learning = [replace(f, warmup=True) for f in warm.learning]
    result = _collect(result, warm)
    result, groups = _judge_groups(result, setting, tests)
    # The suite total, as a group: the run's busy share widens its threshold too.
    slack = busy_slack(busy_share(run.cpu_wait_share, run.threads_wait_share))
    busy_rule = replace(rule, threshold=rule.threshold * slack)
    result = _judge_suite(result, [tests, warm], groups, busy_rule)
    result = _name_movers(result, tests, run)
    result = _judge_tracing(result, setting, overrides)
    result = result.timed(
        regressions=sorted(result.timing.regressions, key=lambda f: (-f.ratio, f.kind, f.id)),
        improvements=sorted(result.timing.improvements, key=lambda f: (f.ratio, f.kind, f.id)),
        learning=sorted(result.timing.learning, key=lambda f: (-f.ratio, f.kind, f.id)),
        changes=sorted(
            result.timing.changes, key=lambda c: (not c.slower, -abs(log(max(c.ratio, 1e-9))), c.id)
        ),
    )
    return with_memory(with_compilation(result, scope), scope, rule)


MOVERS = 3  # tests named per group finding


def _name_movers(
    result: Comparison, tests: Judged, run: RunTimings, *, tracing: bool = False
) -> Comparison:
    """Each class, module and suite finding and change with the tests in it that moved
    most: a slowdown of a few milliseconds a call, spread over tests each under the
    floor, is found at the group and named by its tests.  ``tracing``: the findings of
    the tests' tracing, with ``tests`` judged on it (its groups are modules and the
    suite)."""
    kinds = ("module", "session") if tracing else ("class", "module", "session")

    def grouped(finding: Finding | Change) -> bool:
        return finding.kind in kinds and finding.tracing == tracing

    found: list[Finding | Change] = [
        *result.timing.regressions,
        *result.timing.learning,
        *result.timing.changes,
    ]
    if not any(map(grouped, found)):
        return result
    moved = {
        ident: float(now - then)
        for ident, now, then in zip(tests.ids, tests.current, tests.medians, strict=True)
        if now > then  # NaN medians compare False
    }
    members: dict[str, list[str]] = {}
    for ident, cls, module in zip(run.ids, run.cls, run.module, strict=True):
        if ident in moved:
            for group in (cls, module):
                if group:
                    members.setdefault(group, []).append(ident)

    def named(finding: FoundT) -> FoundT:
        if not grouped(finding):
            return finding
        ids = list(moved) if finding.kind == "session" else members.get(finding.id, [])
        top = sorted(ids, key=lambda i: (-moved[i], i))[:MOVERS]
        return replace(finding, movers=tuple((i, moved[i]) for i in top))

    return result.timed(
        regressions=[named(f) for f in result.timing.regressions],
        learning=[named(f) for f in result.timing.learning],
        # A slower group's change names its tests that moved most, as its regression would.
        changes=[named(c) if c.slower else c for c in result.timing.changes],
    )


FoundT = TypeVar("FoundT", Finding, Change)


def _judge_tracing(
    result: Comparison, setting: _Setting, overrides: Mapping[str, Override]
) -> Comparison:
    """``result`` with the findings and changes of the tests' JAX tracing: each test's
    seconds, and summed over each module run whole and over the suite, so that a few
    milliseconds more per trace, spread over tests each under the floor, is found at
    the group (named by the tests that moved most).  Judged against runs of this run's
    layout only: which test traces a shared function first (and pays for it) depends
    on what its process ran before.  Only what the members' findings do not explain
    is a group's finding, as for execution."""
    import numpy as np

    run, env, rule = setting.run, setting.env, setting.rule
    now = run.comparable_tracing()
    if not now or not env.ids["trace"] or result.timing.layout is not None:
        return result
    for ident in [i for i, o in overrides.items() if o.ignore and i in now]:
        del now[ident]
    inputs = _inputs(setting, "test", now, env.matrix("trace"), of="trace")
    # The runner's speed at tracing, where the tests agree on one: a busy runner slows
    # every test's tracing alike (beyond the CPU waits taken out), and its sums most
    # visibly; as for execution, the correction explains findings away, never makes one.
    if rule.normalize:
        speed = runner_speed_of_arrays(inputs.current, inputs.medians, inputs.noise)
        if speed is not None:
            setting = replace(setting, speed=speed)
    tests = _judge(setting, "test", inputs, overrides, tracing=True)
    if handed_out_anew(run.layout):
        # xdist hands tests to workers anew each run: which test traces a shared function
        # first in its worker moves from run to run (dm-pix: 127x on a test that traced
        # it in one run only), so only the sums judge; the tests name their movers.
        tests.findings, tests.changes, tests.learning = [], [], []
    # The groups sum the tests with a sample in every run (a test added since would
    # make the older runs' sums look faster), this run's seconds last.
    series = np.concatenate([inputs.samples, inputs.current[:, None]], axis=1)
    complete = np.flatnonzero(~np.isnan(series).any(axis=1))
    module_of = dict(zip(run.ids, run.module, strict=True))
    whole = run.modules.comparable()
    row_of: dict[str, int] = {}
    in_module: list[tuple[int, int]] = []  # (the test's row in series, its module's)
    for row in complete.tolist():
        module = module_of.get(inputs.ids[row])
        if module in whole:
            in_module.append((row, row_of.setdefault(module, len(row_of))))
    movable = [tests]  # what a move explains: tests between tests, modules between modules
    if row_of:
        sums = np.zeros((len(row_of), series.shape[1]))
        np.add.at(sums, [m for _, m in in_module], series[[t for t, _ in in_module]])
        modules = _judge(setting, "module", _derived(setting, list(row_of), sums), {}, tracing=True)
        movable.append(unexplained(modules, shifts_of([(tests, module_of)])))
    judged_all = list(movable)
    if len(complete) > 1:
        total = series[complete].sum(axis=0, keepdims=True)
        suite = _judge(setting, "session", _derived(setting, [SUITE], total), {}, tracing=True)
        everything = [(judged, dict.fromkeys(judged.ids, SUITE)) for judged in movable]
        judged_all.append(unexplained(suite, shifts_of(everything)))
    # Set aside once the groups were explained by them: a moved cost traced slower on a
    # busy runner raises its module's sum, and that is the move's too.
    # Where each trace's own wait was measured, its tracing is what it took on a CPU.
    busy = 0.0 if run.tracing_waits else (run.cpu_wait_share or 0.0)
    moved = [ident for judged in movable for ident in _moved(judged, rule, busy)]
    result = replace(result, tracing=TracingVerdict(judged=True, moved=moved))
    for judged in judged_all:
        result = _collect(result, judged)
    return _name_movers(result, tests, run, tracing=True)


SUITE = "suite total"  # the id of the suite's findings
MOVED_SHARE = 1 / 3  # of a rise in tracing, the fall elsewhere that makes it a move


def _moved(judged: Judged, rule: Rule, busy: float = 0.0) -> list[str]:
    """Tracing that moved between tests (or modules) rather than grew: a shared jitted
    function is traced by the first test of its process to call it, which changes with
    the order (a test added before it, ``-k``, xdist handing tests out anew).  Where the
    findings and changes one way (slower, or faster) are matched by ids that moved the
    other way by the rule's ratio and ``MOVED_SHARE`` of ``min_delta`` (noise seldom
    does) for at least
    ``MOVED_SHARE`` of their seconds, those are the same cost in other places (slower
    in this run, on a busy runner, by up to 1/MOVED_SHARE, or faster by as much): the
    findings and changes of ``judged`` are set aside, and their ids returned.  A rise
    past that is growth, whichever side the findings are on.

    ``busy`` is the share of the calls' time they waited for a CPU, where the wait
    within each trace was not measured (a record of 0.4.0).  There the waits are taken
    out of a call's tracing in proportion to the call, but tracing is Python on the
    test's own thread, which takes the waits while the rest of the call sleeps or
    waits on XLA's threads: the busier the runner, the more of the wait stays in the
    tracing, and the share a move needs shrinks with it (``MOVED_SHARE * (1 - busy)``).
    In this project's own suite, a run whose calls waited 69% of their time traced a
    moved function three times as long as the test that had traced it before."""
    import numpy as np

    shift = judged.current - judged.medians  # NaN: no median
    # The other side of a move need not clear a finding's floor on its own: where the
    # runner got quicker since the baseline, the moved trace takes less there (this
    # project's CI: 0.101 s traced on a loaded runner fell to nothing, and the test it
    # moved to traced it in under 0.05 s).  Its sum must still match the findings'.
    floor = MOVED_SHARE * rule.min_delta
    with np.errstate(invalid="ignore"):
        rising = (judged.current >= judged.medians * rule.threshold) & (shift >= floor)
        falling = (judged.current * rule.threshold <= judged.medians) & (-shift >= floor)
    found = [(f.id, what == "regression") for what, f in judged.findings]
    found += [(c.id, c.slower) for c in judged.changes]
    if not found:
        return []
    position = {ident: row for row, ident in enumerate(judged.ids)}
    rose, fell = (abs(float(np.nansum(shift[ways]))) for ways in (rising, falling))
    for slower in (True, False):
        rows = [position[ident] for ident, way in dict.fromkeys(found) if way == slower]
        if not rows:
            continue
        # The findings one way against every id that moved the other: a rise of tests
        # under the floor (no finding) can match a fall that is one, and the reverse.
        here = abs(float(np.nansum(shift[rows])))
        rise, fall = (here, fell) if slower else (rose, here)
        if here > 0 and fall >= MOVED_SHARE * (1.0 - busy) * rise and rise >= MOVED_SHARE * fall:
            judged.findings, judged.changes = [], []
            return sorted({ident for ident, _ in found})
    return []


def _derived(setting: _Setting, ids: list[str], series: FloatArray) -> _Inputs:
    """Inputs of ids whose samples are derived (sums): ``series``, this run last."""
    import numpy as np

    return _numbers(setting, ids, np.arange(len(ids)), series[:, -1], series[:, :-1])


def _timed(scope: Scope) -> Compared:
    """The run's tests and warm-ups as the scoped baseline's runs timed them."""
    metric = scope.env.test_metric
    return Compared(scope.run.comparable(metric), scope.run.comparable(metric, warmup=True))


def _judge_groups(
    result: Comparison, setting: _Setting, tests: Judged
) -> tuple[Comparison, list[Judged]]:
    """Classes and modules; ``result`` with their findings and the tests', the tests'
    after a run ordered unlike the baseline's has had them confirmed by their groups."""
    run, env = setting.run, setting.env
    # The groups of the tests with a finding (a handful), not of every test run.
    wanted = {f.id for _, f in tests.findings} | {
        c.id for c in (*tests.changes, *tests.unattributed)
    }
    class_of: dict[str, str | None] = {}
    module_of: dict[str, str | None] = {}
    # Their rows found by C-level maps: no Python frame per test of 100,000.
    for row in compress(range(len(run.ids)), map(wanted.__contains__, run.ids)) if wanted else ():
        ident = run.ids[row]
        class_of[ident], module_of[ident] = run.cls[row], run.module[row]
    classes, modules = (
        _judge(setting, kind, _inputs(setting, kind, now, env.matrix(of)), {})
        for kind, now, of in (
            ("class", run.classes.comparable(), "classes"),
            ("module", run.modules.comparable(), "modules"),
        )
    )
    usual = usual_layout(env)
    moving = not same_layout(run.layout, usual) or handed_out_anew(run.layout)
    # Set aside, not gone: what they moved explains their groups' shift too.
    aside = _compile_dominated(tests, run.compiling or {}) if moving else _holding(tests)
    dominated = [f.id for _, f in aside.findings]
    # Tests per class and module, for the groups that confirm a test's finding.
    sizes = Counter(c for c in run.cls if c) + Counter(m for m in run.module if m) if moving else {}
    if not same_layout(run.layout, usual):
        confirmed = confirmed_by_groups(tests, [classes, modules], class_of, module_of, sizes)
        result = result.timed(
            layout=run.layout,
            baseline_layout=usual,
            unconfirmed=sorted({*dominated, *confirmed}),
        )
        # Too few runs of this layout to compare a group with (``perf.analysis.layouts``): its
        # processes' contention moves every total, compute-bound ones most (2x on two
        # cores under -n 2), so the groups only confirm their tests' findings.
        classes.findings, modules.findings = [], []
    elif handed_out_anew(run.layout) and run.compiling:
        # xdist hands tests to workers anew each run: a test that paid first uses here
        # (eager operations' shapes, shared functions) keeps the compiling's overhead
        # that no compile span covers (dm-pix: 2-15x on 1.6-6 s of compiling beside
        # it).  Where its compiling exceeds its shift, its group must confirm it.
        compiling = run.compiling
        heavy = {
            f.id for _, f in tests.findings if compiling.get(f.id, 0.0) >= f.current - f.baseline
        }
        groups = [classes, modules]
        confirmed = confirmed_by_groups(tests, groups, class_of, module_of, sizes, only=heavy)
        if dominated or confirmed:
            result = result.timed(unconfirmed=sorted({*dominated, *confirmed}))
    result = _collect(result, tests)
    # A group is reported only where what it holds does not explain it: a class by its
    # tests, a module by its tests and classes, the suite by all of them.
    classes = unexplained(classes, shifts_of([(tests, class_of), (aside, class_of)]))
    in_module = {ident: module_path_of(ident) for ident in classes.ids}
    modules = unexplained(
        modules, shifts_of([(tests, module_of), (aside, module_of), (classes, in_module)])
    )
    result = _collect(_collect(result, classes), modules)
    return result, [classes, modules, aside]


UNCOVERED = 0.1  # of a test's compiling, the overhead no compile span covers, at most


def _holding(judged: Judged, findings: list[tuple[str, Finding]] | None = None) -> Judged:
    """A copy of ``judged`` holding ``findings`` only (none: an empty one)."""
    return replace(judged, findings=findings or [], changes=[], learning=[])


def _compile_dominated(tests: Judged, compiling: Mapping[str, float]) -> Judged:
    """In a run whose first uses moved (xdist, or another layout than the baseline's),
    the tests whose finding is within ``UNCOVERED`` of the seconds they spent compiling
    here: compiling leaves overhead outside its spans (dispatch, caches, an eager
    operation's executable), so such an execution remainder keeps compilation's noise
    (dm-pix under -n 2: 6-15x on a 0.02 s test beside 4-6 s of compiling).  Their
    findings are taken out of ``tests`` and returned, as a ``Judged`` of their own."""
    dominated = [
        (what, f)
        for what, f in tests.findings
        if what == "regression" and f.current - f.baseline <= UNCOVERED * compiling.get(f.id, 0.0)
    ]
    if dominated:
        gone = {f.id for _, f in dominated}
        tests.findings = [(what, f) for what, f in tests.findings if f.id not in gone]
    return _holding(tests, dominated)


@dataclass(frozen=True)
class _Setting:
    """What every kind is judged with."""

    env: EnvHistory
    run: RunTimings
    rule: Rule
    speed: float | None = None
    run_speeds: FloatArray | None = None  # each run's speed, this one last (speed.py)
    summary: Summary | None = None  # medians, centres and noise of tests and warm-ups
    # The runs change detection looks at (positions in ``env.runs``; None: all of them).
    change_runs: tuple[int, ...] | None = None


@dataclass(frozen=True)
class _Inputs:
    """One kind's ids the baseline has samples of, with what the rule needs of them
    that does not depend on the runner's speed: worked out once per kind."""

    ids: list[str]
    rows: IntArray  # each id's row in the baseline's ids of its kind
    current: FloatArray  # seconds now
    samples: FloatArray  # a row per id, a column per baseline run
    medians: FloatArray
    spread: tuple[FloatArray, FloatArray]  # the z-score's centre and scale (rule.sample_spread)
    noise: FloatArray  # each one's spread in log seconds (NaN: unknown)
    # The steps the baseline's summary found in its own runs of these ids: their
    # positions here and their runs at the new level (None: searched for when judged).
    steps: tuple[IntArray, IntArray] | None = None


def _inputs(
    setting: _Setting,
    kind: str,
    now: Mapping[str, float],
    baseline: tuple[list[str], FloatArray],
    *,
    of: str | None = None,
) -> _Inputs:
    """The ids of ``now`` the baseline has samples of, and their numbers; ``of``: the
    baseline's ids they are among, where not ``kind``'s (``KIND_OF_FINDING``)."""
    import numpy as np

    env = setting.env
    ids, matrix = baseline
    of = of or KIND_OF_FINDING[kind]
    present = list(now)
    if present == ids:  # the baseline's ids in its order, as a suite that did not change
        rows = np.arange(len(ids), dtype=np.int64)
        samples = matrix
        current = np.fromiter(now.values(), dtype=np.float64, count=len(present))
    else:
        index = env.positions(of) if env.ids[of] is ids else None
        if index is None:
            index = dict(zip(ids, range(len(ids)), strict=True))
        # The ids of ``now`` the baseline has, with C-level maps: 100,000 of them offline.
        positions = list(map(index.get, now))
        kept = list(map(is_not, positions, repeat(None)))
        present = list(compress(now, kept))
        rows = np.array(list(compress(positions, kept)), dtype=np.int64)
        samples = matrix[rows] if len(rows) else np.zeros((0, len(env.runs)))
        current = np.array(list(compress(now.values(), kept)), dtype=np.float64)
    inputs = _numbers(setting, present, rows, current, samples, _summarised(setting, kind, ids))
    steps = _summarised_steps(setting, ids, rows)
    return inputs if steps is None else replace(inputs, steps=steps)


def _summarised_steps(
    setting: _Setting, ids: list[str], rows: IntArray
) -> tuple[IntArray, IntArray] | None:
    """The steps the summary found in the baseline's own runs of the tests at ``rows``
    (of ``ids``): their positions among ``rows``, in order, and their runs at the new
    level.  None where it has none to give: another kind, or a summary from before."""
    import numpy as np

    summary = setting.summary
    if summary is None or summary.steps is None or ids is not setting.env.ids["tests"]:
        return None
    position = np.full(len(ids), -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    found = np.fromiter(summary.steps, dtype=np.int64, count=len(summary.steps))
    runs = np.fromiter(summary.steps.values(), dtype=np.int64, count=len(summary.steps))
    at = position[found]
    order = np.argsort(at)
    kept = order[at[order] >= 0]
    return at[kept], runs[kept]


def _numbers(  # noqa: PLR0917  # the columns of one _Inputs
    setting: _Setting,
    present: list[str],
    rows: IntArray,
    current: FloatArray,
    samples: FloatArray,
    known: tuple[Values, tuple[Values, Values] | None] | None = None,
) -> _Inputs:
    """What the rule needs of ``present`` (their ``samples`` a row each, their seconds
    ``current``): the summary's numbers where ``known``, else worked out."""
    import numpy as np

    rule = setting.rule
    if known is not None:  # the numbers the quiet comparison (perf.analysis.quiet) uses too
        medians = _at_rows(known[0], rows)
    else:
        medians = row_median(samples) if len(rows) else np.zeros(0)
    if known is not None and known[1] is not None and rule_spread_is_summarised(rule):
        centre, noise = _at_rows(known[1][0], rows), _at_rows(known[1][1], rows)
        spread = (centre, noise)
    else:
        if samples.size:
            spread = sample_spread(samples, rule)
        else:
            spread = (np.full(len(present), np.nan), np.full(len(present), np.nan))
        with np.errstate(all="ignore"):
            noise = spread[1] if rule.log_space else spread[1] / medians
    return _Inputs(present, rows, current, samples, medians, spread, noise)


def _at_rows(values: Values, rows: IntArray) -> FloatArray:
    """The summary's ``values`` at ``rows``, None as NaN (as numpy converts it)."""
    import numpy as np

    return np.array(values, dtype=np.float64)[rows]


def _judge(
    setting: _Setting,
    kind: str,
    inputs: _Inputs,
    overrides: Mapping[str, Override],
    *,
    tracing: bool = False,
) -> Judged:
    """One kind's single-run verdicts and changes (``tracing``: of JAX's tracing)."""
    import numpy as np

    rule, speed = setting.rule, setting.speed
    present, current, samples, medians = inputs.ids, inputs.current, inputs.samples, inputs.medians
    thresholds, deltas = _overrides(present, overrides, rule)
    if not tracing:  # a trace's own waits are measured within it
        thresholds = _busy_slack(setting.run, kind, present, rule, thresholds)
    known = inputs.steps if change_rule(rule) == SUMMARY_CHANGE_RULE else None
    count, medians, spread, settled, pending = current_level(
        samples, medians, inputs.spread, rule, known
    )
    verdict = partial(
        judge,
        samples=samples,
        count=count,
        rule=rule,
        threshold=thresholds,
        min_delta=deltas,
        median=medians,
        spread=spread,
    )
    raw = verdict(current)
    regressed, improved, learning = raw.regressed, raw.improved, raw.learning
    if speed is not None:  # explains findings away, never makes one
        corrected = verdict(current / speed)
        regressed, improved = regressed & corrected.regressed, improved & corrected.improved
        learning = learning & corrected.learning
    columns = setting.change_runs
    if columns is None:
        baseline_runs, run_speeds = samples, setting.run_speeds
    else:  # the runs of this run's layout only: a switch of layout is not a change
        baseline_runs = samples[:, list(columns)]
        run_speeds = None if setting.run_speeds is None else setting.run_speeds[[*columns, -1]]
    steps = _steps(baseline_runs, current, change_rule(rule), run_speeds)
    judged = Judged(
        present, current, medians, inputs.noise, baseline_runs, regressed, improved, steps, [], []
    )
    reported = np.zeros(len(present), dtype=bool)
    for row in np.flatnonzero(steps.found):
        runs = int(steps.runs[row])
        before, after = float(steps.before[row]), float(steps.after[row])
        if after < before and settled[row]:
            continue  # a speed-up reported when it was found: its level is the reference now
        change = Change(
            kind,
            present[row],
            before,
            after,
            runs,
            _since(setting, runs),
            tracing,
            previous=_previous(setting, runs),
        )
        # Between two runs of one commit the code did not change: the runner or its
        # environment did. Never the commit's change, nor a finding the same way.
        (judged.unattributed if _within_one_commit(setting, runs) else judged.changes).append(
            change
        )
        reported[row] = True
    # A change says more (when it began, and that it held) than a finding the same way.
    direction = np.sign(steps.after - steps.before)  # NaN: no step
    for what, mask, sign in (
        ("regression", regressed, 1.0),
        ("improvement", improved, -1.0),
        ("learning", learning, 1.0),
    ):
        rows = np.flatnonzero(mask & ~(reported & (direction == sign)))
        for row, median, now, count, z in zip(
            rows.tolist(),
            medians[rows].tolist(),
            current[rows].tolist(),
            raw.count[rows].tolist(),
            raw.z[rows].tolist(),
            strict=True,
        ):
            ratio = now / median if median > 0 else float("inf")
            finding = Finding(
                kind,
                present[row],
                median,
                now,
                ratio,
                int(count),
                None if isnan(z) else z,
                None if speed is None else ratio / speed,
                tracing=tracing,
                pending=bool(pending[row]),
            )
            if what == "learning":
                judged.learning.append(finding)
            else:
                judged.findings.append((what, finding))
    return judged


def _steps(
    runs: FloatArray, current: FloatArray, rule: ChangeRule, speeds: FloatArray | None
) -> Steps:
    """The steps of each row of ``runs`` (the baseline's) followed by ``current``, its
    series made only of the rows that can hold one (``changes.on_rows_reaching``): at
    100,000 tests a series of them all is 17 MB more, and its search as much again."""
    import numpy as np

    def search(rows: IntArray | None) -> Steps:
        taken = (runs, current) if rows is None else (runs[rows], current[rows])
        series = np.concatenate([taken[0], taken[1][:, None]], axis=1)
        return unexplained_steps(series, rule, speeds)

    peaks = np.fmax(np.fmax.reduce(runs, axis=1), current) if runs.shape[1] else current
    return on_rows_reaching(peaks, rule, search)


def _summarised(
    setting: _Setting, kind: str, ids: list[str]
) -> tuple[Values, tuple[Values, Values] | None] | None:
    """The summary's medians (and for tests the z-score's centre and scale) of the ids
    judged, when they are the env's tests or warm-ups (``Summary``); None for classes
    and modules."""
    summary, env = setting.summary, setting.env
    if summary is None:
        return None
    if ids is env.ids["tests"]:
        return summary.median, (summary.centre, summary.noise)
    if ids is env.ids["warmup"]:
        return summary.warmup_median, None
    return None


def _cut(setting: _Setting, runs: int) -> tuple[Sequence[int], int]:
    """The runs change detection searched (positions in ``env.runs``) and where in them
    a change of ``runs`` runs (this one included) began (``len``: this run)."""
    env = setting.env
    columns = range(len(env.runs)) if setting.change_runs is None else setting.change_runs
    return columns, len(columns) + 1 - runs


def _since(setting: _Setting, runs: int) -> RunIdentity:
    """The run where a change of ``runs`` runs (this one included) began."""
    columns, cut = _cut(setting, runs)
    return setting.env.runs[columns[cut]].identity if cut < len(columns) else setting.run.identity


def _previous(setting: _Setting, runs: int) -> RunIdentity | None:
    """The run before the first of a change of ``runs`` runs, in the series searched
    (None: the change began with it)."""
    columns, cut = _cut(setting, runs)
    return setting.env.runs[columns[cut - 1]].identity if 0 < cut <= len(columns) else None


def _within_one_commit(setting: _Setting, runs: int) -> bool:
    """Whether a change of ``runs`` runs began between two runs of one commit: the run
    before its first, in the series searched, is of the same commit."""
    previous = _previous(setting, runs)
    return previous is not None and _since(setting, runs).same_commit(previous)


def _suite_change(setting: _Setting, tests: Judged, speeds: FloatArray) -> list[Change]:
    """A step in the runner's speed over runs (a slower runner type under the same key,
    a framework upgrade that slows everything): one change of the suite total, where
    the tests' own changes were explained away by it."""
    total = fsum(tests.medians.tolist())  # as perf.analysis.quiet sums it
    steps = find_steps(speeds[None, :] * total, change_rule(setting.rule))
    if not steps.found[0]:
        return []
    runs = int(steps.runs[0])
    before, after = float(steps.before[0]), float(steps.after[0])
    since, previous = _since(setting, runs), _previous(setting, runs)
    return [Change("session", "suite total", before, after, runs, since, previous=previous)]


def _attributed(result: Comparison, changes: list[Change], setting: _Setting) -> Comparison:
    """``result`` with ``changes`` among its changes, or among the steps no commit made
    (``_within_one_commit``)."""
    mine: list[Change] = []
    theirs: list[Change] = []
    for change in changes:
        (theirs if _within_one_commit(setting, change.runs) else mine).append(change)
    return result.timed(
        changes=[*result.timing.changes, *mine],
        unattributed=[*result.timing.unattributed, *theirs],
    )


def _busy_slack(
    run: RunTimings, kind: str, ids: list[str], rule: Rule, thresholds: FloatArray | None
) -> FloatArray | None:
    """``thresholds`` (None: the rule's) widened where the runner was busy: a call that
    waited a share ``s`` of its time for a CPU had that wait taken out, but the threads it
    handed work to (XLA's CPU pool, op-by-op dispatch's) waited too, unseen by its clock,
    and slowed what is left by up to ``1 / (1 - s)``.  A finding needs its ratio beyond
    that.  ``s``: per test, its own call's share; per class, module and the suite, the
    run's; and at least what all the processes' threads waited, where that was busy."""
    import numpy as np

    run_share = busy_share(run.cpu_wait_share, run.threads_wait_share)
    if not run_share:
        return thresholds
    if kind == "test":
        shares = run.wait_shares or {}
        threads = busy_share(None, run.threads_wait_share)
        share = np.array([max(shares.get(i, 0.0), threads) for i in ids], dtype=np.float64)
    else:
        share = np.full(len(ids), run_share)
    slack = 1.0 / (1.0 - np.minimum(share, MAX_WAIT_SHARE))  # busy_slack, row by row
    base = np.full(len(ids), rule.threshold) if thresholds is None else thresholds
    with np.errstate(over="ignore"):  # a threshold of 1e308 widened is inf: still no finding
        widened: FloatArray = base * slack
    return widened


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


def _collect(result: Comparison, judged: Judged) -> Comparison:
    """``result`` with ``judged``'s findings, changes and findings still learning."""
    found = judged.findings
    return result.timed(
        regressions=[*result.timing.regressions, *(f for what, f in found if what == "regression")],
        improvements=[
            *result.timing.improvements,
            *(f for what, f in found if what != "regression"),
        ],
        changes=[*result.timing.changes, *judged.changes],
        learning=[*result.timing.learning, *judged.learning],
        unattributed=[*result.timing.unattributed, *judged.unattributed],
    )


def _run_levels(kinds: list[Judged]) -> list[float]:
    """Each baseline run's level for the suite total: the log of its samples of the
    tests compared here over those tests' medians (a run that lacks some is measured on
    the ones it has)."""
    import numpy as np

    sums = np.zeros(0)
    expected = np.zeros(0)
    for judged in kinds:
        samples = judged.runs
        if not samples.size:
            continue
        present = ~np.isnan(samples)
        # Reduced where present: no copy of the samples (17 MB at 100,000 tests).
        took = np.add.reduce(samples, axis=0, where=present)
        medians = np.broadcast_to(judged.medians[:, None], samples.shape)
        would = np.add.reduce(medians, axis=0, where=present)
        sums = took if not sums.size else sums + took
        expected = would if not expected.size else expected + would
    with np.errstate(all="ignore"):
        levels = np.log(sums / expected)
    return [float(v) for v in levels.tolist() if np.isfinite(v)]


def _judge_suite(
    result: Comparison, kinds: list[Judged], groups: list[Judged], rule: Rule
) -> Comparison:
    """``result`` with the suite total of ``kinds`` (the tests), on raw timings (a slower
    runner shows here, once), judged where the findings of the tests and of ``groups``
    do not explain it."""
    count = sum(len(k.current) for k in kinds)
    if not count:
        return result
    now = fsum(fsum(k.current.tolist()) for k in kinds)
    then = fsum(fsum(k.medians.tolist()) for k in kinds)
    result = result.timed(suite_now=now, suite_then=then)
    # A group's finding stands only where its tests' do not explain it, so adding both
    # counts each cause about once.
    accounted = sum(f.current - f.baseline for k in (*kinds, *groups) for _, f in k.findings)
    steps = [c for k in (*kinds, *groups) for c in (*k.changes, *k.unattributed)]
    accounted += sum(c.after - c.before for c in steps)
    # ... and a change of the suite itself (the runner's speed over runs) says it already,
    # as does a step of it between runs of one commit.
    accounted += sum(
        c.after - c.before
        for c in (*result.timing.changes, *result.timing.unattributed)
        if c.kind == "session"
    )
    verdict = suite_finding(result.timing, count, accounted, rule, _run_levels(kinds))
    if verdict is None:
        return result
    what, finding = verdict
    if what == "regression":
        return result.timed(regressions=[*result.timing.regressions, finding])
    if what == "improvement":
        return result.timed(improvements=[*result.timing.improvements, finding])
    return result.timed(learning=[*result.timing.learning, finding])
