"""Dependency maps (``--accel-map``) in a store, by the commit each was made at: sent
after a mapping run, fetched before a selecting run as the map of the nearest commit
at or before its own the store holds, so every branch selects from its own history."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.store.layout import map_name, stamp_of
from pytest_accel.vcs import ancestors

if TYPE_CHECKING:
    from pytest_accel.store.location import Store

DEPTH = 1000  # commits before the ref a fetch looks through


@dataclass(frozen=True)
class FetchedMap:
    """A map fetched: its commit, how many commits before the ref that is, its bytes."""

    commit: str
    behind: int
    data: bytes


class NoMap(Exception):
    """No map of the ref or of the commits before it; the text says what to do."""


def send_map(store: Store, data: bytes, commit: str) -> str:
    """A map's bytes as a new object of ``commit`` (its URL, as shown)."""
    name = map_name(commit, stamp_of(time.time()), hashlib.sha256(data).hexdigest())
    return store.put_new(name, data)


def fetch_map(store: Store, ref: str, cwd: str | None = None, depth: int = DEPTH) -> FetchedMap:
    """The newest map of the nearest commit at or before ``ref`` the store holds
    (NoMap where git does not know ``ref``, or the store has none of its commits)."""
    commits = ancestors(ref, cwd=cwd, depth=depth)
    if commits is None:
        raise NoMap(f"git rev-list {ref}: not a commit git knows here")
    found = store.maps_of(commits)
    if found is None:
        raise NoMap(
            f"{store.location.shown}: no map of {ref} or of the {len(commits) - 1}"
            " commit(s) before it git knows here (a shallow clone? fetch more history:"
            " actions/checkout's fetch-depth: 0); run a mapping run (--accel-map) first"
        )
    commit, name = found
    value = store.read([name])[name]
    if isinstance(value, Exception):
        raise NoMap(f"{store.location.shown}/{name}: could not be read ({type(value).__name__})")
    return FetchedMap(commit, commits.index(commit), value)
