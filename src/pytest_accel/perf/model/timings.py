"""What one run measured, in columns: the input of the comparison and of the baseline.

A session builds it from its ``TimingTable``; ``pytest-accel`` from a record.  Either way
the same rules decide what is comparable:

- a test is compared (and folded into a baseline) when it passed.  The first test each
  process runs pays the process's warm-up (initialising JAX or torch, a backend, a
  compile cache), which moves to another test whenever the order or the xdist workers
  change: such a timing is kept and judged apart, against the runs where the same test
  also ran first;
- a class or module is compared when it ran *whole* here: none of its tests deselected
  (``-k``, ``-m``, another CI shard), failed, or paying the warm-up;
- full garbage collections are left out of every timing (``perf.pauses``), and so is
  the time a call waited for a CPU on a busy runner (``perf.waits``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from itertools import compress, repeat
from operator import add, and_, eq
from typing import Any

from pytest_accel.outcomes import FAILING
from pytest_accel.perf.model.runlength import runs


@dataclass(frozen=True)
class RunIdentity:
    """Which run a sample came from."""

    commit: str | None = None
    branch: str | None = None
    started: str | None = None  # YYYY-MM-DDTHH:MM:SSZ
    # A token drawn once per session (``new_run_id``; a merged record's is derived from
    # its shards'): a start time to the second does not tell apart two runs of one commit.
    run_id: str | None = None
    # A merged record's shards' ids: a baseline that holds one of them holds part of it.
    parts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        found = {"commit": self.commit, "branch": self.branch, "started": self.started}
        return {**found, "id": self.run_id} if self.run_id else found

    def describe(self) -> str:
        """``abc1234`` (a commit), else the start time, else ``an unnamed run``."""
        if self.commit:
            return self.commit[:12]
        return self.started or "an unnamed run"

    def same_run(self, other: RunIdentity) -> bool | None:
        """True or False when both carry an id (a merged record is also the same run as
        each of its shards); None when one of them predates ids and only the commit,
        branch and start (and the samples) can tell."""
        if self.run_id and other.run_id:
            return (
                self.run_id == other.run_id
                or self.run_id in other.parts
                or other.run_id in self.parts
            )
        return None

    def same_commit(self, other: RunIdentity) -> bool:
        """Both runs are of one known commit: the code did not change between them."""
        return bool(self.commit) and self.commit == other.commit

    def same_start(self, other: RunIdentity) -> bool:
        return (self.commit, self.branch, self.started) == (
            other.commit,
            other.branch,
            other.started,
        )


def busiest(memory: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Each test's peak device memory on its busiest device, from its peaks per device
    (``RunTimings.device_memory`` from a record's or a table's ``device_memory``)."""
    return {test: max(peaks.values()) for test, peaks in memory.items() if peaks}


def run_labels(identities: Sequence[RunIdentity]) -> list[str]:
    """One short label per run that tells the runs apart on a chart's axis: the commit
    where every run has its own (``abc1234``), else the start (``11-26 14:02``, with the
    commit where known: ``abc1234 14:02``), to the second where minutes repeat."""
    commits = [i.commit[:7] if i.commit else None for i in identities]
    if all(commits) and len(set(commits)) == len(commits):
        return [str(c) for c in commits]
    starts = [i.started or "" for i in identities]
    days = {s[:10] for s in starts if s}
    cut = slice(11, 16) if len(days) <= 1 else slice(5, 16)  # HH:MM, or MM-DD HH:MM
    times = [s[cut].replace("T", " ") for s in starts]
    if len(set(times)) < len(times):
        cut = slice(11, 19) if len(days) <= 1 else slice(5, 19)
        times = [s[cut].replace("T", " ") for s in starts]
    return [
        " ".join(part for part in (commit, time) if part) or f"run {n + 1}"
        for n, (commit, time) in enumerate(zip(commits, times, strict=True))
    ]


def new_run_id() -> str:
    """A token per session: 16 hex digits from the OS's random source, as
    ``secrets.token_hex(8)`` makes them, without its imports (``hmac``, ``hashlib``)."""
    return os.urandom(8).hex()


def merged_run_id(parts: Sequence[str | None]) -> str | None:
    """The id of a record merged from ``parts`` (its shards' ids): the same shards
    merged twice give the same id, so the result is still recognised as folded in."""
    if not parts or any(not part for part in parts):
        return None
    if len(parts) == 1:
        return parts[0]  # a record merged into itself is the same run
    import hashlib

    joined = "\n".join(sorted(str(part) for part in parts))
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


@dataclass
class Groups:
    """Classes or modules of one run."""

    ids: list[str] = field(default_factory=list)
    total: list[float] = field(default_factory=list)  # seconds: the sum of its tests' totals
    whole: list[bool] = field(default_factory=list)  # comparable: see the module docstring

    def comparable(self) -> dict[str, float]:
        return {i: t for i, t, w in zip(self.ids, self.total, self.whole, strict=True) if w}


@dataclass(frozen=True)
class RunTimings:
    """One run's tests in columns, and its classes and modules."""

    key: str
    identity: RunIdentity
    ids: list[str]
    outcome: list[str]
    call: list[float]
    total: list[float]
    cls: list[str | None]
    module: list[str | None]
    warmup: list[bool]  # the first test its process ran
    classes: Groups
    modules: Groups
    # Modules with tests that were deselected here: a test of theirs that did not run
    # is not "missing" (another shard, -k or -m took it).
    partial_modules: frozenset[str] = frozenset()
    shard: str | None = None
    layout: str | None = None  # how the tests were spread over processes (``layout_of``)
    # "execution": JAX compilation is taken out of every timing (``judged_on``);
    # "wall": as measured.
    basis: str = "wall"
    # Where JAX is in use (``perf.compiles``), per test: the seconds it spent compiling,
    # those of its call, and its compilations of a function it had compiled already.
    compiling: Mapping[str, float] | None = None
    call_compiling: Mapping[str, float] | None = None
    recompiles: Mapping[str, int] | None = None
    # Per test, the seconds JAX spent tracing its Python (None: no JAX, or a record of
    # 0.3): the project's own speed, judged per test apart from execution.
    tracing: Mapping[str, float] | None = None
    # Per test, what its thread waited for a CPU within its tracing, at most (None: not
    # measured, a record of 0.4.0): taken out of its tracing by ``without_waits``.
    tracing_waits: Mapping[str, float] | None = None
    # Per test, the compilations of the function it compiled most, where over one (None:
    # not counted, a record from before 0.4): judged where the runs of the baseline are
    # laid out unlike this one (``analysis.compilation``).
    repeats: Mapping[str, int] | None = None
    # Per test whose call waited for a CPU: the share of its call it waited (taken out
    # by ``without_waits``): how starved the runner was around it, for the threads it
    # started too, whose waits are not counted (``analysis.comparison``).
    wait_shares: Mapping[str, float] | None = None
    # The share of their time all the process's threads waited for a CPU over the run
    # (every worker's, under xdist): the waits a test's own clock does not see (None: not
    # measured, a record from before 0.5).
    threads_wait_share: float | None = None
    # Per test that compiled a jitted function more than once: the one it compiled most,
    # where it was called from and how often it was compiled, ``(function, caller, path,
    # line, compilations)`` (None: a record from before 0.5).
    recompiling: Mapping[str, tuple[str, str, str, int, int | None]] | None = None
    # Seconds the tests' calls waited for a CPU, left out of the timings (``perf.waits``);
    # None where the run did not measure it.
    cpu_wait: float | None = None
    # Per test, its peak device memory in bytes on its busiest device (None: no GPU or
    # TPU reported memory), and the tests whose peak is a lower bound (JAX's peak is the
    # process's: a test that did not raise it is known to have used at least so much).
    device_memory: Mapping[str, int] | None = None
    memory_bounded: frozenset[str] = frozenset()

    def exact_memory(self) -> dict[str, int]:
        """The tests' peaks that are not lower bounds, of those that passed: what a
        baseline keeps."""
        if not self.device_memory:
            return {}
        passed = {i for i, o in zip(self.ids, self.outcome, strict=True) if o == "passed"}
        return {
            t: n
            for t, n in self.device_memory.items()
            if t in passed and t not in self.memory_bounded
        }

    @property
    def cpu_wait_share(self) -> float | None:
        """The share of the calls' time they waited for a CPU: the waits over the calls'
        seconds (as judged) and the waits (None: not measured)."""
        if self.cpu_wait is None:
            return None
        called = sum(self.call) + self.cpu_wait
        return self.cpu_wait / called if called > 0 else 0.0

    @property
    def compile_seconds(self) -> float | None:
        """The run's compilation, in seconds (None: the suite does not use JAX)."""
        return None if self.compiling is None else round(sum(self.compiling.values()), 6)

    def metric(self, name: str) -> list[float]:
        return self.call if name == "call" else self.total

    def comparable(self, metric: str = "call", *, warmup: bool = False) -> dict[str, float]:
        """Tests that passed, with their timing: those that did not pay their process's
        warm-up, or (``warmup``) those that did."""
        # C-level maps, no Python frame per test: 100,000 of them offline.  Usually all
        # passed and none (or all) ran first in their process: a count says so.
        wanted = self.warmup.count(warmup)
        if not wanted:
            return {}
        if wanted == len(self.ids) and self.outcome.count("passed") == wanted:
            return dict(zip(self.ids, self.metric(metric), strict=True))
        passed = map(eq, self.outcome, repeat("passed"))
        keep = map(and_, passed, map(eq, self.warmup, repeat(warmup)))
        return dict(compress(zip(self.ids, self.metric(metric), strict=True), keep))

    def comparable_tracing(self) -> dict[str, float]:
        """Each test's tracing seconds, of the tests whose execution is compared: passed
        and not first in their process (whose tracing is the process's: every shared
        function is traced there first)."""
        if not self.tracing:
            return {}
        tracing = self.tracing
        return {ident: tracing.get(ident, 0.0) for ident in self.comparable()}

    def ran_modules(self) -> set[str]:
        return {m for m in self.module if m is not None}


def layout_of(workers: int, shards: Sequence[str | None] = ()) -> str:
    """How a run spread its tests over processes, which decides the order each process
    saw them in: ``serial``, ``xdist 4``, ``serial, shard 2/3``, ``xdist 2, shards
    1/2+2/2`` (records merged from shards)."""
    text = f"xdist {workers}" if workers else "serial"
    named = sorted({shard for shard in shards if shard})
    if len(named) == 1:
        text += f", shard {named[0]}"
    elif named:
        text += f", shards {'+'.join(named)}"
    return text


def without_pauses(run: RunTimings, pauses: Sequence[float]) -> RunTimings:
    """``run`` with each test's full garbage collections (``perf.pauses``) taken out of
    its call and total, and out of its class's and module's totals."""
    paused_rows = list(compress(range(len(pauses)), pauses))
    if not paused_rows:
        return run
    # A run has a handful of pauses: copy the columns' references, change those rows.
    call, total = list(run.call), list(run.total)
    for row in paused_rows:
        call[row] = max(call[row] - pauses[row], 0.0)
        total[row] = max(total[row] - pauses[row], 0.0)
    classes, modules = _groups_less(run, {row: pauses[row] for row in paused_rows})
    return replace(run, call=call, total=total, classes=classes, modules=modules)


def _groups_less(run: RunTimings, taken: Mapping[int, float]) -> tuple[Groups, Groups]:
    """The run's classes and modules, each total less the seconds ``taken`` out of its
    tests (by row)."""
    found = []
    for column, groups in ((run.cls, run.classes), (run.module, run.modules)):
        by_group: dict[str, float] = {}
        for row, seconds in taken.items():
            group = column[row]
            if group is not None:
                by_group[group] = by_group.get(group, 0.0) + seconds
        totals = zip(groups.ids, groups.total, strict=True)
        less = [max(t - by_group.get(g, 0.0), 0.0) for g, t in totals]
        found.append(Groups(groups.ids, less, groups.whole))
    return found[0], found[1]


# What a trace keeps of itself once its CPU wait is out.  The wait taken is all the
# wait since the clock's last reading that could lie in the trace (``perf.compiles``): on
# a busy runner a short trace can lose all of it, and one 0 among a short baseline's
# three samples, in log seconds, made a spread that hid a trace 300 times slower (this
# project's own suite).  A trace is no finding under ``min_duration`` either way.
TRACE_FLOOR = 1e-3


def without_waits(run: RunTimings, waits: Sequence[float] | None) -> RunTimings:
    """``run`` with the seconds each call waited for a CPU (``perf.waits``) taken out of
    its call and total, and out of its class's and module's totals.  The wait is shared
    between the call's compilation and its execution in proportion to their seconds
    (which of them waited is not known): what is judged of either is what it took while
    it had a CPU, on a busy runner as on a quiet one.  A test's tracing loses the wait
    measured within it (``tracing_waits``), or where that was not measured, the call's
    wait in proportion."""
    if waits is None:
        return run
    measured = run.tracing_waits or {}
    tracing = None if run.tracing is None else dict(run.tracing)
    if tracing is not None:
        for ident, waited in measured.items():
            if ident in tracing:
                traced = tracing[ident]
                tracing[ident] = round(max(traced - waited, min(traced, TRACE_FLOOR)), 6)
    waiting = list(compress(range(len(waits)), waits))
    if not waiting:
        return replace(run, cpu_wait=0.0, tracing=tracing)
    call, total = list(run.call), list(run.total)
    calls = None if run.call_compiling is None else dict(run.call_compiling)
    compiling = None if run.compiling is None else dict(run.compiling)
    taken: dict[int, float] = {}
    for row in waiting:
        seconds = min(waits[row], call[row])
        if seconds <= 0.0:
            continue
        kept = 1.0 - seconds / call[row]
        call[row] -= seconds
        total[row] = max(total[row] - seconds, 0.0)
        taken[row] = seconds
        ident = run.ids[row]
        if calls is not None and compiling is not None and ident in calls:
            share = calls[ident] * (1.0 - kept)
            calls[ident] -= share
            compiling[ident] = max(compiling.get(ident, 0.0) - share, 0.0)
        if tracing is not None and ident in tracing and ident not in measured:
            tracing[ident] = round(tracing[ident] * kept, 6)  # its share of the call's wait
    classes, modules = _groups_less(run, taken)
    return replace(
        run,
        call=call,
        total=total,
        classes=classes,
        modules=modules,
        call_compiling=calls,
        compiling=compiling,
        tracing=tracing,
        cpu_wait=round(sum(taken.values()), 6),
        wait_shares={
            run.ids[row]: seconds / (call[row] + seconds) for row, seconds in taken.items()
        },
    )


def judged_on(run: RunTimings, time: str) -> RunTimings:
    """``run`` as it is judged and folded into a baseline: on ``execution`` (the default),
    each test's JAX compilation (``perf.compiles``) taken out of its call and total, and
    out of its class's and module's totals; on ``wall``, as measured.  Which test pays
    for a shared function's compilation depends on what ran before it in its process,
    so what is left moves with the code, not with the order or the xdist workers."""
    compiling = run.compiling
    if time != "execution" or compiling is None or run.basis == "execution":
        return run
    calls = run.call_compiling or {}
    call, total = list(run.call), list(run.total)
    taken: dict[int, float] = {}
    for row, ident in enumerate(run.ids):
        seconds = compiling.get(ident, 0.0)
        if not seconds:
            continue
        call[row] = max(call[row] - calls.get(ident, 0.0), 0.0)
        total[row] = max(total[row] - seconds, 0.0)
        taken[row] = seconds
    classes, modules = _groups_less(run, taken)
    return replace(run, call=call, total=total, classes=classes, modules=modules, basis="execution")


def whole_groups(
    column: list[str | None],
    outcomes: list[str],
    warmup: list[bool],
    totals: list[float],
    partial: frozenset[str] = frozenset(),
    *,
    column_runs: tuple[list[str | None], list[int]] | None = None,
) -> Groups:
    """Per group (a class or a module column): its total, and whether it ran whole.

    A group's tests run one after another: a step per run of them (``runlength.runs``,
    or ``column_runs`` when the caller has them), its seconds added in C, in the order
    a step per test would add them."""
    if not len(column) == len(outcomes) == len(warmup) == len(totals):
        raise ValueError("whole_groups: columns of different lengths")
    order: dict[str, int] = {}
    groups = Groups()
    end = 0
    for group, count in zip(*(column_runs or runs(column)), strict=True):
        start, end = end, end + count
        if group is None:
            continue
        index = order.get(group)
        if index is None:
            index = order[group] = len(groups.ids)
            groups.ids.append(group)
            groups.total.append(0.0)
            groups.whole.append(group not in partial)
        groups.total[index] = reduce(add, totals[start:end], groups.total[index])
        if groups.whole[index] and (
            not FAILING.isdisjoint(outcomes[start:end]) or any(warmup[start:end])
        ):
            groups.whole[index] = False
    return groups


def first_per_process(workers: Sequence[str | None], starts: Sequence[float]) -> list[bool]:
    """Whether each test was the first its process (its xdist worker, or the one process
    of a serial run) ran: the one with the earliest start."""
    marked = [False] * len(workers)
    if len(set(workers)) == 1:  # one process: the earliest start, found in C
        earliest = min(filter(None, starts), default=None)  # no start: crashed before setup
        if earliest is not None:
            marked[starts.index(earliest)] = True
        return marked
    first: dict[str | None, tuple[float, int]] = {}
    for row, (worker, start) in enumerate(zip(workers, starts, strict=True)):
        if not start:
            continue  # no start: a test that crashed its worker before setup
        seen = first.get(worker)
        if seen is None or start < seen[0]:
            first[worker] = (start, row)
    for _, row in first.values():
        marked[row] = True
    return marked


# (commit variable, branch variables in order of preference)
