"""The timing feature from files alone, for the command line tool: compare a record
with a baseline, add records to a baseline, accept changes, read expected durations."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from pytest_accel.fields import utc_timestamp
from pytest_accel.files import InputError, dumps, parse_json, read_json
from pytest_accel.locking import update_locked
from pytest_accel.outcomes import RecordedOutcomes, interrupted
from pytest_accel.perf.analysis.comparison import changes_in_runs, compare_with_baseline
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.analysis.summary import (
    durations_basis,
    expected_durations,
    summary_to_write,
)
from pytest_accel.perf.formats.baseline import (
    BASELINE_VERSION,
    Baseline,
    accept,
    fold_runs,
    load_baseline,
    parse_baseline,
    to_json,
    update_baseline_file,
)
from pytest_accel.perf.formats.record import (
    RECORD_SCHEMA,
    attempts_of,
    check_record,
    judgement_of,
    load_record,
    timings,
)
from pytest_accel.perf.model.findings import Change, Comparison
from pytest_accel.perf.model.overrides import Override
from pytest_accel.perf.model.timings import RunTimings
from pytest_accel.perf.options import build_rule


def baseline_json(baseline: Baseline) -> dict[str, Any]:
    """A baseline as its file holds it, each key's summary derived where it is not kept."""
    return to_json(baseline, summary_to_write)


LARGE_BASELINE = 1 << 20  # bytes: thousands of tests' samples, compared with numpy anyway


@dataclass(frozen=True)
class Given:
    """What a command was given on top of what a record's run was judged by: rule
    settings keyed by ``Rule`` field, ``--new-slow``, and the flags as typed (for the
    note that says so)."""

    rule: Mapping[str, Any]
    new_slow: float | None = None
    flags: tuple[str, ...] = ()


def judged_like_its_run(
    path: str, record: Mapping[str, Any], given: Given
) -> tuple[Rule, Mapping[str, Override], float, str]:
    """The rule, ``@perf`` overrides and new-slow threshold a record's run was judged
    by (its ``judgement``), with what the command was given applied on top; and a note
    that says which: a command reading a record says what the run said."""
    stored = judgement_of(path, record)
    settings = {**(stored.rule if stored else {}), **given.rule}
    new_slow = given.new_slow
    if new_slow is None:
        new_slow = stored.new_slow if stored and stored.new_slow is not None else 1.0
    overrides = stored.overrides if stored else {}
    if stored is None:
        why = "a merge of records" if record["run"].get("merged_from") else "from before 0.4"
        note = f"judged by the default rule: the record ({why}) keeps none of its own"
    else:
        marks = f" and its {len(overrides)} @pytest.mark.perf override(s)" if overrides else ""
        note = f"judged as the run was: by the record's rule{marks}"
    if given.flags:
        note += f"; given here, on top: {', '.join(given.flags)}"
    return build_rule(settings), overrides, new_slow, note


def compare_files(
    record_path: str,
    baseline_path: str,
    given: Given | None = None,
    key: str | None = None,
) -> tuple[Comparison, str]:
    """The plugin's comparison, from a record and a baseline (under the record's key),
    by what the record says its run was judged by (``judged_like_its_run``); and the
    note of what that was."""
    if os.path.getsize(baseline_path) > LARGE_BASELINE:
        import numpy  # noqa: F401  # read in bulk: the samples' check makes the arrays
    _, data = load_record(record_path)
    rule, overrides, new_slow, note = judged_like_its_run(record_path, data, given or Given({}))
    run = timings(data)
    if key:
        run = replace(run, key=key)
    comparison = compare_with_baseline(
        run, load_baseline(baseline_path), rule, overrides, new_slow=new_slow
    )
    comparison = replace(comparison, interrupted=interrupted(data))
    return comparison, note


@dataclass(frozen=True)
class Folded:
    """What ``fold_records`` did: the baseline now, the runs added, and why the others
    were not (one line each, naming the record)."""

    baseline: Baseline
    added: int
    notes: list[str]


def fold_records(paths: Sequence[str], into: str, window: int, time: str = "execution") -> Folded:
    """Add records to the baseline file ``into``, oldest first.  An interrupted run adds
    nothing (as with --perf-update-baseline), nor does one the baseline holds already."""
    notes: list[str] = []
    runs: list[tuple[str, RunTimings]] = []
    for path in paths:
        data = load_record(path)[1]
        if interrupted(data):
            notes.append(f"{path}: not added: an interrupted run (exit status 2) adds nothing")
            continue
        runs.append((path, timings(data)))
    runs.sort(key=lambda pair: pair[1].identity.started or "")
    held: list[RunTimings] = []
    dropped: list[tuple[str, str]] = []
    if runs:
        baseline = update_baseline_file(
            into,
            [run for _, run in runs],
            window,
            held,
            summarise=summary_to_write,
            time=time,
            dropped=dropped,
        )
    else:  # nothing to add: the file stays as it is, or is not made
        baseline = load_baseline(into) if os.path.exists(into) else Baseline({}, window)
    kept_already = {id(run) for run in held}  # by identity: a run's == compares every sample
    notes += [
        f"{path}: not added: {into} holds this run already"
        for path, run in runs
        if id(run) in kept_already
    ]
    if dropped:
        from pytest_accel.perf.output import dropped_line

        notes.append(dropped_line(dropped, window).removeprefix("perf: "))
    return Folded(baseline, len(runs) - len(held), notes)


@dataclass(frozen=True)
class StoredBaseline:
    """A store's newest runs of a key, folded (``baseline``): the store as shown, how
    many runs went in, and one line for each object passed over."""

    name: str
    baseline: Baseline
    runs: int
    notes: tuple[str, ...]
    outcomes: tuple[RecordedOutcomes, ...] = ()  # the runs' tests, for the flaky history


def join_slices(
    records: Sequence[tuple[str, Mapping[str, Any]]], notes: list[str]
) -> list[tuple[str, Mapping[str, Any]]]:
    """``records`` with the hosts of each named multi-host run (``run.slice.name``)
    joined into one record (``merge.join_hosts``), in the place of its first host's;
    what joining found goes into ``notes``."""
    from pytest_accel.perf.formats.merge import MergeError, join_hosts

    slices: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, data in records:
        run = data["run"]
        named = (run.get("slice") or {}).get("name") if run.get("host") is not None else None
        if named:
            slices.setdefault(named, []).append((where, dict(data)))
    joined: list[tuple[str, Mapping[str, Any]]] = []
    done: set[str] = set()
    for where, data in records:
        named = (data["run"].get("slice") or {}).get("name")
        if data["run"].get("host") is None or not named:
            joined.append((where, data))
        elif named not in done:
            done.add(named)
            try:
                result = join_hosts(slices[named])
            except MergeError as exc:
                notes.append(f"run {named}: its hosts' records not joined: {exc}")
                continue
            notes += [f"run {named}: {note}" for note in result.notes]
            joined.append((f"{where} (run {named}, {len(slices[named])} host(s))", result.record))
    return joined


def baseline_of_stored(
    name: str,
    key: str,
    objects: Sequence[tuple[str, bytes]],
    window: int,
    time: str = "execution",
) -> StoredBaseline:
    """The baseline a store's newest runs of ``key`` make (each object's URL and bytes,
    oldest first: ``store.history.StoredRuns``): each read as a record (one that is
    not, or is another key's, is passed over and said) and folded as
    ``baseline_of_records`` folds files."""
    notes: list[str] = []
    records: list[tuple[str, Mapping[str, Any]]] = []
    for where, raw in objects:
        try:
            data = check_record(where, parse_json(where, raw))
            if data["env"]["key"] != key:
                raise InputError(where, f"holds a run of {data['env']['key']!r}")
        except InputError as exc:
            notes.append(f"{exc}: passed over")
            continue
        records.append((where, data))
    records = join_slices(records, notes)
    folded = baseline_of_records(records, name, window, time)
    notes += folded.notes
    outcomes = tuple(
        RecordedOutcomes(
            data["run"]["started"],
            where,
            data["env"]["key"],
            data["env"].get("platform"),
            dict(zip(data["tests"]["id"], data["tests"]["outcome"], strict=True)),
            attempts_of(data),
        )
        for where, data in records
        if not interrupted(data)
    )
    return StoredBaseline(name, folded.baseline, folded.added, tuple(notes), outcomes)


def baseline_of_records(
    records: Sequence[tuple[str, Mapping[str, Any]]],
    name: str,
    window: int,
    time: str = "execution",
) -> Folded:
    """The baseline the checked ``records`` (name, data) would make as a file of their
    own, folded in memory (a store's runs): written and read back as one, so a verdict
    from it is the verdict from that file.  Interrupted runs add nothing."""
    notes = [
        f"{path}: not added: an interrupted run (exit status 2) adds nothing"
        for path, data in records
        if interrupted(data)
    ]
    runs = [timings(data) for _, data in records if not interrupted(data)]
    runs.sort(key=lambda run: run.identity.started or "")
    baseline = Baseline({}, window)
    held: list[RunTimings] = []
    fold_runs(baseline, runs, window, time=time, held=held, dropped=[])
    written = parse_baseline(name, parse_json(name, dumps(baseline_json(baseline))))
    return Folded(written, len(runs) - len(held), notes)


def accept_changes(
    path: str, wanted: Collection[str], rule: Rule, only_key: str | None = None
) -> list[Change]:
    """Accept the changes the baseline's own runs show (the newest run taken as this
    one), for the ids in ``wanted`` (``all``: every change) and the classes and modules
    that hold them (their change is the same cause): their samples before the change
    go, so the new level is the baseline.  Under the file lock, like an update."""
    accepted: list[Change] = []

    def accept_wanted(baseline: Baseline) -> None:
        keys = [only_key] if only_key else sorted(baseline.envs)
        for key in keys:
            env = baseline.envs.get(key)
            if env is None:
                has = ", ".join(sorted(baseline.envs))
                raise InputError(path, f"has no runs for {key!r} (it has: {has})")
            for name, _, change in changes_in_runs(env, rule):
                if "all" not in wanted and not _holds_wanted(change.id, wanted):
                    continue
                note: dict[str, Any] = {
                    **change.to_json(),
                    "key": key,
                    "accepted": utc_timestamp(datetime.now(timezone.utc).timestamp()),
                }
                accept(env, name, change.id, change.runs, note)
                accepted.append(change)

    def refuse() -> Baseline:
        raise InputError(path, "no such file")

    update_locked(path, _load_own, refuse, accept_wanted, baseline_json)
    return accepted


def _holds_wanted(ident: str, wanted: Collection[str]) -> bool:
    """``ident`` is wanted, or is the class or module of a wanted test."""
    return ident in wanted or any(w.startswith(ident + "::") for w in wanted)


def _load_own(target: str) -> Baseline:
    baseline = load_baseline(target)
    if baseline.source != "baseline":
        raise InputError(target, f"is a {baseline.source} file, not a baseline")
    return baseline


Groups = dict[str, tuple[str | None, str | None]]  # test -> (class, module)


@dataclass(frozen=True)
class Durations:
    """What a durations file says each test will take, for planning shards."""

    expected: dict[str, float]
    groups: Groups | None  # each test's class and module, where the file knows them
    # ``wall`` (as measured: setup, call, teardown and JAX compilation) or
    # ``execution`` (a baseline folded before 0.4: compilation left out).
    basis: str


def durations_file(path: str, key: str | None) -> Durations:
    """Expected test durations from a baseline, a record or a pytest-split map, and the
    tests' classes and modules where the file knows them (a record does)."""
    data = read_json(path)
    if isinstance(data, dict) and data.get("schema") == RECORD_SCHEMA:
        run = timings(check_record(path, data))
        known = {
            i: t for i, o, t in zip(run.ids, run.outcome, run.total, strict=True) if o == "passed"
        }
        groups = {
            i: (c, m) for i, c, m in zip(run.ids, run.cls, run.module, strict=True) if i in known
        }
        return Durations(known, groups, "wall")
    baseline = parse_baseline(path, data)
    env = baseline.for_key(key) if key else next(iter(baseline.envs.values()), None)
    if env is None:
        raise InputError(
            path, f"no timings for {key!r} (it has: {', '.join(sorted(baseline.envs))})"
        )
    return Durations(expected_durations(env), None, durations_basis(env))


def upgrade_file(path: str) -> tuple[str, int, int]:
    """Rewrite an older baseline or record in the current version, atomically: what it
    was, its version before and now."""
    from pytest_accel.files import write_json_atomic
    from pytest_accel.perf.formats.record import RECORD_VERSION, record_json

    data = read_json(path)
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(data, dict) and data.get("schema") == RECORD_SCHEMA:
        write_json_atomic(path, record_json(check_record(path, data)))
        return "record", int(version or 0), RECORD_VERSION
    baseline = parse_baseline(path, data)
    if baseline.source != "baseline":
        raise InputError(path, f"is a {baseline.source} file, not a baseline or a record")
    write_json_atomic(path, baseline_json(baseline))
    return "baseline", int(version or 0), BASELINE_VERSION
