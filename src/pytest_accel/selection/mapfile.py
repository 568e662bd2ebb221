"""The dependency map (``--accel-map``): which of the project's code and which compiled
programs each test depends on, read, checked, updated and merged only here.

A SQLite file (the standard library's ``sqlite3``), its schema versioned by
``PRAGMA user_version`` and named in its ``meta`` table.  A mapping run
updates it under the file's lock (``locking.exclusive_lock``, as every shared file of
ours) in one transaction: a reader never sees half an update, and a run that is killed
leaves the file as it was.  A file that is not a map, is damaged, or was written by a
newer release is refused in one line naming it.

Tables (docs/selection.md has them): ``meta`` (the schema, the commit, branch and time
of the latest update, the installed distributions' versions, jax and jaxlib);
``files`` (each mapped source file, relative to the rootdir, and its content hash);
``blocks`` (a file's function, class or module body with its checksum; a test refers to
the version it ran, so a test mapped at another commit keeps its own);
``snapshots`` (a commit and the installed versions a test was mapped under: a partial
mapping run never erases another test's); ``tests`` and ``test_blocks``; ``units`` (a
test file's collection with the imports it runs, or a fixture's setup: what many tests
share) with ``unit_blocks`` and ``test_units``; ``data_files`` (a file a test read, by
content hash) and ``test_data``; ``test_env`` (a variable a test's code read: its name
and a digest of its value); ``programs`` (a compiled program's fingerprint and
platform) and ``test_programs``.

Version 1 maps (pytest-accel 0.4) are upgraded in place by the next mapping run; their
tests' entries, which lack what version 2 records, are kept by selection until mapped
again.
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
MAP_VERSION = 2
# Tests mapped with every kind of evidence this release records (a version 1 entry: 1).
EVIDENCE = 2
# A test whose dependencies were recorded but that did not pass in its mapping run: its
# code is broken there, so selection keeps it until a mapping run sees it pass.
NOT_PASSED = 0

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
# What version 2 adds to version 1 (a new map runs both; an old one is upgraded by it).
_SCHEMA_2 = """
ALTER TABLE tests ADD COLUMN snapshot_id INTEGER REFERENCES snapshots(id);
ALTER TABLE tests ADD COLUMN subprocess INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tests ADD COLUMN evidence INTEGER NOT NULL DEFAULT 1;
CREATE TABLE snapshots (
    id INTEGER PRIMARY KEY,
    commit_id TEXT NOT NULL,
    dependencies TEXT NOT NULL,
    UNIQUE (commit_id, dependencies)
);
CREATE TABLE units (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE unit_blocks (
    unit_id INTEGER NOT NULL REFERENCES units(id),
    block_id INTEGER NOT NULL REFERENCES blocks(id),
    PRIMARY KEY (unit_id, block_id)
) WITHOUT ROWID;
CREATE INDEX unit_blocks_by_block ON unit_blocks (block_id);
CREATE TABLE test_units (
    test_id INTEGER NOT NULL REFERENCES tests(id),
    unit_id INTEGER NOT NULL REFERENCES units(id),
    PRIMARY KEY (test_id, unit_id)
) WITHOUT ROWID;
CREATE INDEX test_units_by_unit ON test_units (unit_id);
CREATE TABLE data_files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    hash TEXT NOT NULL,
    UNIQUE (path, hash)
);
CREATE TABLE test_data (
    test_id INTEGER NOT NULL REFERENCES tests(id),
    data_id INTEGER NOT NULL REFERENCES data_files(id),
    PRIMARY KEY (test_id, data_id)
) WITHOUT ROWID;
CREATE TABLE test_env (
    test_id INTEGER NOT NULL REFERENCES tests(id),
    name TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (test_id, name)
) WITHOUT ROWID;
"""
_NEW_MAP = f"INSERT INTO meta (key, value) VALUES ('schema', '{MAP_SCHEMA}');"
_TABLES_1 = ("meta", "files", "blocks", "tests", "test_blocks", "programs", "test_programs")
_TABLES_2 = (
    "snapshots",
    "units",
    "unit_blocks",
    "test_units",
    "data_files",
    "test_data",
    "test_env",
)
_TABLES = (*_TABLES_1, *_TABLES_2)


@dataclass(frozen=True)
class Program:
    """A compiled program, as a mapping run saw it lowered."""

    fingerprint: str  # of its lowered module text, without source locations
    platform: str  # what it was lowered for ("cpu", "tpu", ...)
    name: str  # the jitted function's name, for people


@dataclass(frozen=True)
class Snapshot:
    """What a test was mapped under: a commit ("" outside git) and the installed
    distributions' versions."""

    commit: str
    dependencies: str  # JSON: {distribution: version}, keys sorted

    @classmethod
    def of(cls, commit: str, versions: Mapping[str, str]) -> Snapshot:
        return cls(commit, json.dumps(dict(versions), sort_keys=True))

    def versions(self) -> dict[str, str]:
        found = json.loads(self.dependencies)
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


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
    # What tests share: a test file's collection ("collect:tests/test_a.py", with the
    # imports it runs) or a fixture's setup ("fixture:tests/::db"), and its blocks.
    units: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    test_units: dict[str, set[str]] = field(default_factory=dict)
    reads: dict[str, dict[str, str]] = field(default_factory=dict)  # test -> {file: hash}
    env: dict[str, dict[str, str]] = field(default_factory=dict)  # test -> {name: digest}
    subprocess: set[str] = field(default_factory=set)  # tests that started a process
    # A test's own snapshot and evidence where it is not the run's (a map read back
    # for ``merge``: tests mapped at other commits, or by version 1).
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    evidence: dict[str, int] = field(default_factory=dict)

    def merge(self, other: MapRun) -> None:
        """Another process's measurement of other tests (an xdist worker's, a shard's):
        files measured by both are the same file (one commit), the later kept."""
        self.files.update(other.files)
        self.tests.update(other.tests)
        self.programs.update(other.programs)
        self.dependencies = self.dependencies or other.dependencies
        for unit, blocks in other.units.items():
            self.units.setdefault(unit, set()).update(blocks)
        self.test_units.update(other.test_units)
        self.reads.update(other.reads)
        self.env.update(other.env)
        self.subprocess |= other.subprocess
        self.snapshots.update(other.snapshots)
        self.evidence.update(other.evidence)

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
            "units": {u: sorted(map(list, blocks)) for u, blocks in self.units.items()},
            "test_units": {t: sorted(units) for t, units in self.test_units.items()},
            "reads": self.reads,
            "env": self.env,
            "subprocess": sorted(self.subprocess),
            "evidence": self.evidence,
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
            {u: {(str(f), str(n)) for f, n in b} for u, b in data.get("units", {}).items()},
            {t: set(map(str, u)) for t, u in data.get("test_units", {}).items()},
            {t: dict(r) for t, r in data.get("reads", {}).items()},
            {t: dict(e) for t, e in data.get("env", {}).items()},
            set(data.get("subprocess", ())),
            evidence={str(t): int(e) for t, e in data.get("evidence", {}).items()},
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
    except UnicodeDecodeError:  # a damaged page: a name that is not text
        raise InputError(path, "is a damaged map (a name in it is not UTF-8 text)") from None
    if schema is None or schema[0] != MAP_SCHEMA:
        found = None if schema is None else schema[0]
        raise InputError(path, f"is not a pytest-accel map (schema {found!r})")
    if version > MAP_VERSION:
        raise InputError(
            path,
            f"is a version {version} map; this pytest-accel reads up to version"
            f" {MAP_VERSION}: upgrade pytest-accel, or map again",
        )
    missing = [name for name in (_TABLES if version >= 2 else _TABLES_1) if name not in tables]
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
    try:
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError as exc:  # a value that is not UTF-8 text, among others
        raise InputError(path, f"is a damaged map (SQLite says: {exc})") from None
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
        # A rollback journal, not WAL: a selecting run, which opens the map read-only,
        # leaves no -wal or -shm file beside it (the lock already orders writers).
        connection.execute("PRAGMA journal_mode = DELETE")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if not tables or version < MAP_VERSION:
            # One script, one transaction: a new map's schema, or version 1's upgrade.
            script = _SCHEMA_2 if tables else _SCHEMA + _SCHEMA_2 + _NEW_MAP
            connection.executescript(
                f"BEGIN IMMEDIATE;{script}PRAGMA user_version = {MAP_VERSION};COMMIT;"
            )
        connection.execute("BEGIN IMMEDIATE")
        try:
            if not tables:  # an empty map is a valid one
                _set_meta(connection, {"schema": MAP_SCHEMA, "created": run.started})
            elif version < 2:
                _upgrade_1(connection)
            _write_run(connection, run)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise


def _upgrade_1(connection: sqlite3.Connection) -> None:
    """A version 1 map made version 2: its tests keep their entries, marked as mapped
    with less evidence (selection keeps them until they are mapped again), under the
    one snapshot version 1 kept for the whole map."""
    meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    snapshot = _snapshot(connection, meta.get("commit") or "", meta.get("dependencies") or "{}")
    connection.execute("UPDATE tests SET snapshot_id = ?", (snapshot,))


def _snapshot(connection: sqlite3.Connection, commit: str, dependencies: str) -> int:
    connection.execute(
        "INSERT OR IGNORE INTO snapshots (commit_id, dependencies) VALUES (?, ?)",
        (commit, dependencies),
    )
    found = connection.execute(
        "SELECT id FROM snapshots WHERE commit_id = ? AND dependencies = ?",
        (commit, dependencies),
    ).fetchone()
    return int(found[0])


def _set_meta(connection: sqlite3.Connection, values: Mapping[str, str]) -> None:
    connection.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        list(values.items()),
    )


def _write_run(connection: sqlite3.Connection, run: MapRun) -> None:
    dependencies = json.dumps(run.dependencies, sort_keys=True)
    _set_meta(
        connection,
        {
            "commit": run.commit or "",
            "branch": run.branch or "",
            "updated": run.started,
            "dependencies": dependencies,
        },
    )
    snapshot = _snapshot(connection, run.commit or "", dependencies)
    snapshot_ids = {
        own: _snapshot(connection, own.commit, own.dependencies)
        for own in set(run.snapshots.values())
    }
    block_ids: dict[tuple[str, str], int] = {}
    for path, (digest, blocks) in run.files.items():
        connection.execute(
            "INSERT INTO files (path, hash) VALUES (?, ?)"
            " ON CONFLICT (path) DO UPDATE SET hash = excluded.hash",
            (path, digest),
        )
        file_id = connection.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()[0]
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
    unit_ids = _write_units(connection, run.units, block_ids)
    data_ids: dict[tuple[str, str], int] = {}
    for path, digest in {(p, h) for reads in run.reads.values() for p, h in reads.items()}:
        connection.execute(
            "INSERT OR IGNORE INTO data_files (path, hash) VALUES (?, ?)", (path, digest)
        )
        data_ids[(path, digest)] = connection.execute(
            "SELECT id FROM data_files WHERE path = ? AND hash = ?", (path, digest)
        ).fetchone()[0]
    for nodeid, depends in run.tests.items():
        connection.execute(
            "INSERT INTO tests (nodeid, mapped, commit_id, snapshot_id, subprocess, evidence)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (nodeid) DO UPDATE SET"
            " mapped = excluded.mapped, commit_id = excluded.commit_id,"
            " snapshot_id = excluded.snapshot_id, subprocess = excluded.subprocess,"
            " evidence = excluded.evidence",
            (
                nodeid,
                run.started,
                run.snapshots[nodeid].commit if nodeid in run.snapshots else run.commit,
                snapshot_ids[run.snapshots[nodeid]] if nodeid in run.snapshots else snapshot,
                nodeid in run.subprocess,
                run.evidence.get(nodeid, EVIDENCE),
            ),
        )
        test_id = connection.execute("SELECT id FROM tests WHERE nodeid = ?", (nodeid,)).fetchone()[
            0
        ]
        for table in ("test_blocks", "test_programs", "test_units", "test_data", "test_env"):
            connection.execute(f"DELETE FROM {table} WHERE test_id = ?", (test_id,))
        connection.executemany(
            "INSERT OR IGNORE INTO test_blocks (test_id, block_id) VALUES (?, ?)",
            [(test_id, block_ids[key]) for key in depends if key in block_ids],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO test_programs (test_id, program_id) VALUES (?, ?)",
            [(test_id, program_ids[p]) for p in run.programs.get(nodeid, ())],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO test_units (test_id, unit_id) VALUES (?, ?)",
            [(test_id, unit_ids[u]) for u in run.test_units.get(nodeid, ()) if u in unit_ids],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO test_data (test_id, data_id) VALUES (?, ?)",
            [(test_id, data_ids[item]) for item in run.reads.get(nodeid, {}).items()],
        )
        connection.executemany(
            "INSERT OR IGNORE INTO test_env (test_id, name, digest) VALUES (?, ?, ?)",
            [(test_id, name, digest) for name, digest in run.env.get(nodeid, {}).items()],
        )
    for statement in (
        # A unit no test uses any more (a fixture a test stopped asking for): its blocks
        # go before it, as the foreign key wants.
        "DELETE FROM unit_blocks WHERE unit_id NOT IN (SELECT DISTINCT unit_id FROM test_units)",
        "DELETE FROM units WHERE id NOT IN (SELECT DISTINCT unit_id FROM test_units)",
        "DELETE FROM blocks WHERE id NOT IN (SELECT DISTINCT block_id FROM test_blocks)"
        " AND id NOT IN (SELECT DISTINCT block_id FROM unit_blocks)",
        "DELETE FROM programs WHERE id NOT IN (SELECT DISTINCT program_id FROM test_programs)",
        "DELETE FROM files WHERE id NOT IN (SELECT DISTINCT file_id FROM blocks)",
        "DELETE FROM data_files WHERE id NOT IN (SELECT DISTINCT data_id FROM test_data)",
        "DELETE FROM snapshots WHERE id NOT IN (SELECT snapshot_id FROM tests"
        " WHERE snapshot_id IS NOT NULL)",
    ):
        connection.execute(statement)


def _write_units(
    connection: sqlite3.Connection,
    units: Mapping[str, set[tuple[str, str]]],
    block_ids: Mapping[tuple[str, str], int],
) -> dict[str, int]:
    """Each unit the run measured, its blocks replaced by the run's; a unit it did not
    measure (a fixture no test of this run set up) keeps what it had."""
    found: dict[str, int] = {}
    for name, blocks in units.items():
        connection.execute("INSERT OR IGNORE INTO units (name) VALUES (?)", (name,))
        unit_id = connection.execute("SELECT id FROM units WHERE name = ?", (name,)).fetchone()[0]
        found[name] = unit_id
        connection.execute("DELETE FROM unit_blocks WHERE unit_id = ?", (unit_id,))
        connection.executemany(
            "INSERT OR IGNORE INTO unit_blocks (unit_id, block_id) VALUES (?, ?)",
            [(unit_id, block_ids[key]) for key in blocks if key in block_ids],
        )
    for name, unit_id in connection.execute("SELECT name, id FROM units"):
        found.setdefault(name, unit_id)
    return found


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


@dataclass(frozen=True)
class MappedTest:
    """A mapped test's header."""

    mapped: str  # when, UTC
    snapshot: Snapshot
    # EVIDENCE: mapped by this release; 1: by version 1 (less recorded); NOT_PASSED: it
    # did not pass in its mapping run.
    evidence: int
    subprocess: bool  # it started a process, whose code coverage did not measure


def _version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def mapped_entries(connection: sqlite3.Connection, path: str) -> dict[str, MappedTest]:
    """Every mapped test's header (a version 1 map's from its one ``meta`` snapshot)."""
    info = read_info(connection, path)
    whole_map = Snapshot.of(info.commit or "", info.dependencies)
    if _version(connection) < 2:
        return {
            nodeid: MappedTest(mapped, whole_map, 1, False)
            for nodeid, mapped in connection.execute("SELECT nodeid, mapped FROM tests")
        }
    snapshots: dict[int, Snapshot] = {}
    for snapshot_id, commit, text in connection.execute(
        "SELECT id, commit_id, dependencies FROM snapshots"
    ):
        try:
            versions = json.loads(text)
        except ValueError:
            raise InputError(path, "is a damaged map (a snapshot is not JSON)") from None
        if not isinstance(versions, dict):
            raise InputError(path, "is a damaged map (a snapshot is not an object)")
        snapshots[snapshot_id] = Snapshot.of(str(commit), versions)
    return {
        nodeid: MappedTest(
            mapped, snapshots.get(snapshot_id, whole_map), int(evidence), bool(spawns)
        )
        for nodeid, mapped, snapshot_id, evidence, spawns in connection.execute(
            "SELECT nodeid, mapped, snapshot_id, evidence, subprocess FROM tests"
        )
    }


def data_of_tests(
    connection: sqlite3.Connection, nodeids: Iterable[str]
) -> dict[str, dict[str, set[str]]]:
    """The files the tests ``nodeids`` read: ``{path: {hash when read: {test, ...}}}``."""
    found: dict[str, dict[str, set[str]]] = {}
    if _version(connection) < 2:
        return found
    _wanted(connection, "wanted_tests", nodeids)
    for nodeid, path, digest in connection.execute(
        "SELECT t.nodeid, d.path, d.hash FROM temp.wanted_tests wt"
        " JOIN tests t ON t.nodeid = wt.value JOIN test_data td ON td.test_id = t.id"
        " JOIN data_files d ON d.id = td.data_id"
    ):
        found.setdefault(path, {}).setdefault(digest, set()).add(nodeid)
    return found


def paths_read(connection: sqlite3.Connection) -> set[str]:
    """Every file some mapped test read."""
    if _version(connection) < 2:
        return set()
    return {row[0] for row in connection.execute("SELECT DISTINCT path FROM data_files")}


def env_of_tests(
    connection: sqlite3.Connection, nodeids: Iterable[str]
) -> dict[str, dict[str, str]]:
    """The variables each of the tests ``nodeids`` read: ``{test: {name: digest}}``."""
    found: dict[str, dict[str, str]] = {}
    if _version(connection) < 2:
        return found
    _wanted(connection, "wanted_tests", nodeids)
    for nodeid, name, digest in connection.execute(
        "SELECT t.nodeid, e.name, e.digest FROM temp.wanted_tests wt"
        " JOIN tests t ON t.nodeid = wt.value JOIN test_env e ON e.test_id = t.id"
    ):
        found.setdefault(nodeid, {})[name] = digest
    return found


def tests_of_files(connection: sqlite3.Connection, paths: Iterable[str]) -> dict[str, set[str]]:
    """The tests that depend on any block of each of ``paths``: ``{path: {test}}``."""
    found: dict[str, set[str]] = {}
    _wanted(connection, "wanted_files", paths)
    unit_join = (
        " UNION SELECT f.path, t.nodeid FROM temp.wanted_files w JOIN files f ON f.path = w.value"
        " JOIN blocks b ON b.file_id = f.id JOIN unit_blocks ub ON ub.block_id = b.id"
        " JOIN test_units tu ON tu.unit_id = ub.unit_id JOIN tests t ON t.id = tu.test_id"
        if _version(connection) >= 2
        else ""
    )
    for path, nodeid in connection.execute(
        "SELECT f.path, t.nodeid FROM temp.wanted_files w JOIN files f ON f.path = w.value"
        " JOIN blocks b ON b.file_id = f.id JOIN test_blocks tb ON tb.block_id = b.id"
        " JOIN tests t ON t.id = tb.test_id" + unit_join
    ):
        found.setdefault(path, set()).add(nodeid)
    return found


def _wanted(connection: sqlite3.Connection, table: str, values: Iterable[Any]) -> None:
    """A temporary table of ``values`` to join with (no SQL variable limit, no JSON1)."""
    connection.execute("PRAGMA temp_store = MEMORY")
    connection.execute(f"DROP TABLE IF EXISTS temp.{table}")
    connection.execute(f"CREATE TEMP TABLE {table} (value PRIMARY KEY) WITHOUT ROWID")
    rows = [(v,) for v in values]
    insert = f"INSERT OR IGNORE INTO temp.{table} (value) VALUES (?)"
    if connection.in_transaction:
        connection.executemany(insert, rows)
        return
    # One transaction: in autocommit mode each row would be one (0.12 s for 10,000).
    connection.execute("BEGIN")
    try:
        connection.executemany(insert, rows)
    finally:
        connection.execute("COMMIT")


def blocks_of_tests(
    connection: sqlite3.Connection, nodeids: Iterable[str], block_ids: Iterable[int]
) -> dict[str, list[str]]:
    """For the tests ``nodeids``, which of ``block_ids`` each depends on, as
    ``file::block``: the reason a test is kept."""
    found: dict[str, list[str]] = {}
    _wanted(connection, "wanted_blocks", block_ids)
    _wanted(connection, "wanted_tests", nodeids)
    through_units = (
        " UNION SELECT t.nodeid, f.path, b.name FROM temp.wanted_blocks w"
        " JOIN unit_blocks ub ON ub.block_id = w.value"
        " JOIN test_units tu ON tu.unit_id = ub.unit_id JOIN tests t ON t.id = tu.test_id"
        " JOIN temp.wanted_tests wt ON wt.value = t.nodeid"
        " JOIN blocks b ON b.id = ub.block_id JOIN files f ON f.id = b.file_id"
        if _version(connection) >= 2
        else ""
    )
    for nodeid, path, name in connection.execute(
        "SELECT t.nodeid, f.path, b.name FROM temp.wanted_blocks w"
        " JOIN test_blocks tb ON tb.block_id = w.value JOIN tests t ON t.id = tb.test_id"
        " JOIN temp.wanted_tests wt ON wt.value = t.nodeid"
        " JOIN blocks b ON b.id = tb.block_id JOIN files f ON f.id = b.file_id" + through_units
    ):
        found.setdefault(nodeid, []).append(f"{path}::{name}")
    return found


def blocks_of_unit(
    connection: sqlite3.Connection, unit: str, block_ids: Iterable[int]
) -> list[str]:
    """Which of ``block_ids`` the unit named ``unit`` depends on, as ``file::block``."""
    if _version(connection) < 2:
        return []
    _wanted(connection, "wanted_blocks", block_ids)
    return sorted(
        f"{path}::{name}"
        for path, name in connection.execute(
            "SELECT f.path, b.name FROM temp.wanted_blocks w"
            " JOIN unit_blocks ub ON ub.block_id = w.value"
            " JOIN units u ON u.id = ub.unit_id AND u.name = ?"
            " JOIN blocks b ON b.id = ub.block_id JOIN files f ON f.id = b.file_id",
            (unit,),
        )
    )


def blocks_in_files(
    connection: sqlite3.Connection, nodeids: Iterable[str], paths: Iterable[str]
) -> dict[str, set[tuple[str, str]]]:
    """For the tests ``nodeids``, the blocks of ``paths`` each depends on (those it ran,
    and its collection's and fixtures'): ``{test: {(path, block name)}}``."""
    found: dict[str, set[tuple[str, str]]] = {}
    _wanted(connection, "wanted_files", paths)
    _wanted(connection, "wanted_tests", nodeids)
    tests_files = (
        " FROM temp.wanted_tests wt JOIN tests t ON t.nodeid = wt.value{via}"
        " JOIN blocks b ON b.id = {block} JOIN files f ON f.id = b.file_id"
        " JOIN temp.wanted_files w ON w.value = f.path"
    )
    query = "SELECT t.nodeid, f.path, b.name" + tests_files.format(
        via=" JOIN test_blocks tb ON tb.test_id = t.id", block="tb.block_id"
    )
    if _version(connection) >= 2:
        query += " UNION SELECT t.nodeid, f.path, b.name" + tests_files.format(
            via=" JOIN test_units tu ON tu.test_id = t.id"
            " JOIN unit_blocks ub ON ub.unit_id = tu.unit_id",
            block="ub.block_id",
        )
    for nodeid, path, name in connection.execute(query):
        found.setdefault(nodeid, set()).add((path, name))
    return found


def programs_of_tests(connection: sqlite3.Connection) -> dict[str, frozenset[Program]]:
    """Each mapped test's programs."""
    found: dict[str, set[Program]] = {}
    for nodeid, fingerprint, platform, name in connection.execute(
        "SELECT t.nodeid, p.fingerprint, p.platform, p.name FROM test_programs tp"
        " JOIN tests t ON t.id = tp.test_id JOIN programs p ON p.id = tp.program_id"
    ):
        found.setdefault(nodeid, set()).add(Program(fingerprint, platform, name))
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
    order given (a test in two keeps the later's entry); how many tests it holds.  Every
    input is read before ``output`` is touched: a damaged one is named, nothing written."""
    runs = []
    for source in inputs:
        name = os.fspath(source)
        with closing(open_map(name)) as connection:
            try:
                # Structure first: a damaged page can read as rows that are not there.
                problems = [row[0] for row in connection.execute("PRAGMA quick_check")]
                if problems != ["ok"]:
                    raise InputError(name, f"is a damaged map (SQLite's check: {problems[0]})")
                # Sound pages can still hold a row whose referent a damaged byte renamed.
                dangling = connection.execute("PRAGMA foreign_key_check").fetchone()
                if dangling is not None:
                    raise InputError(
                        name,
                        f"is a damaged map (a row of {dangling[0]} refers to no {dangling[2]})",
                    )
                runs.append(read_run(connection, name))
            except sqlite3.DatabaseError as exc:
                raise InputError(name, f"is a damaged map (SQLite says: {exc})") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(name, f"is a damaged map ({type(exc).__name__})") from None
    for run in runs:
        update_map(output, run)
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
    for nodeid, entry in mapped_entries(connection, path).items():
        run.tests.setdefault(nodeid, set())
        run.snapshots[nodeid] = entry.snapshot
        run.evidence[nodeid] = entry.evidence
        if entry.subprocess:
            run.subprocess.add(nodeid)
    if _version(connection) >= 2:
        for unit, file_path, name in connection.execute(
            "SELECT u.name, f.path, b.name FROM unit_blocks ub JOIN units u ON u.id = ub.unit_id"
            " JOIN blocks b ON b.id = ub.block_id JOIN files f ON f.id = b.file_id"
        ):
            run.units.setdefault(unit, set()).add((file_path, name))
        for nodeid, unit in connection.execute(
            "SELECT t.nodeid, u.name FROM test_units tu JOIN tests t ON t.id = tu.test_id"
            " JOIN units u ON u.id = tu.unit_id"
        ):
            run.test_units.setdefault(nodeid, set()).add(unit)
        for nodeid, data_path, digest in connection.execute(
            "SELECT t.nodeid, d.path, d.hash FROM test_data td JOIN tests t ON t.id = td.test_id"
            " JOIN data_files d ON d.id = td.data_id"
        ):
            run.reads.setdefault(nodeid, {})[data_path] = digest
        for nodeid, name, digest in connection.execute(
            "SELECT t.nodeid, e.name, e.digest FROM test_env e JOIN tests t ON t.id = e.test_id"
        ):
            run.env.setdefault(nodeid, {})[name] = digest
    for nodeid, fingerprint, platform, name in connection.execute(
        "SELECT t.nodeid, p.fingerprint, p.platform, p.name FROM test_programs tp"
        " JOIN tests t ON t.id = tp.test_id JOIN programs p ON p.id = tp.program_id"
    ):
        run.programs.setdefault(nodeid, set()).add(Program(fingerprint, platform, name))
    return run
