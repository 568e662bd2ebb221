"""A store's runs of one hardware key, as bytes: the newest objects, fetched at once.
What they mean (records, folded into a baseline) is the timing feature's to say: it
asks for them through ``pytest_accel_stored_runs``."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_accel.files import InputError
from pytest_accel.store.index import COMPACT_AFTER, INDEX, index_bytes, parse_index
from pytest_accel.store.layout import RunObject, compact_stamp, key_folder, newest
from pytest_accel.store.location import StoreError

if TYPE_CHECKING:
    from pytest_accel.store.location import Store


@dataclass(frozen=True)
class StoredRuns:
    """The newest runs of ``key`` in a store: each object's URL (as shown) and bytes,
    oldest first, and one line for each object that could not be fetched."""

    name: str  # the store as every output shows it
    key: str
    objects: tuple[tuple[str, bytes], ...]
    unread: tuple[str, ...] = ()


def run_object(record: Mapping[str, Any], data: bytes, host: int | None = None) -> RunObject:
    """The name a checked record takes in a store: its key, start and run id (a record
    without an id, from before 0.4: its content's hash, the same for the same bytes)."""
    run = record["run"]
    run_id = run.get("id") or hashlib.sha256(data).hexdigest()[:16]
    return RunObject(record["env"]["key"], compact_stamp(run["started"]), run_id, host)


def newest_runs(store: Store, key: str, count: int) -> StoredRuns:
    """The newest ``count`` runs of ``key``: those the key's index holds from it, the
    others fetched together (StoreError where the store cannot be listed or read)."""
    shown = store.location.shown.rstrip("/")
    runs = newest(store.runs_of(key), count)
    indexed = _indexed(store, key)
    fetched: dict[str, bytes | Exception] = dict(indexed)
    fetched.update(store.read([run.name for run in runs if run.name not in indexed]))
    objects: list[tuple[str, bytes]] = []
    unread: list[str] = []
    for run in runs:
        where, value = f"{shown}/{run.name}", fetched[run.name]
        if isinstance(value, Exception):
            unread.append(f"{where}: could not be read ({type(value).__name__}): passed over")
        else:
            objects.append((where, value))
    return StoredRuns(shown, key, tuple(objects), tuple(unread))


def _indexed(store: Store, key: str) -> dict[str, bytes]:
    """The runs the key's index holds (none where there is no index, or it cannot be
    read: the runs are fetched on their own then)."""
    name = f"{key_folder(key)}/{INDEX}"
    try:
        value = store.read([name])[name]
    except StoreError:
        return {}
    if isinstance(value, Exception):
        return {}
    try:
        return parse_index(name, value)
    except InputError:
        return {}


def compact(store: Store, key: str, count: int) -> int | None:
    """Rewrite the key's index to hold its newest ``count`` runs, where at least
    ``COMPACT_AFTER`` of them are not in it yet and the backend can write it
    conditionally: how many runs it holds now, or None (not needed, not possible, or
    another writer came first)."""
    if not store.conditional:
        return None
    name = f"{key_folder(key)}/{INDEX}"
    runs = newest(store.runs_of(key), count)
    held = store.read_versioned(name)
    try:
        indexed = parse_index(name, held[0]) if held is not None else {}
    except InputError:
        indexed = {}  # a damaged index: rewritten whole
    missing = [run.name for run in runs if run.name not in indexed]
    if len(missing) < min(COMPACT_AFTER, len(runs)) or not missing:
        return None
    fetched = store.read(missing)
    bodies = []
    for run in runs:
        body = indexed.get(run.name) or fetched.get(run.name)
        if isinstance(body, bytes):
            bodies.append((run.name, body))
    written = store.replace_if(name, index_bytes(bodies), None if held is None else held[1])
    return len(bodies) if written else None
