"""Which collected tests a change needs, from the map and the work tree: the change set
(git, the blocks' checksums), the valves, and the decision.  No pytest: the plugin
adds the tests other features keep and the budget; ``bench/selection_scale.py`` times
this on a 10,000-test map."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from pytest_accel.files import resolved
from pytest_accel.selection.changes import (
    DEFAULT_IGNORED,
    Valve,
    age_valve,
    changed_blocks,
    dependency_valve,
    file_hash,
    file_valves,
    git_changed_files,
    installed_distributions,
    new_python_files,
    own_files,
)
from pytest_accel.selection.decide import Decision, changed_programs, decide, some_names
from pytest_accel.selection.mapfile import (
    EVIDENCE,
    NOT_PASSED,
    MapInfo,
    MappedTest,
    Snapshot,
    blocks_of_tests,
    blocks_of_unit,
    data_of_tests,
    env_of_tests,
    mapped_entries,
    mapped_files,
    mapped_tests,
    open_map,
    paths_read,
    programs_of_tests,
    read_info,
    tests_of_files,
)
from pytest_accel.selection.observe import SESSION, value_digest
from pytest_accel.selection.options import SelectionOptions


@dataclass(frozen=True)
class Selected:
    """The decision, and what it was made from (the budget ranks by it)."""

    decision: Decision
    info: MapInfo | None
    mapped: set[str] = field(default_factory=set)
    affected: Mapping[str, list[str]] = field(default_factory=dict)


def select_tests(
    root: Path, options: SelectionOptions, collected: list[str], always: Mapping[str, str]
) -> Selected:
    """The decision for ``collected`` (node ids under ``root``).  InputError or
    sqlite3.DatabaseError for a map that cannot be read."""
    assert options.map is not None
    path = options.map
    if not resolved(path).exists():  # a cold cache: run everything, and say so
        valve = Valve("map", f"no map at {path} yet: every test runs")
        decision = decide(
            options.mode,
            collected,
            mapped=set(),
            affected={},
            always={},
            valves=[valve],
            map_commit=None,
        )
        return Selected(decision, None)
    stale: dict[str, str] = {}
    with closing(open_map(path)) as connection:
        info = read_info(connection, path)
        entries = mapped_entries(connection, path)
        relied = [t for t in collected if t in entries]
        files = mapped_files(connection).files  # read once: the valves' trees, the blocks
        valves, notes, changed_files = _valves(
            root, options, connection, info, entries=entries, relied=relied, files=files
        )
        if options.mode == "programs":
            mapped, affected = _programs(options, connection)
        else:
            mapped = set(entries)
            stale = {
                t: "mapped by an older pytest-accel (map version 1), which recorded less of"
                " what a test depends on: map again"
                for t in relied
                if NOT_PASSED < entries[t].evidence < EVIDENCE
            }
            broken = [t for t in relied if entries[t].evidence == NOT_PASSED]
            stale |= dict.fromkeys(
                broken, "it did not pass in its mapping run: kept until one sees it pass"
            )
            if broken and not valves:  # under a valve every test runs anyway
                notes.append(
                    f"{len(broken)} test(s) kept that did not pass in the mapping run:"
                    f" {some_names(broken)}"
                )
            complete = [t for t in relied if t not in stale]
            affected, blind = _affected(
                root, connection, entries, complete, changed_files=changed_files, files=files
            )
            if not valves:
                notes += blind.notes()
    decision = decide(
        "changed" if options.mode == "shadow" else options.mode,
        collected,
        mapped=mapped,
        affected=affected,
        always={**stale, **always},
        valves=valves,
        map_commit=info.commit,
    )
    decision = replace(
        decision,
        mode="shadow" if options.mode == "shadow" else decision.mode,
        notes=tuple(notes),
    )
    return Selected(decision, info, mapped, affected)


def _affected(
    root: Path,
    connection: sqlite3.Connection,
    entries: Mapping[str, MappedTest],
    tests: list[str],
    *,
    changed_files: list[str] | None,
    files: Mapping[str, tuple[str, list[tuple[int, str, str]]]],
) -> tuple[dict[str, list[str]], BlindSpots]:
    """Each of ``tests`` that depends on something that changed, with what: code it ran
    or shares (its collection, fixtures, imports), a file it read, a variable it read,
    a module new beside code it used; a test that starts a process, when any of the
    project's Python changed.  And the tests kept for what the map cannot see into."""
    affected: dict[str, list[str]] = {}
    blind = BlindSpots()

    def add(test: str, why: str) -> None:
        affected.setdefault(test, []).append(why)

    changed, changed_paths = changed_blocks(root, files)
    if changed:
        for test, blocks in blocks_of_tests(connection, tests, changed).items():
            for block in blocks:
                add(test, block)
        blind.session = blocks_of_unit(connection, SESSION, changed)
    for data_path, versions in data_of_tests(connection, tests).items():
        now = file_hash(root / data_path) or "absent"
        for digest, readers in versions.items():
            if digest != now:
                for test in readers:
                    add(test, f"file {data_path} it read")
    for test, variables in env_of_tests(connection, tests).items():
        for name, digest in variables.items():
            if value_digest(os.environ.get(name)) != digest:
                add(test, f"environment variable {name} differs from the map's")
                blind.variables.setdefault(name, []).append(test)
    python_changed = bool(changed_paths) or any(
        name.endswith(".py") for name in changed_files or ()
    )
    if python_changed:
        for test in tests:
            if entries[test].subprocess:
                add(test, "it starts a process, whose code is not measured: Python changed")
                blind.processes.append(test)
    new = new_python_files(changed_files or (), files, root)
    if new:
        users = tests_of_files(connection, {n for near in new.values() for n in near})
        wanted = set(tests)
        for name, near in new.items():
            for test in {t for n in near for t in users.get(n, ()) if t in wanted}:
                add(test, f"{name} (not in the map) beside code it used")
    return affected, blind


@dataclass
class BlindSpots:
    """Tests kept for what a map records but cannot see into: a process they start, a
    variable whose value differs (named, never shown); and the session's own code,
    which keeps every test.  Said at every verbosity."""

    processes: list[str] = field(default_factory=list)
    variables: dict[str, list[str]] = field(default_factory=dict)
    session: list[str] = field(default_factory=list)  # its changed blocks, file::block

    def notes(self) -> list[str]:
        found = []
        if self.session:
            found.append(
                "every test depends on what the session ran outside them (a plugin's"
                f" hooks, what they call), which changed: {some_names(self.session)}"
            )
        if self.processes:
            found.append(
                f"{len(self.processes)} test(s) kept that start a process, whose code is not"
                f" measured (the project's Python changed): {some_names(self.processes)}"
            )
        for name, tests in sorted(self.variables.items()):
            found.append(
                f"{len(tests)} test(s) kept: environment variable {name} differs from the"
                f" map's: {some_names(tests)}"
            )
        return found


def _valves(
    root: Path,
    options: SelectionOptions,
    connection: sqlite3.Connection,
    info: MapInfo,
    *,
    entries: Mapping[str, MappedTest],
    relied: list[str],
    files: Mapping[str, tuple[str, list[tuple[int, str, str]]]],
) -> tuple[list[Valve], list[str], list[str] | None]:
    """The valves that fire, what selection could not use but did without (a
    ``--accel-changed-since`` reference git does not know here), and the changed files
    (None where git cannot list them).  The map's tests each keep the commit and the
    installed versions they were mapped under: what changed is counted since each
    snapshot the collected tests rely on (a partial mapping run moves only its own)."""
    valves: list[Valve] = []
    notes: list[str] = []
    snapshots = {entries[t].snapshot for t in relied} or {
        Snapshot.of(info.commit or "", info.dependencies)
    }
    commits = sorted({s.commit for s in snapshots if s.commit})
    refs = [*commits, *([options.since] if options.since else [])]
    changed = git_changed_files(root, refs)
    listed: list[str] | None = None
    if changed.files is None:
        why = changed.why
        if _in_git(Path.cwd().resolve()) and not _in_git(root):
            # pytest takes a separate argument naming an existing path (--accel-map
            # /elsewhere/map.db) as one to find the rootdir from.
            why = (
                f"{why}; the rootdir is {root}: a path outside the project given as its"
                " own argument moves it (write --accel-map=PATH, or --rootdir)"
            )
        valves.append(Valve("git", f"the changed files cannot be listed ({why})"))
    elif any(not s.commit for s in snapshots) or any(c in changed.unknown for c in commits):
        # The reference adds to the map's commits: alone it misses a configuration or
        # data file changed between the map and it.
        unknown = [c for c in commits if c in changed.unknown]
        why = (
            f"git does not know the map's commit {unknown[0][:12]} here: a shallow clone?"
            " fetch with fetch-depth: 0"
            if unknown
            else "the map records no commit"
        )
        valves.append(Valve("git", f"the changed files cannot be listed ({why})"))
    else:
        listed = changed.files
        read = paths_read(connection)
        valves += file_valves(
            changed.files,
            files,
            own_files(_relative(root, options)),
            read=read,
            ignore=(*DEFAULT_IGNORED, *options.ignore),
        )
        if options.since in changed.unknown:
            notes.append(
                f"--accel-changed-since {options.since}: git does not know it here (a CI"
                " checkout names a base origin/NAME); what changed is counted since the map's"
                " commit alone"
            )
    installed = installed_distributions(root)
    for snapshot in sorted(snapshots, key=lambda s: s.commit):
        dependencies = dependency_valve(snapshot.versions(), installed)
        if dependencies is not None:
            valves.append(dependencies)
            break
    oldest = min((entries[t].mapped for t in relied), default=info.updated)
    age = age_valve(oldest, datetime.now(timezone.utc), options.max_age)
    if age is not None:
        valves.append(age)
    return valves, notes, listed


def _in_git(path: Path) -> bool:
    return any((folder / ".git").exists() for folder in (path, *path.parents))


def _relative(root: Path, options: SelectionOptions) -> list[str]:
    """The maps' paths relative to the rootdir (those inside it)."""
    found = []
    for path in (options.map, options.head):
        if path is not None:
            with contextlib.suppress(ValueError):
                found.append(resolved(path).relative_to(root).as_posix())
    return found


def _programs(
    options: SelectionOptions, connection: sqlite3.Connection
) -> tuple[set[str], dict[str, list[str]]]:
    """The tests the CPU tier mapped at this commit, and those whose programs changed."""
    assert options.head is not None
    with closing(open_map(options.head)) as head:
        now = programs_of_tests(head)
        mapped = mapped_tests(head)
    return mapped, changed_programs(programs_of_tests(connection), now)
