"""Which collected tests a change needs, from the map and the work tree: the change set
(git, the blocks' checksums), the valves, and the decision.  No pytest: the plugin
adds the tests other features keep and the budget; ``bench/selection_scale.py`` times
this on a 10,000-test map."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from pytest_accel.files import resolved
from pytest_accel.selection.changes import (
    Valve,
    age_valve,
    changed_blocks,
    dependency_valve,
    file_valves,
    git_changed_files,
    installed_distributions,
    own_files,
)
from pytest_accel.selection.decide import Decision, changed_programs, decide
from pytest_accel.selection.mapfile import (
    MapInfo,
    blocks_of_tests,
    mapped_files,
    mapped_tests,
    open_map,
    programs_of_tests,
    read_info,
)
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
    with closing(open_map(path)) as connection:
        info = read_info(connection, path)
        valves, notes = _valves(root, options, connection, info)
        if options.mode == "programs":
            mapped, affected = _programs(options, connection)
        else:
            mapped = mapped_tests(connection)
            changed, _ = changed_blocks(root, mapped_files(connection).files)
            wanted = [t for t in collected if t in mapped]
            affected = blocks_of_tests(connection, wanted, changed) if changed else {}
    decision = decide(
        "changed" if options.mode == "shadow" else options.mode,
        collected,
        mapped=mapped,
        affected=affected,
        always=always,
        valves=valves,
        map_commit=info.commit,
    )
    decision = replace(
        decision,
        mode="shadow" if options.mode == "shadow" else decision.mode,
        notes=tuple(notes),
    )
    return Selected(decision, info, mapped, affected)


def _valves(
    root: Path, options: SelectionOptions, connection: sqlite3.Connection, info: MapInfo
) -> tuple[list[Valve], list[str]]:
    """The valves that fire, and what selection could not use but did without (a
    ``--accel-changed-since`` reference git does not know here)."""
    valves: list[Valve] = []
    notes: list[str] = []
    refs = [ref for ref in (info.commit, options.since) if ref]
    changed = git_changed_files(root, refs)
    if changed.files is None:
        valves.append(Valve("git", f"the changed files cannot be listed ({changed.why})"))
    elif not info.commit or info.commit in changed.unknown:
        # The reference adds to the map's commit: alone it misses a configuration or
        # data file changed between the map and it.
        why = (
            f"git does not know the map's commit {info.commit[:12]} here: a shallow clone?"
            " fetch with fetch-depth: 0"
            if info.commit
            else "the map records no commit"
        )
        valves.append(Valve("git", f"the changed files cannot be listed ({why})"))
    else:
        dirs = {str(Path(p).parent.as_posix()) for p in mapped_files(connection).files}
        valves += file_valves(changed.files, dirs, own_files(_relative(root, options)))
        if options.since in changed.unknown:
            notes.append(
                f"--accel-changed-since {options.since}: git does not know it here (a CI"
                " checkout names a base origin/NAME); what changed is counted since the map's"
                " commit alone"
            )
    dependencies = dependency_valve(info.dependencies, installed_distributions(root))
    if dependencies is not None:
        valves.append(dependencies)
    age = age_valve(info.updated, datetime.now(timezone.utc), options.max_age)
    if age is not None:
        valves.append(age)
    return valves, notes


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
