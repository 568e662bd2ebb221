"""What the HTML report shows, computed from the files (records, a baseline, a flaky
history) with no HTML in sight: the page (``report.page``) only lays it out.

The same data comes from ``pytest-accel report`` (files on disk, ``build``) and from
``--accel-report`` (this session's one timing result, the baseline as it was read, the
flaky findings with the history as updated, ``build_views``), so both pages are the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import median
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_accel.cost.model import RunCost, cost_of_section
from pytest_accel.coverage.model import Coverage, Gap, by_key, coverage_of, gaps
from pytest_accel.flaky.classify import FLAKY_MIN_RUNS, classify
from pytest_accel.flaky.history import History
from pytest_accel.outcomes import RunColumns, tally
from pytest_accel.perf.analysis.comparison import compare_with_baseline
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.analysis.summary import summary_of
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory
from pytest_accel.perf.formats.record import (
    compilation_of,
    group_columns,
    run_columns,
    run_json,
    timings,
)
from pytest_accel.perf.model.findings import KIND_OF_FINDING, Comparison
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.table import GroupColumns, RunCompilation
from pytest_accel.perf.model.timings import RunTimings, run_labels

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_accel.perf.offline import Given
    from pytest_accel.perf.result import TimingResult
    from pytest_accel.selection.section import SelectionSection

T = TypeVar("T")
TRENDS = 30  # findings drawn with their trend; the rest are listed
THIS_RUN = "this run"  # a chart's last run, where the report is of one record
FLAKY_ROWS = 200  # tests in the flaky grid: the ones that flip most
ACROSS_ROWS = 500  # tests compared across hardware keys: the slowest


@dataclass(frozen=True)
class Trend:
    """One id's durations over the baseline's runs and this one, for a chart."""

    kind: str
    id: str
    labels: list[str]  # per run: its commit (short) or start time
    seconds: list[float | None]  # per run; the last is this run
    change_at: int | None  # index of the first run at the new level
    headline: str  # what was found, in one line
    slower: bool
    reference: float | None = None  # drawn as a dashed line: the baseline runs' median
    unit: str = "wall"  # what the seconds are: "execution" or "wall" time
    severity: float = 0.0  # how far an alarm is from its baseline (a ratio), for order


@dataclass(frozen=True)
class RunSummary:
    path: str
    label: str  # the record's name as its rows say it (``record_labels``)
    key: str
    started: str | None
    commit: str | None
    branch: str | None
    shard: str | None
    layout: str | None
    duration: float
    outcomes: dict[str, int]
    comparison: Comparison | None  # None without a baseline for this key
    suite_now: float  # this run's total, as the reference below is summed
    suite_then: float  # the reference it is set against
    suite_basis: str = ""  # what the reference is, in words
    compilation: str = ""  # with JAX: what compiling took (perf.output.compilation_line)


@dataclass(frozen=True)
class Row:
    """A test, class or module in the slowest tables."""

    id: str
    key: str
    seconds: float
    detail: str  # outcome, or number of tests
    usd: float | None = None  # a test's cost, where its record priced the run (cost.model)
    record: str = ""  # which record it is of, where the report has several


@dataclass(frozen=True)
class FlakyRow:
    key: str
    test: str
    letters: str
    status: str
    flip_rate: float
    failure_rate: float


@dataclass(frozen=True)
class Shard:
    name: str
    tests: int
    seconds: float


@dataclass
class ReportData:
    title: str = "pytest-accel report"
    runs: list[RunSummary] = field(default_factory=list)
    trends: list[Trend] = field(default_factory=list)
    more_findings: list[str] = field(default_factory=list)  # beyond TRENDS, one line each
    # Alarms drawn without a chart (recompiling functions, memory growth), and which
    # baseline runs the comparisons left out and why.
    alarm_notes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tests: list[Row] = field(default_factory=list)
    classes: list[Row] = field(default_factory=list)
    modules: list[Row] = field(default_factory=list)
    across_keys: list[str] = field(default_factory=list)
    across: list[tuple[str, list[float | None]]] = field(default_factory=list)
    flaky: list[FlakyRow] = field(default_factory=list)
    flaky_runs: dict[str, int] = field(default_factory=dict)  # key -> runs in the history
    shards: list[Shard] = field(default_factory=list)
    suite_trend: Trend | None = None
    coverage: dict[str, list[Coverage]] = field(default_factory=dict)  # key -> runs, oldest first
    coverage_gaps: list[Gap] = field(default_factory=list)
    costs: list[tuple[str, RunCost]] = field(default_factory=list)  # record, its cost
    # record, what change-aware selection did in its run (the record's section)
    selections: list[tuple[str, SelectionSection]] = field(default_factory=list)
    baseline_only: bool = False  # no record: the baseline's newest run is the latest
    # When the newest run shown ended (UTC, ISO 8601); the page says how long ago when
    # it is opened, not when it was written.
    newest: str | None = None


@dataclass(frozen=True)
class RecordView:
    """A record as the page reads it: a record file's (``view_of_record``), or what
    this session's one result holds of its record (``view_of_session``), never the one
    turned into the other."""

    path: str
    info: Mapping[str, Any]  # the record's ``run`` section: started, commit, shard, ...
    run: RunTimings
    columns: RunColumns  # what coverage, cost and the summary read
    # "classes" and "modules", as the run built them or the record holds them.
    groups: Mapping[str, GroupColumns]
    comparison: Comparison | None = None  # as judged already (the session's own)
    cost: RunCost | None = None  # what the run cost (a record's section, read)
    compilation: RunCompilation | None = None
    selection: SelectionSection | None = None  # the record's selection section
    # A record's: what its run was judged by (the rule, its @perf overrides, the new-slow
    # threshold), what a command gave on top applied (``offline.judged_like_its_run``).
    judged: tuple[Rule, Mapping[str, Override], float] | None = None


def view_of_record(path: str, record: Mapping[str, Any], given: Given | None = None) -> RecordView:
    """A checked record (``record.check_record``) as the page reads it, judged as its run
    was (with what ``given`` adds on top)."""
    from pytest_accel.perf.offline import Given, judged_like_its_run

    cost = record.get("cost")
    rule, overrides, new_slow, _ = judged_like_its_run(path, record, given or Given({}))
    run = timings(record)
    return RecordView(
        path,
        record["run"],
        run,
        run_columns(record),
        group_columns(record, run),
        cost=cost_of_section(cost) if isinstance(cost, dict) else None,
        compilation=compilation_of(record),
        selection=_selection_of(path, record),
        judged=(rule, overrides, new_slow),
    )


def view_of_session(path: str, result: TimingResult) -> RecordView | None:
    """This session's timing result as the page reads it: the run it compared, what the
    terminal and the warnings said of it (its ``@perf`` overrides and
    ``--perf-new-slow`` included), and the groups the record has."""
    if result.run is None or result.columns is None:
        return None  # the timings were not kept for a reader (the feature never asked)
    from pytest_accel.selection.section import SelectionSection

    return RecordView(
        path,
        run_json(result.info),
        result.run,
        result.columns,
        {section: columns for section, (_, columns) in result.groups.items()},
        comparison=result.comparison,
        cost=_value_of(result.results, "cost", RunCost),
        compilation=result.compilation,
        selection=_value_of(result.results, "section", SelectionSection),
    )


def _value_of(results: Sequence[object], attribute: str, kind: type[T]) -> T | None:
    """What one of the session's results holds, typed (the cost result's ``RunCost``,
    selection's ``SelectionSection``), as the run built it: read, never re-read from
    the record section it encodes.  A result of another plugin without it is passed."""
    for result in results:
        value = getattr(result, attribute, None)
        if isinstance(value, kind):
            return value
    return None


def _selection_of(path: str, record: Mapping[str, Any]) -> SelectionSection | None:
    """A record's selection section, checked (InputError naming the field)."""
    from pytest_accel.selection.section import section_of

    found = record.get("selection")
    return None if found is None else section_of(path, found)


def build(
    records: Sequence[tuple[str, Mapping[str, Any]]],
    baseline: Baseline | None = None,
    history: History | None = None,
    given: Given | None = None,
) -> ReportData:
    """The report of checked records (``record.check_record``), a baseline and a flaky
    history; any of them may be missing.  Each record is judged as its run was, what
    ``given`` holds (a command's rule options) applied on top."""
    from pytest_accel.perf.offline import Given

    given = given or Given({})
    views = [view_of_record(p, r, given) for p, r in records]
    rule = views[-1].judged[0] if views and views[-1].judged else None
    if not views:
        from pytest_accel.perf.options import build_rule

        rule = build_rule(given.rule)
    return build_views(views, baseline, history, rule)


def build_views(
    views: Sequence[RecordView],
    baseline: Baseline | None = None,
    history: History | None = None,
    rule: Rule | None = None,
) -> ReportData:
    """The report of runs, a baseline and a flaky history.  A run that carries its
    comparison (the session's) is shown as judged; the others are compared here, each
    against the baseline's runs that started before it (as its own run was judged, never
    against runs made after it).  With several records every finding names its record,
    and its chart ends at that record."""
    rule = rule or Rule()
    data = ReportData()
    labels = record_labels([view.path for view in views])
    for view, label in zip(views, labels, strict=True):
        run = view.run
        judging = baseline
        if view.comparison is None and baseline is not None:
            judging = as_it_stood(baseline, run.identity.started)
        env = judging.for_key(run.key) if judging is not None else None
        comparison = view.comparison
        judged_by = view.judged[0] if view.judged else rule
        if comparison is None and judging is not None:
            overrides, new_slow = (view.judged[1], view.judged[2]) if view.judged else ({}, 1.0)
            comparison = compare_with_baseline(
                run, judging, judged_by, overrides, new_slow=new_slow
            )
        if comparison is not None and not comparison.found:
            comparison = None  # as a key the baseline lacks reads: no comparison
        data.runs.append(_summary(view, comparison, label))
        if env is not None and comparison is not None:
            _add_trends(
                data, run, env, comparison, judged_by, record=label if len(views) > 1 else ""
            )
            data.suite_trend = data.suite_trend or _suite_trend(comparison)
        _add_slowest(data, view, label if len(views) > 1 else "")
        data.shards += _shards(view)
        if view.cost is not None:
            data.costs.append((view.path, view.cost))
        if view.selection is not None:
            data.selections.append((view.path, view.selection))
    _add_coverage(data, [view.columns for view in views])
    data.newest = _newest(
        [(view.info.get("started"), view.info.get("duration")) for view in views]
        or [
            (r.identity.started, 0.0)
            for env in (baseline.envs.values() if baseline else ())
            for r in env.runs
        ]
    )
    if baseline is not None and not views:
        for key, env in sorted(baseline.envs.items()):
            _add_baseline_trends(data, key, env, rule)
    if baseline is not None:
        _add_across(data, baseline)
    _drop_repeated_trends(data)
    if history is not None:
        _add_flaky(data, history)
    for rows in (data.tests, data.classes, data.modules):
        rows.sort(key=lambda r: -r.seconds)
    return data


def _newest(runs: Sequence[tuple[object, object]]) -> str | None:
    """The latest end among runs given as (start, seconds); None when no start reads."""
    from datetime import datetime, timedelta, timezone

    ends = []
    for started, duration in runs:
        if not isinstance(started, str):
            continue
        try:
            start = datetime.fromisoformat(started)
        except ValueError:
            continue
        if start.tzinfo is None:
            start = start.replace(tzinfo=timezone.utc)
        seconds = float(duration) if isinstance(duration, (int, float)) else 0.0
        ends.append(start.astimezone(timezone.utc) + timedelta(seconds=seconds))
    return max(ends).strftime("%Y-%m-%dT%H:%M:%SZ") if ends else None


def as_it_stood(baseline: Baseline, started: str | None) -> Baseline:
    """``baseline`` as it stood when a run that ``started`` then began: each key's runs
    that started before it, or in the same second (starts are kept to the second; the
    run itself, if folded in, is left out by ``compare``); all of them where a start is
    not known.  A key with none is not in it yet."""
    if not started:
        return baseline
    envs = {}
    for key, env in baseline.envs.items():
        before = [i for i, r in enumerate(env.runs) if (r.identity.started or "") <= started]
        if before:
            envs[key] = env if len(before) == len(env.runs) else env.with_runs(before)
    return replace(baseline, envs=envs)


def _add_coverage(data: ReportData, runs: Sequence[RunColumns]) -> None:
    """Each key's coverage over its records (the newest is its coverage), and the tests
    that pass on one key but not another."""
    if not runs:
        return
    data.coverage = by_key(map(coverage_of, runs))
    data.coverage_gaps = gaps({key: runs[-1] for key, runs in data.coverage.items()})


def record_labels(paths: Sequence[str]) -> list[str]:
    """Each record's name in the tables: its file name, or its path where two records
    share a file name."""
    import os

    names = [os.path.basename(path) or path for path in paths]
    return [
        path if names.count(name) > 1 else name for path, name in zip(paths, names, strict=True)
    ]


def _summary(view: RecordView, comparison: Comparison | None, label: str) -> RunSummary:
    run, info = view.run, view.info
    now = then = 0.0
    basis = ""
    if comparison is not None and comparison.timing.totals_comparable:
        # Runs' totals against a run's total: each baseline run's tests, this run's.
        totals = [total for _, total in comparison.timing.suite_history]
        now, then = comparison.timing.run_total, median(totals)
        basis = f"the median of {len(totals)} baseline runs' totals, {comparison.timing.time} time"
    elif comparison is not None:
        # Laid out unlike the baseline's runs (a shard among whole runs): its own tests'
        # medians, never the whole suite's totals.
        now, then = comparison.timing.suite_now, comparison.timing.suite_then
        basis = f"the same tests' baseline medians, {comparison.timing.time} time"
    return RunSummary(
        path=view.path,
        label=label,
        key=run.key,
        started=info.get("started"),
        commit=info.get("commit"),
        branch=info.get("branch"),
        shard=info.get("shard"),
        layout=run.layout,
        duration=float(info.get("duration") or 0.0),
        outcomes=tally(view.columns),
        comparison=comparison,
        suite_now=now,
        suite_then=then,
        suite_basis=basis,
        compilation=_compilation(view.compilation),
    )


def _compilation(found: RunCompilation | None) -> str:
    from pytest_accel.perf.output import compilation_text

    return "" if found is None else compilation_text(found)


def _series(env: EnvHistory, kind: str, ident: str, now: float | None) -> list[float | None]:
    ids = env.ids[kind]
    if ident not in ids:
        return [None] * len(env.runs) + [now]
    at = ids.index(ident)
    return [*(run.sample(kind, at) for run in env.runs), now]


def _add_trends(
    data: ReportData,
    run: RunTimings,
    env: EnvHistory,
    comparison: Comparison,
    rule: Rule,
    *,
    record: str = "",
) -> None:
    """The charts of a run's findings; ``record``: the record's name, said in each
    headline and note and on its chart's last run, where the report has several."""
    from pytest_accel.perf import output
    from pytest_accel.perf.analysis.layouts import scope_of

    # The runs and timings the comparison judged: execution time, this run's layout.
    scope = scope_of(run, env, rule.time, rule.min_samples)
    run, env = scope.run, scope.env
    named = f"{record}: " if record else ""
    # One line per alarm without a chart: a recompiling function's names its tests.
    alarms = [
        "RECOMPILED " + output.describe_alarm(alarm)
        for alarm in comparison.alarm_list
        if alarm.kind == "recompiled"
    ]
    alarms += ["MEMORY " + output.describe_memory(m) for m in comparison.device_memory.grew]
    data.alarm_notes += [named + note for note in alarms]
    data.notes += [named + note for note in output.scope_notes(comparison)]

    labels = [*run_labels([r.identity for r in env.runs]), record or THIS_RUN]
    now = {
        "test": dict(zip(run.ids, run.call, strict=True)),
        "class": dict(zip(run.classes.ids, run.classes.total, strict=True)),
        "module": dict(zip(run.modules.ids, run.modules.total, strict=True)),
    }
    items: list[Trend] = []
    for change in comparison.timing.changes:
        if change.kind not in KIND_OF_FINDING:
            continue  # the suite's change: the suite chart shows it
        series = _series(
            env, KIND_OF_FINDING[change.kind], change.id, now[change.kind].get(change.id)
        )
        headline = named + "CHANGED " + output.describe_change(change)
        change_at = len(series) - change.runs
        items.append(
            Trend(
                change.kind,
                change.id,
                labels,
                series,
                change_at,
                headline,
                change.slower,
                unit=comparison.timing.time,
                severity=change.ratio if change.slower else 0.0,
            )
        )
    for finding, word in [(f, "REGRESSION") for f in comparison.timing.regressions] + [
        (f, "improved") for f in comparison.timing.improvements
    ]:
        if finding.kind not in KIND_OF_FINDING:
            continue
        kind = "warmup" if finding.warmup else KIND_OF_FINDING[finding.kind]
        items.append(
            Trend(
                finding.kind,
                finding.id,
                labels,
                _series(env, kind, finding.id, finding.current),
                None,
                f"{named}{word} {output.describe(finding)}",
                word == "REGRESSION",
                unit=comparison.timing.time,
                severity=finding.ratio if word == "REGRESSION" else 0.0,
            )
        )
    # The most severe first, whatever its kind (the worst, 5.97x, once came sixth).
    items.sort(key=lambda t: (not t.slower, -t.severity, t.kind, t.id))
    data.trends += items[:TRENDS]
    data.more_findings += [t.headline for t in items[TRENDS:]]


def _add_baseline_trends(data: ReportData, key: str, env: EnvHistory, rule: Rule) -> None:
    """A baseline alone: its changes over its own runs (the newest taken as the latest,
    as ``baseline --accept`` takes it) and its suite total, per hardware key."""
    from pytest_accel.perf import output
    from pytest_accel.perf.analysis.comparison import changes_in_runs

    labels = run_labels([r.identity for r in env.runs])
    data.baseline_only = True
    items = []
    found = changes_in_runs(env, rule)
    changed_tests = [change.id for _, _, change in found if change.kind == "test"]
    for name, row, change in found:
        if change.kind != "test" and any(t.startswith(change.id + "::") for t in changed_tests):
            continue  # one cause, one chart: its tests' change explains the group's
        series = [run.sample(name, row) for run in env.runs]
        headline = f"CHANGED under {key}: {output.describe_change(change)}"
        change_at = len(series) - change.runs
        items.append(
            Trend(change.kind, change.id, labels, series, change_at, headline, change.slower)
        )
    items.sort(key=lambda t: (not t.slower, t.kind, t.id))
    data.trends += items[:TRENDS]
    data.more_findings += [t.headline for t in items[TRENDS:]]
    totals: list[float | None] = list(summary_of(env).totals)
    if data.suite_trend is None and len(totals) > 1:
        data.suite_trend = Trend(
            "session", "suite total", labels, totals, None, f"suite total under {key}", False
        )


def _drop_repeated_trends(data: ReportData) -> None:
    """Records of one key (shards, reruns of a job) find the baseline's changes each:
    each finding is shown once."""
    seen: set[str] = set()
    kept = []
    for trend in data.trends:
        if trend.headline not in seen:
            seen.add(trend.headline)
            kept.append(trend)
    data.trends = kept
    data.more_findings = [line for line in dict.fromkeys(data.more_findings) if line not in seen]


def _suite_trend(comparison: Comparison) -> Trend | None:
    """Each baseline run's total and this run's, as the job summary's chart, with their
    median drawn as the reference: runs' totals beside a run's total (never a shard's
    among whole runs: ``Comparison.totals_comparable``)."""
    if not comparison.timing.totals_comparable:
        return None
    labels = [label for label, _ in comparison.timing.suite_history] + [THIS_RUN]
    totals: list[float | None] = [total for _, total in comparison.timing.suite_history]
    reference = median([total for _, total in comparison.timing.suite_history])
    totals.append(comparison.timing.run_total)
    return Trend(
        "session",
        "suite total",
        labels,
        totals,
        None,
        "suite total",
        False,
        reference=reference,
        unit=comparison.timing.time,
    )


def _add_slowest(data: ReportData, view: RecordView, record: str) -> None:
    from pytest_accel.cost.model import spend_of_test

    columns, key, cost = view.columns, view.run.key, view.cost
    earlier = columns.earlier

    def usd(test: str, total: float) -> float | None:
        if cost is None:
            return None
        spend = spend_of_test(total + earlier.get(test, 0.0), cost)
        return None if spend is None else spend.usd

    data.tests += [
        Row(i, key, float(total), outcome, usd(i, float(total)), record)
        for i, total, outcome in zip(columns.ids, columns.totals, columns.outcomes, strict=True)
        if outcome != "skipped"  # it did not run: no time to rank
    ]
    for name, rows in (("classes", data.classes), ("modules", data.modules)):
        groups = view.groups[name]
        rows += [
            Row(i, key, total, f"{count} test(s)", record=record)
            for i, total, count in zip(groups.ids, groups.total, groups.tests, strict=True)
        ]


def _shards(view: RecordView) -> list[Shard]:
    """A shard's run, or the shards a merged record came from."""
    info = view.info
    merged = info.get("merged_from") or []
    if merged:
        return [
            Shard(
                str(m.get("shard") or m.get("path") or "?"),
                int(m.get("tests") or 0),
                float(m.get("seconds") or 0.0),
            )
            for m in merged
        ]
    if info.get("shard"):
        return [Shard(str(info["shard"]), len(view.run.ids), sum(view.run.total))]
    return []


def _add_across(data: ReportData, baseline: Baseline) -> None:
    """The slowest tests' median per hardware key, where more than one key has them."""
    import numpy as np

    from pytest_accel.perf.analysis.rule import row_median

    keys = sorted(baseline.envs)
    if len(keys) < 2:
        return
    medians: dict[str, dict[str, float]] = {}
    for key in keys:
        ids, matrix = baseline.envs[key].matrix("tests")
        if not ids:
            continue
        values: npt.NDArray[np.float64] = row_median(matrix)
        medians[key] = {i: float(v) for i, v in zip(ids, values, strict=True) if not np.isnan(v)}
    shared = [
        t for t in set().union(*medians.values()) if sum(t in m for m in medians.values()) > 1
    ]
    shared.sort(key=lambda t: -max(m.get(t, 0.0) for m in medians.values()))
    data.across_keys = keys
    data.across = [(t, [medians.get(k, {}).get(t) for k in keys]) for t in shared[:ACROSS_ROWS]]


def _add_flaky(data: ReportData, history: History) -> None:
    rows: list[FlakyRow] = []
    for key, env in sorted(history.envs.items()):
        data.flaky_runs[key] = len(env.runs)
        for test, letters in env.tests.items():
            verdict = classify(test, letters)
            if verdict.status == "ok" and "F" not in letters and "K" not in letters:
                continue
            status, runs = verdict.status, verdict.runs
            if status == "ok" and runs < FLAKY_MIN_RUNS:
                # Rerun in 7 of 7 runs is not "ok": too few runs to judge, as the CLI says.
                status = f"needs {FLAKY_MIN_RUNS - runs} more run(s)"
            rows.append(
                FlakyRow(key, test, letters, status, verdict.flip_rate, verdict.failure_rate)
            )
    rows.sort(key=lambda r: (-r.flip_rate, -r.failure_rate, r.key, r.test))
    data.flaky = rows[:FLAKY_ROWS]
