"""The changed code a slower test runs: what a timing finding names as its likely cause.

Between two commits (the last run before a slowdown and the first run after it), git
lists the Python files that differ; each is parsed at both (``blocks``) and its blocks
compared by checksum.  Of the blocks that changed, those the map says a test ran (its
call, its file's collection and imports, its fixtures' setup) are what the finding
names: ``quax/_core.py:_shape_dtype``.  Where a function and a function nested in it
both changed, the nested one is named (the outer one's checksum holds it).

It needs a map (``--accel-map``) and git; without either nothing is named, and the
finding reads as it always did.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_accel.files import InputError
from pytest_accel.selection.blocks import IMPORT, MODULE, WHOLE_FILE, parse_blocks
from pytest_accel.selection.changes import GitError, run_git
from pytest_accel.selection.mapfile import blocks_in_files, open_map

# A change named beside a finding: the most names a line takes before "and N more".
MOST_NAMED = 3


def changed_names(root: Path, since: str, until: str | None) -> dict[str, set[str]]:
    """The blocks that differ between the commits ``since`` and ``until`` (None: the
    work tree), per Python file relative to ``root``: ``{path: {block name}}``.  Empty
    where git cannot say (no git, a commit unknown here)."""
    try:
        head = run_git(root, "rev-parse", "HEAD").strip()
        if until is not None and run_git(root, "rev-parse", f"{until}^{{commit}}").strip() == head:
            until = None  # the run's own commit: its work tree, edits not committed included
        refs = [since] if until is None else [since, until]
        # -z: paths as they are; --relative: to the rootdir, where the map's paths are.
        listed = run_git(
            root, "diff", "--name-only", "-z", "--no-renames", "--relative", *refs, "--"
        )
    except GitError:
        return {}
    found: dict[str, set[str]] = {}
    for path in filter(None, listed.split("\0")):
        if not path.endswith(".py"):
            continue
        before = {b.name: b.checksum for b in parse_blocks(_source(root, since, path), path).blocks}
        after = {b.name: b.checksum for b in parse_blocks(_source(root, until, path), path).blocks}
        names = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
        names.discard(WHOLE_FILE)  # any change changes the whole file: it names nothing
        if names:
            found[path] = names
    return found


def _source(root: Path, commit: str | None, path: str) -> str:
    """``path``'s text at ``commit`` (None: in the work tree); empty where it is not."""
    if commit is None:
        try:
            return (root / path).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return ""
    try:
        return run_git(root, "show", f"{commit}:./{path}")
    except GitError:
        return ""


def innermost(names: Iterable[str]) -> list[str]:
    """``names`` without a block whose nested block is among them, functions and
    classes first, the module's own code last (``<import>``, ``<module>``)."""
    found = set(names)
    kept = [n for n in found if not any(other.startswith(n + ".") for other in found)]
    return sorted(kept, key=lambda n: (n in (IMPORT, MODULE), n))


def describe_block(path: str, name: str) -> str:
    """``pkg/mod.py:Class.method``; the module's own code as ``pkg/mod.py (module level)``."""
    if name == IMPORT:
        return f"{path} (import-time code)"
    if name == MODULE:
        return f"{path} (module level)"
    return f"{path}:{name}"


def code_of_tests(
    connection: sqlite3.Connection, tests: Sequence[str], changed: Mapping[str, set[str]]
) -> dict[str, tuple[str, ...]]:
    """For each of ``tests`` the map knows, the blocks of ``changed`` it ran, described
    (``describe_block``), the innermost first."""
    ran = blocks_in_files(connection, tests, changed)
    found: dict[str, tuple[str, ...]] = {}
    for test, blocks in ran.items():
        by_path: dict[str, set[str]] = {}
        for path, name in blocks:
            if name in changed.get(path, ()):
                by_path.setdefault(path, set()).add(name)
        named = [describe_block(p, n) for p in sorted(by_path) for n in innermost(by_path[p])]
        # Functions in every file before any file's module-level code.
        named.sort(key=lambda text: text.endswith(")"))
        if named:
            found[test] = tuple(named)
    return found


def changed_code(
    root: Path, map_path: str, since: str, until: str | None, tests: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """The changed code between ``since`` and ``until`` that each of ``tests`` ran, by
    the map at ``map_path``; empty where the map or git cannot say."""
    changed = changed_names(root, since, until)
    if not changed:
        return {}
    try:
        connection = open_map(map_path)
    except InputError:  # no map yet, or not one: the selection says so where it reads it
        return {}
    try:
        return code_of_tests(connection, tests, changed)
    except sqlite3.DatabaseError:
        return {}
    finally:
        connection.close()
