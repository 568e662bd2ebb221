"""A store's runs of one hardware key, as bytes: the newest objects, fetched at once.
What they mean (records, folded into a baseline) is the timing feature's to say: it
asks for them through ``pytest_accel_stored_runs``."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_accel.store.layout import RunObject, compact_stamp, newest

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
    """The newest ``count`` runs of ``key`` (StoreError where the store cannot be
    listed or read)."""
    shown = store.location.shown.rstrip("/")
    runs = newest(store.runs_of(key), count)
    fetched = store.read([run.name for run in runs])
    objects: list[tuple[str, bytes]] = []
    unread: list[str] = []
    for run in runs:
        where, value = f"{shown}/{run.name}", fetched[run.name]
        if isinstance(value, Exception):
            unread.append(f"{where}: could not be read ({type(value).__name__}): passed over")
        else:
            objects.append((where, value))
    return StoredRuns(shown, key, tuple(objects), tuple(unread))
