"""What a comparison finds, as the outputs and files see it: findings, changes and the
comparison that holds them (``compare --format json`` is ``Comparison.to_json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_accel.perf.model.timings import RunIdentity

# Calls that waited this share of their time for a CPU: a busy runner, said so, and
# judged with slack for the waits of the threads they started (``analysis.comparison``).
BUSY_SHARE = 0.05
# Of a call's time, the most that slack counts as waiting: it stops at 10x.
MAX_WAIT_SHARE = 0.9
# All the process's threads waited this share of their time: busy, whatever the tests'
# own threads waited (XLA's CPU pool contends with itself on two cores: 12% quiet, 83%
# at a load of 10 on this project's machine).
THREADS_BUSY_SHARE = 0.5


def busy_share(calls: float | None, threads: float | None) -> float:
    """How busy a run's runner was: the share of their time its tests' calls waited for
    a CPU (from ``BUSY_SHARE``) or all its processes' threads did (from
    ``THREADS_BUSY_SHARE``), the larger; 0 where it was not busy."""
    return max(
        calls if calls is not None and calls >= BUSY_SHARE else 0.0,
        threads if threads is not None and threads >= THREADS_BUSY_SHARE else 0.0,
    )


def busy_slack(share: float) -> float:
    """What a threshold is widened by where a share of the time was waited: the waits of
    the threads a test starts are unseen, and slow what is left by up to this."""
    return 1.0 / (1.0 - min(share, MAX_WAIT_SHARE))


# A finding's kind -> the baseline's ids it is among (a warm-up test's are ``warmup``).
KIND_OF_FINDING = {"test": "tests", "class": "classes", "module": "modules"}


class PerfRegressionWarning(UserWarning):
    """A test, class, module or the suite got slower than its baseline."""


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
    # Judged on execution time: the seconds this run spent compiling beside it (JAX).
    compiling: float | None = None
    # A class, module or the suite: its tests that moved most, (id, seconds slower than
    # their median): many small tests a few milliseconds slower each are named here.
    movers: tuple[tuple[str, float], ...] = ()
    # Judged on the seconds JAX spent tracing (a test's, or summed over a module or the
    # suite): the project's Python, apart from execution (docs/regressions.md).
    tracing: bool = False
    # Judged without the baseline's newest run, itself this much slower: a step of a
    # short history, not yet a change (``changes.pending_rows``).
    pending: bool = False

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
        if self.compiling is not None:
            data["compiling"] = round(self.compiling, 6)
        if self.movers:
            data["moved_most"] = [{"id": i, "seconds": round(s, 6)} for i, s in self.movers]
        if self.tracing:
            data["tracing"] = True
        if self.pending:
            data["pending"] = True
        return data


@dataclass(frozen=True)
class Culprit:
    """The function a test compiled most, and where it was called from: the first frame
    outside JAX as it was traced (``perf.compiles``).  For a function jitted anew on
    every call (``jax.jit(lambda ...)(x)`` in a loop) that line is the bug."""

    function: str  # as JAX names it: ``<lambda>``, ``step``
    caller: str  # the qualified name of the function that called it: ``fit``
    path: str  # the caller's file, relative to the rootdir where it is under it
    line: int

    def describe(self) -> str:
        """``<lambda> (called in fit, calc/train.py:8)``."""
        return f"{self.function} (called in {self.caller}, {self.path}:{self.line})"

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "caller": self.caller,
            "path": self.path,
            "line": self.line,
        }


@dataclass(frozen=True)
class Recompiled:
    """A test that compiles a function it had compiled already more often than in any
    baseline run: a jitted function retraced on every call (a new closure, a static
    argument that changes, a Python scalar where an array was)."""

    id: str
    current: int  # its recompilations in this run
    baseline: int  # the most any baseline run had
    samples: int  # the baseline runs that ran it
    # Counted as the compilations of its most compiled function (``repeats``): under
    # xdist, or against baseline runs of other layouts (``analysis.compilation``).
    of_one_function: bool = False
    # The jitted function it compiled most, and how often (None: not known, a record
    # from before 0.5, or only eager operations recompiled).
    culprit: Culprit | None = None
    compilations: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "test",
            "id": self.id,
            "current": self.current,
            "baseline": self.baseline,
            "samples": self.samples,
            "counted": "repeats" if self.of_one_function else "recompiles",
            **({"culprit": self.culprit.to_json()} if self.culprit else {}),
        }


@dataclass(frozen=True)
class MemoryGrowth:
    """A test whose peak device memory grew past its most in the baseline's runs, by
    the rule's ratio and bytes (``perf.analysis.memory``): a new buffer kept alive, a
    batch grown, a cache that no longer frees."""

    id: str
    current: int  # bytes: its peak on its busiest device in this run
    baseline: int  # bytes: the most any baseline run measured
    samples: int  # the baseline runs that measured it
    at_least: bool = False  # ``current`` is a lower bound (JAX's process-wide peak)

    @property
    def ratio(self) -> float:
        return self.current / self.baseline if self.baseline > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "kind": "test",
            "id": self.id,
            "current": self.current,
            "baseline": self.baseline,
            "ratio": None if ratio == float("inf") else round(ratio, 4),
            "samples": self.samples,
            **({"at_least": True} if self.at_least else {}),
        }


@dataclass(frozen=True)
class Compilation:
    """The run's compilation against the baseline runs of its layout (JAX)."""

    seconds: float
    baseline: float | None  # their median (None: none of them kept it)
    samples: int
    grew: bool  # a finding: compile time grew (``compilation.COMPILE_GROWTH``)

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        return self.seconds / self.baseline if self.baseline > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "seconds": round(self.seconds, 6),
            "baseline": None if self.baseline is None else round(self.baseline, 6),
            "ratio": None if ratio is None or ratio == float("inf") else round(ratio, 4),
            "samples": self.samples,
            "grew": self.grew,
        }


@dataclass(frozen=True)
class RecompileVerdict:
    """JAX's recompilations judged: the tests that recompiled more than in any baseline
    run, whether they were judged at all (JAX in use, --perf-min-samples baseline runs of
    this layout), on the tests' repeats against runs of other layouts (``across``: too
    few of this one), and against how many runs."""

    found: list[Recompiled] = field(default_factory=list)
    judged: bool = False
    across: bool = False
    runs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "recompiled": [r.to_json() for r in self.found],
            "recompiles_judged": self.judged,
            "recompiles_across_layouts": self.across,
            "recompile_runs": self.runs,
        }


@dataclass(frozen=True)
class TracingVerdict:
    """The tests' tracing judged (JAX in use, runs of this layout to judge it with: a run
    laid out unlike its baseline's moves tracing between tests); the tests and modules
    whose tracing rose where others' fell by as much (``moved``: the same cost moved, a
    shared function traced first elsewhere), set aside, not findings."""

    judged: bool = False
    moved: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"tracing_judged": self.judged, "tracing_moved": self.moved}


@dataclass(frozen=True)
class MemoryVerdict:
    """Device memory judged: the tests whose peak grew (MEMORY), whether it was judged
    (a GPU or TPU reported it, and --perf-min-samples baseline runs measured it),
    against how many runs, and the run's highest peak, (test, bytes), where measured."""

    grew: list[MemoryGrowth] = field(default_factory=list)
    judged: bool = False
    runs: int = 0
    peak: tuple[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "memory": [m.to_json() for m in self.grew],
            "memory_judged": self.judged,
            "memory_runs": self.runs,
            "memory_peak": None
            if self.peak is None
            else {"id": self.peak[0], "bytes": self.peak[1]},
        }


@dataclass(frozen=True)
class RunnerLoad:
    """How busy the runner was: the seconds the run's calls waited for a CPU, left out of
    the timings (``perf.waits``), and their share of the calls' time; the share of their
    time all the processes' threads waited (None: not measured)."""

    cpu_wait: float | None = None
    calls_share: float | None = None
    threads_share: float | None = None

    @property
    def busy(self) -> float:
        """``busy_share`` of the two: 0 where the runner was not busy."""
        return busy_share(self.calls_share, self.threads_share)

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_wait": None
            if self.cpu_wait is None
            else {"seconds": self.cpu_wait, "share": round(self.calls_share or 0.0, 4)},
            "threads_cpu_wait_share": None
            if self.threads_share is None
            else round(self.threads_share, 4),
        }


@dataclass(frozen=True)
class Change:
    kind: str  # "test", "class", "module" or "session"
    id: str
    before: float  # seconds: the level before the change point
    after: float  # seconds: the level from it on
    runs: int  # consecutive runs at the new level, this one included
    since: RunIdentity  # the first of them
    tracing: bool = False  # of the seconds JAX spent tracing (``Finding.tracing``)
    # A class, module or the suite: its tests that moved most, as ``Finding.movers``.
    movers: tuple[tuple[str, float], ...] = ()
    # The last run at the old level (None: none searched): with ``since``, the commits
    # between which the code that moved it changed (``ChangedCode``).
    previous: RunIdentity | None = None

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
            **({"tracing": True} if self.tracing else {}),
            **(
                {"moved_most": [{"id": i, "seconds": round(s, 6)} for i, s in self.movers]}
                if self.movers
                else {}
            ),
        }


@dataclass(frozen=True)
class ChangedCode:
    """The code that changed between two commits (``since``: the newest run before the
    finding's step; ``until``: the first at it) that a finding's test ran, by the
    dependency map (``pytest_accel_changed_code``): where a reviewer looks first."""

    since: str
    until: str | None  # None: this run's work tree
    names: tuple[str, ...]  # ``pkg/mod.py:Class.method``, the innermost first

    def describe(self, most: int = 3) -> str:
        """``changed code it runs since abc123def456: pkg/mod.py:f and 2 more``."""
        extra = f" and {len(self.names) - most} more" if len(self.names) > most else ""
        return (
            f"changed code it runs since {self.since[:12]}: {', '.join(self.names[:most])}{extra}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "code": list(self.names)}


# What --perf-fail fails on: every consumer (the gate, the warnings, the annotations,
# the job summary, the exit reason, the report) reads ``Comparison.alarm_list``, so a kind
# added here reaches all of them and none can be forgotten in one.
ALARM_KINDS = ("regression", "slowdown", "recompiled", "memory")


@dataclass(frozen=True)
class Alarm:
    """One finding that fails a run under --perf-fail, and its kind (``ALARM_KINDS``);
    with the findings that share its cause beneath it (``symptoms``: a recompiling
    function's other tests, their slower tracing and execution, a suite total they
    moved most), said once."""

    kind: str
    finding: Finding | Change | Recompiled | MemoryGrowth
    symptoms: tuple[Alarm, ...] = ()
    # The changed code its test (a group's: its tests that moved most) ran, where a
    # dependency map can say (``Comparison.changed_code``).
    changed: ChangedCode | None = None

    @property
    def culprit(self) -> Culprit | None:
        found = self.finding
        return found.culprit if isinstance(found, Recompiled) else None

    @property
    def recompiling_tests(self) -> int:
        """The tests that recompiled: this alarm's and its symptoms'."""
        return sum(part.kind == "recompiled" for part in (self, *self.symptoms))

    @property
    def scope(self) -> str:
        """``test``, ``class``, ``module`` or ``session``."""
        return scope_of(self.finding)

    @property
    def id(self) -> str:
        return self.finding.id

    @property
    def severity(self) -> float:
        """How far from its baseline: a ratio (recompilations: against at least one)."""
        found = self.finding
        if isinstance(found, Recompiled):
            return found.current / max(found.baseline, 1)
        return found.ratio if found.ratio != float("inf") else 1e9


@dataclass(frozen=True)
class TimingVerdict:
    """The timings judged: the tests', classes', modules' and the suite's findings and
    changes, what was new, missing or learning, and what the run and the runs it was
    judged against were (layout, basis, speed) where that qualifies them."""

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
    # When this run spread its tests unlike the baseline's runs: both layouts, and the
    # tests whose findings their class or module did not confirm (comparison.py).
    layout: str | None = None
    baseline_layout: str | None = None
    unconfirmed: list[str] = field(default_factory=list)
    # The suite total the comparison judged: its tests now, and their baseline medians.
    suite_now: float = 0.0
    suite_then: float = 0.0
    # The suite total of each baseline run, oldest first: (its commit or start, seconds).
    suite_history: list[tuple[str, float]] = field(default_factory=list)
    # This run's total as those are summed (every passing test, warm-ups included): what
    # a chart draws beside them, a run's total beside runs' totals.
    run_total: float = 0.0
    # The run's own layout (``timings.layout_of``; None: not known), whatever the
    # baseline's: what the notes name it by.
    run_layout: str | None = None
    time: str = "wall"  # what the timings were judged on: "execution" or "wall"
    # The baseline's runs left out: timed on the other basis; of other layouts (where
    # enough of this run's own were there).  ``change_runs``: where too few were, the
    # runs of this layout change detection looked at (None: all).
    left_out_time: int = 0
    left_out_layout: int = 0
    change_runs: int | None = None
    # Slower by every gate but the samples a verdict needs: no alarm yet ("learning").
    learning: list[Finding] = field(default_factory=list)
    runs: int | None = None  # the baseline's runs it was compared with (None: not known)
    min_samples: int = 3  # the samples a verdict needs (``--perf-min-samples``)
    # Steps that began between two runs of one commit: the runner or its environment
    # moved, not the code; never reported as changes (``analysis.comparison``).
    unattributed: list[Change] = field(default_factory=list)

    @property
    def slowdowns(self) -> list[Change]:
        return [c for c in self.changes if c.slower]

    @property
    def totals_comparable(self) -> bool:
        """Whether this run's suite total stands beside the baseline runs' totals: it was
        laid out as most of them were.  Otherwise (a shard among whole runs, xdist among
        serial runs) the suite total is not judged, and no output draws it beside them."""
        return bool(self.suite_history) and self.layout is None


@dataclass(frozen=True)
class Comparison:
    """One run judged against a baseline: built once by ``perf.analysis`` (each step
    returns a new one, ``dataclasses.replace``; ``timed`` for the timing verdict), read
    by every output.  Each question a run is judged on is its own verdict."""

    key: str  # the hardware key it was compared under (the file says "env")
    timing: TimingVerdict = field(default_factory=TimingVerdict)
    # JAX's recompilations, its compile time, the tests' tracing, device memory; and how
    # busy the runner was.
    recompiles: RecompileVerdict = field(default_factory=RecompileVerdict)
    compilation: Compilation | None = None
    tracing: TracingVerdict = field(default_factory=TracingVerdict)
    device_memory: MemoryVerdict = field(default_factory=MemoryVerdict)
    load: RunnerLoad = field(default_factory=RunnerLoad)
    found: bool = True  # whether the baseline has the hardware key
    available_keys: list[str] = field(default_factory=list)  # its keys, when it has not
    # The run was interrupted: a part of the suite, compared as it is; no gate passes.
    interrupted: bool = False
    # The changed code each alarm's test ran, by (scope, id) (``ChangedCode``): filled
    # by the run, where it has a dependency map, once the alarms are known.
    changed_code: Mapping[tuple[str, str], ChangedCode] = field(default_factory=dict)

    def timed(self, **changes: Any) -> Comparison:
        """This comparison with its timing verdict's ``changes``."""
        return replace(self, timing=replace(self.timing, **changes))

    @property
    def alarm_list(self) -> list[Alarm]:
        """What ``--perf-fail`` fails on, the most severe first (``ALARM_KINDS``)."""
        of_kind: dict[str, list[Finding] | list[Change] | list[Recompiled] | list[MemoryGrowth]] = {
            "regression": self.timing.regressions,
            "slowdown": self.timing.slowdowns,
            "recompiled": self.recompiles.found,
            "memory": self.device_memory.grew,
        }
        found = [
            Alarm(kind, finding, changed=self.changed_code.get((scope_of(finding), finding.id)))
            for kind in ALARM_KINDS
            for finding in of_kind[kind]
        ]
        return by_cause(sorted(found, key=lambda alarm: -alarm.severity))

    @property
    def alarms(self) -> int:
        return len(self.alarm_list)

    def to_json(self) -> dict[str, Any]:
        timing = self.timing
        return {
            "env": self.key,
            "regressions": [f.to_json() for f in timing.regressions],
            "improvements": [f.to_json() for f in timing.improvements],
            "changes": [c.to_json() for c in timing.changes],
            "new": timing.new,
            "new_slow": [{"id": i, "current": round(s, 6)} for i, s in timing.new_slow],
            "missing": timing.missing,
            "compared": timing.compared,
            "speed": round(timing.speed, 4),
            "warmup": timing.warmup,
            "layout": timing.layout,
            "baseline_layout": timing.baseline_layout,
            "unconfirmed": timing.unconfirmed,
            "suite": {
                "current": round(timing.suite_now, 6),
                "baseline": round(timing.suite_then, 6),
                "history": [{"run": run, "total": round(t, 6)} for run, t in timing.suite_history],
                "run_total": round(timing.run_total, 6),
            },
            "available_envs": self.available_keys,
            "time": timing.time,
            "left_out": {"time": timing.left_out_time, "layout": timing.left_out_layout},
            "change_runs": timing.change_runs,
            **self.recompiles.to_json(),
            "compilation": None if self.compilation is None else self.compilation.to_json(),
            "learning": [f.to_json() for f in timing.learning],
            "interrupted": self.interrupted,
            "runs": timing.runs,
            "min_samples": timing.min_samples,
            **self.load.to_json(),
            **self.tracing.to_json(),
            "unattributed": [c.to_json() for c in timing.unattributed],
            "changed_code": [
                {"kind": scope, "id": ident, **code.to_json()}
                for (scope, ident), code in self.changed_code.items()
            ],
            **self.device_memory.to_json(),
        }


def scope_of(found: Finding | Change | Recompiled | MemoryGrowth) -> str:
    """A finding's ``test``, ``class``, ``module`` or ``session``."""
    return "test" if isinstance(found, (Recompiled, MemoryGrowth)) else found.kind


def by_cause(alarms: list[Alarm]) -> list[Alarm]:
    """``alarms`` (the most severe first) with those of one cause made one: per
    recompiling function (``Culprit``), the test that compiled it most leads; its other
    tests, any test-level regression or change of those tests (tracing or execution)
    and any class, module or suite finding whose most moved test is one of them follow
    it as symptoms.  The rest stay as they are, in their order."""
    leads: dict[Culprit, Alarm] = {}
    tests_of: dict[Culprit, set[str]] = {}
    for alarm in alarms:
        culprit = alarm.culprit
        if culprit is None:
            continue
        tests_of.setdefault(culprit, set()).add(alarm.id)
        lead = leads.get(culprit)
        if lead is None or _compiled(alarm) > _compiled(lead):
            leads[culprit] = alarm
    if not leads:
        return alarms
    culprit_of = {test: culprit for culprit, tests in tests_of.items() for test in tests}
    symptoms: dict[Culprit, list[Alarm]] = {culprit: [] for culprit in leads}
    kept: list[Alarm] = []
    for alarm in alarms:
        culprit = alarm.culprit or _moved_by(alarm, culprit_of)
        if culprit is None or alarm is leads[culprit]:
            kept.append(alarm)
        else:
            symptoms[culprit].append(alarm)
    return [
        replace(a, symptoms=tuple(symptoms[c])) if (c := a.culprit) in leads else a for a in kept
    ]


def _compiled(alarm: Alarm) -> int:
    found = alarm.finding
    assert isinstance(found, Recompiled)
    return found.compilations or found.current


def _moved_by(alarm: Alarm, culprit_of: dict[str, Culprit]) -> Culprit | None:
    """The recompiling function behind a regression or change: its test's, or, for a
    class, module or the suite, that of the test that moved it most."""
    found = alarm.finding
    if isinstance(found, (Recompiled, MemoryGrowth)):
        return None
    if found.kind == "test":
        return culprit_of.get(found.id)
    movers = found.movers if isinstance(found, Finding) else ()
    return culprit_of.get(movers[0][0]) if movers else None
