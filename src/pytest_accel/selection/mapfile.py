"""The dependency map (``--accel-map``): which of the project's code and which compiled
programs each test depends on, read, checked, updated and merged only here.

A SQLite file (the standard library's ``sqlite3``), its schema versioned by
``PRAGMA user_version`` and named in its ``meta`` table, in WAL mode.  A mapping run
updates it under the file's lock (``locking.exclusive_lock``, as every shared file of
ours) in one transaction: a reader never sees half an update, and a run that is killed
leaves the file as it was.  A file that is not a map, is damaged, or was written by a
newer release is refused in one line naming it.

Tables (docs/selection.md has them): ``meta`` (the schema, the commit, branch and time
of the latest update, the installed distributions' versions, jax and jaxlib);
``files`` (each mapped source file, relative to the rootdir, and its content hash);
``blocks`` (a file's function, class or module body with its checksum; a test refers to
the version it ran, so a test mapped at another commit keeps its own);
``tests`` and ``test_blocks``; ``programs`` (a compiled program's fingerprint and
platform) and ``test_programs``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_accel.files import InputError, make_directories, names_a_directory, resolved
from pytest_accel.locking import exclusive_lock

MAP_SCHEMA = "pytest-accel/map"
MAP_VERSION = 1

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, hash TEXT NOT NULL);
CREATE TABLE blocks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id),
    name TEXT NOT NULL,
    checksum TEXT NOT NULL,
    UNIQUE (file_id, name, checksum)
);
CREATE TABLE tests (
    id INTEGER PRIMARY KEY,
    nodeid TEXT NOT NULL UNIQUE,
    mapped TEXT NOT NULL,
    commit_id TEXT
);
CREATE TABLE test_blocks (
    test_id INTEGER NOT NULL REFERENCES tests(id),
    block_id INTEGER NOT NULL REFERENCES blocks(id),
    PRIMARY KEY (test_id, block_id)
) WITHOUT ROWID;
CREATE INDEX test_blocks_by_block ON test_blocks (block_id);
CREATE TABLE programs (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    platform TEXT NOT NULL,
    name TEXT NOT NULL,
    UNIQUE (fingerprint, platform)
);
CREATE TABLE test_programs (
    test_id INTEGER NOT NULL REFERENCES tests(id),
    program_id INTEGER NOT NULL REFERENCES programs(id),
    PRIMARY KEY (test_id, program_id)
) WITHOUT ROWID;
"""
_TABLES = ("meta", "files", "blocks", "tests", "test_blocks", "programs", "test_programs")


@dataclass(frozen=True)
class Program:
    """A compiled program, as a mapping run saw it lowered."""

    fingerprint: str  # of its lowered module text, without source locations
    platform: str  # what it was lowered for ("cpu", "tpu", ...)
    name: str  # the jitted function's name, for people


@dataclass
class MapRun:
    """What one mapping run (one process, or the merged workers) measured."""

    commit: str | None
    branch: str | None
    started: str  # UTC, as the files write it
    # Per mapped file (relative to the rootdir): its content hash and {block: checksum}.
    files: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    # Per test: the blocks it depends on, as (file, block name).
    tests: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    # Per test that compiled with JAX: the programs it used.
    programs: dict[str, set[Program]] = field(default_factory=dict)
    dependencies: dict[str, str] = field(default_factory=dict)  # distribution -> version

    def merge(self, other: MapRun) -> None:
        """Another process's measurement of other tests (an xdist worker's, a shard's):
        files measured by both are the same file (one commit), the later kept."""
        self.files.update(other.files)
        self.tests.update(other.tests)
        self.programs.update(other.programs)
        self.dependencies = self.dependencies or other.dependencies

    def to_wire(self) -> dict[str, Any]:
        """Plain values, as pytest-xdist carries them from a worker."""
        return {
            "commit": self.commit,
            "branch": self.branch,
            "started": self.started,
            "files": {p: [h, dict(b)] for p, (h, b) in self.files.items()},
            "tests": {t: sorted(map(list, blocks)) for t, blocks in self.tests.items()},
            "programs": {
                t: sorted([p.fingerprint, p.platform, p.name] for p in found)
                for t, found in self.programs.items()
            },
            "dependencies": self.dependencies,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> MapRun:
        return cls(
            data.get("commit"),
            data.get("branch"),
            str(data.get("started", "")),
            {p: (str(h), dict(b)) for p, (h, b) in data.get("files", {}).items()},
            {t: {(str(f), str(n)) for f, n in blocks} for t, blocks in data["tests"].items()},
            {
                t: {Program(str(f), str(p), str(n)) for f, p, n in found}
                for t, found in data.get("programs", {}).items()
            },
            dict(data.get("dependencies", {})),
        )


@dataclass(frozen=True)
class MapInfo:
    """A map's header: what it was made from, and when."""

    commit: str | None
    branch: str | None
    created: str
    updated: str
    dependencies: Mapping[str, str]
    tests: int


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    uri = f"{path.as_uri()}?mode={'ro' if readonly else 'rwc'}"
    connection = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


def _check(path: str, connection: sqlite3.Connection) -> None:
    """The file is a map of a version this release reads: one line naming it if not."""
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "meta" not in tables:
            raise InputError(path, f"is not a pytest-accel map (no meta table; {MAP_SCHEMA!r})")
        schema = connection.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(path, f"is not a pytest-accel map (SQLite says: {exc})") from None
    if schema is None or schema[0] != MAP_SCHEMA:
        found = None if schema is None else schema[0]
        raise InputError(path, f"is not a pytest-accel map (schema {found!r})")
    if version > MAP_VERSION:
        raise InputError(
            path,
            f"is a version {version} map; this pytest-accel reads up to version"
            f" {MAP_VERSION}: upgrade pytest-accel, or map again",
        )
    missing = [name for name in _TABLES if name not in tables]
    if missing or version < 1:
        raise InputError(path, f"is a damaged map (missing: {', '.join(missing) or 'version'})")


def open_map(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A map, checked, open for reading; InputError (one line) if it is not one."""
    name = os.fspath(path)
    target = resolved(name)
    if not target.is_file():
        raise InputError(name, "no such file" if not target.exists() else "is not a file")
    try:
        connection = _connect(target, readonly=True)
        _check(name, connection)
        connection.execute("SELECT count(*) FROM tests").fetchone()
    except sqlite3.DatabaseError as exc:
        raise InputError(name, f"is a damaged map (SQLite says: {exc})") from None
    return connection


def read_info(connection: sqlite3.Connection, path: str) -> MapInfo:
    meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    try:
        dependencies = json.loads(meta.get("dependencies", "{}"))
    except ValueError:
        raise InputError(path, "is a damaged map (meta.dependencies is not JSON)") from None
    if not isinstance(dependencies, dict):
        raise InputError(path, "is a damaged map (meta.dependencies is not an object)")
    count = connection.execute("SELECT count(*) FROM tests").fetchone()[0]
    return MapInfo(
        meta.get("commit") or None,
        meta.get("branch") or None,
        meta.get("created", ""),
        meta.get("updated", ""),
        {str(k): str(v) for k, v in dependencies.items()},
        int(count),
    )


def update_map(path: str | os.PathLike[str], run: MapRun) -> None:
    """Fold a mapping run into the map at ``path`` (created on first use), under the
    file's lock, in one transaction: each test it ran replaces that test's entry; the
    other tests' entries stay.  Blocks and programs no test refers to any more go."""
    name = os.fspath(path)
    if names_a_directory(name):
        raise InputError(name, "ends like a directory; give a file path such as map.db")
    target = resolved(name)
    make_directories(target.parent)
    with exclusive_lock(target), closing(_connect(target, readonly=False)) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if tables:
            _check(name, connection)
        connection.execute("PRAGMA journal_mode = WAL")
        if not tables:  # a new map: its schema first (an empty map is a valid one)
            connection.executescript(_SCHEMA)
            connection.execute(f"PRAGMA user_version = {MAP_VERSION}")
            _set_meta(connection, {"schema": MAP_SCHEMA, "created": run.started})
        connection.execute("BEGIN IMMEDIATE")
        try:
            _write_run(connection, run)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise


def _set_meta(connection: sqlite3.Connection, values: Mapping[str, str]) -> None:
    connection.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        list(values.items()),
    )


def _write_run(connection: sqlite3.Connection, run: MapRun) -> None:
    _set_meta(
        connection,
        {
            "commit": run.commit or "",
            "branch": run.branch or "",
            "updated": run.started,
            "dependencies": json.dumps(run.dependencies, sort_keys=True),
        },
    )
    file_ids: dict[str, int] = {}
    block_ids: dict[tuple[str, str], int] = {}
    for path, (digest, blocks) in run.files.items():
        connection.execute(
            "INSERT INTO files (path, hash) VALUES (?, ?)"
            " ON CONFLICT (path) DO UPDATE SET hash = excluded.hash",
            (path, digest),
        )
        file_id = connection.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()[0]
        file_ids[path] = file_id
        connection.executemany(
            "INSERT OR IGNORE INTO blocks (file_id, name, checksum) VALUES (?, ?, ?)",
            [(file_id, block, checksum) for block, checksum in blocks.items()],
        )
        for block, checksum, block_id in connection.execute(
            "SELECT name, checksum, id FROM blocks WHERE file_id = ?", (file_id,)
        ):
            if blocks.get(block) == checksum:
                block_ids[(path, block)] = block_id
    program_ids: dict[Program, int] = {}
    for program in {p for found in run.programs.values() for p in found}:
        connection.execute(
            "INSERT OR IGNORE INTO programs (fingerprint, platform, name) VALUES (?, ?, ?)",
            (program.fingerprint, program.platform, program.name),
        )
        program_ids[program] = connection.execute(
            "SELECT id FROM programs WHERE fingerprint = ? AND platform = ?",
            (program.fingerprint, program.platform),
        ).fetchone()[0]
    for nodeid, depends in run.tests.items():
        connection.execute(
            "INSERT INTO tests (nodeid, mapped, commit_id) VALUES (?, ?, ?)"
            " ON CONFLICT (nodeid) DO UPDATE SET mapped = excluded.mapped,"
            " commit_id = excluded.commit_id",
            (nodeid, run.started, run.commit),
        )
        test_id = connection.execute("SELECT id FROM tests WHERE nodeid = ?", (nodeid,)).fetchone()[
            0
        ]
        connection.execute("DELETE FROM test_blocks WHERE test_id = ?", (test_id,))
        connection.execute("DELETE FROM test_programs WHERE test_id = ?", (test_id,))
        connection.executemany(
            "INSERT OR IGNORE INTO test_blocks (test_id, block_id) VALUES (?, ?)",
            [(test_id, block_ids[key]) for key in depends if key in block_ids],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO test_programs (test_id, program_id) VALUES (?, ?)",
            [(test_id, program_ids[p]) for p in run.programs.get(nodeid, ())],
        )
    connection.execute(
        "DELETE FROM blocks WHERE id NOT IN (SELECT DISTINCT block_id FROM test_blocks)"
    )
    connection.execute(
        "DELETE FROM programs WHERE id NOT IN (SELECT DISTINCT program_id FROM test_programs)"
    )
    connection.execute("DELETE FROM files WHERE id NOT IN (SELECT DISTINCT file_id FROM blocks)")


# --- reading what selection needs ----------------------------------------------------------


@dataclass(frozen=True)
class MappedFiles:
    """Each mapped file's hash at the latest update, and the versions of its blocks the
    tests refer to: ``{path: (hash, [(block id, name, checksum), ...])}``."""

    files: Mapping[str, tuple[str, list[tuple[int, str, str]]]]


def mapped_files(connection: sqlite3.Connection) -> MappedFiles:
    found: dict[str, tuple[str, list[tuple[int, str, str]]]] = {}
    hashes = dict(connection.execute("SELECT path, hash FROM files"))
    for path, block_id, name, checksum in connection.execute(
        "SELECT f.path, b.id, b.name, b.checksum FROM blocks b JOIN files f ON f.id = b.file_id"
    ):
        found.setdefault(path, (hashes[path], []))[1].append((block_id, name, checksum))
    return MappedFiles(found)


def mapped_tests(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT nodeid FROM tests")}


def _wanted(connection: sqlite3.Connection, table: str, values: Iterable[Any]) -> None:
    """A temporary table of ``values`` to join with (no SQL variable limit, no JSON1)."""
    connection.execute(f"DROP TABLE IF EXISTS temp.{table}")
    connection.execute(f"CREATE TEMP TABLE {table} (value PRIMARY KEY) WITHOUT ROWID")
    connection.executemany(
        f"INSERT OR IGNORE INTO temp.{table} (value) VALUES (?)", [(v,) for v in values]
    )


def tests_using_blocks(connection: sqlite3.Connection, block_ids: Iterable[int]) -> set[str]:
    """The tests that depend on any of ``block_ids``."""
    _wanted(connection, "wanted_blocks", block_ids)
    return {
        row[0]
        for row in connection.execute(
            "SELECT DISTINCT t.nodeid FROM temp.wanted_blocks w"
            " JOIN test_blocks tb ON tb.block_id = w.value JOIN tests t ON t.id = tb.test_id"
        )
    }


def blocks_of_tests(
    connection: sqlite3.Connection, nodeids: Iterable[str], block_ids: Iterable[int]
) -> dict[str, list[str]]:
    """For the tests ``nodeids``, which of ``block_ids`` each depends on, as
    ``file::block``: the reason a test is kept."""
    found: dict[str, list[str]] = {}
    _wanted(connection, "wanted_blocks", block_ids)
    _wanted(connection, "wanted_tests", nodeids)
    for nodeid, path, name in connection.execute(
        "SELECT t.nodeid, f.path, b.name FROM temp.wanted_blocks w"
        " JOIN test_blocks tb ON tb.block_id = w.value JOIN tests t ON t.id = tb.test_id"
        " JOIN temp.wanted_tests wt ON wt.value = t.nodeid"
        " JOIN blocks b ON b.id = tb.block_id JOIN files f ON f.id = b.file_id"
    ):
        found.setdefault(nodeid, []).append(f"{path}::{name}")
    return found


def programs_of_tests(connection: sqlite3.Connection) -> dict[str, frozenset[tuple[str, str]]]:
    """Each mapped test's programs as (fingerprint, platform)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for nodeid, fingerprint, platform in connection.execute(
        "SELECT t.nodeid, p.fingerprint, p.platform FROM test_programs tp"
        " JOIN tests t ON t.id = tp.test_id JOIN programs p ON p.id = tp.program_id"
    ):
        found.setdefault(nodeid, set()).add((fingerprint, platform))
    return {nodeid: frozenset(programs) for nodeid, programs in found.items()}


SQLITE_HEADER = b"SQLite format 3\x00"


def is_map(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an SQLite file (a map, or a damaged one ``open_map`` names).
    Only a regular file is opened: a FIFO would wait for a writer."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def merge_maps(inputs: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str]) -> int:
    """The maps of shards (or of separate runs) folded into one at ``output``, in the
    order given (a test in two keeps the later's entry); how many tests it holds."""
    for source in inputs:
        with closing(open_map(source)) as connection:
            update_map(output, read_run(connection, os.fspath(source)))
    with closing(open_map(output)) as connection:
        return int(connection.execute("SELECT count(*) FROM tests").fetchone()[0])


def read_run(connection: sqlite3.Connection, path: str) -> MapRun:
    """A whole map as one run (for merging)."""
    info = read_info(connection, path)
    run = MapRun(info.commit, info.branch, info.updated, dependencies=dict(info.dependencies))
    hashes = dict(connection.execute("SELECT path, hash FROM files"))
    for file_path, name, checksum in connection.execute(
        "SELECT f.path, b.name, b.checksum FROM blocks b JOIN files f ON f.id = b.file_id"
    ):
        run.files.setdefault(file_path, (hashes[file_path], {}))[1][name] = checksum
    for nodeid, file_path, name in connection.execute(
        "SELECT t.nodeid, f.path, b.name FROM test_blocks tb JOIN tests t ON t.id = tb.test_id"
        " JOIN blocks b ON b.id = tb.block_id JOIN files f ON f.id = b.file_id"
    ):
        run.tests.setdefault(nodeid, set()).add((file_path, name))
    for nodeid in mapped_tests(connection):
        run.tests.setdefault(nodeid, set())
    for nodeid, fingerprint, platform, name in connection.execute(
        "SELECT t.nodeid, p.fingerprint, p.platform, p.name FROM test_programs tp"
        " JOIN tests t ON t.id = tp.test_id JOIN programs p ON p.id = tp.program_id"
    ):
        run.programs.setdefault(nodeid, set()).add(Program(fingerprint, platform, name))
    return run
