"""A key's index: its newest runs' records in one object (``runs/<key>/index.json``),
so a read fetches one object and the runs since, not every run of the window.

The index is the one object that is rewritten, and only by a conditional write: where
the backend offers one (S3's ``If-Match`` / ``If-None-Match``; a directory's file lock),
a writer replaces the index only if it is still the one it read; one that lost the race
leaves it (its compaction was redundant: the next run's does it again).  Readers never
depend on it: a run it does not hold is fetched on its own, and an index that cannot be
read is passed over.  The records are kept as the text their objects hold, so a record
read from the index is the record read from its object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_accel.files import InputError

INDEX = "index.json"
INDEX_SCHEMA = "pytest-accel/store-index"
INDEX_VERSION = 1
COMPACT_AFTER = 5  # runs of the window the index does not hold, before a run compacts


def index_bytes(runs: Sequence[tuple[str, bytes]]) -> bytes:
    """The index of ``runs`` (each run's object name and its bytes, oldest first)."""
    entries = [{"name": name, "record": body.decode("utf-8")} for name, body in runs]
    document = {"schema": INDEX_SCHEMA, "version": INDEX_VERSION, "runs": entries}
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def parse_index(where: str, data: bytes) -> dict[str, bytes]:
    """Each run's bytes by object name (InputError, naming ``where``, for what is not
    an index of this version: a reader then fetches every run on its own)."""
    try:
        document: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise InputError(where, "is not JSON: not an index") from None
    if not isinstance(document, Mapping) or document.get("schema") != INDEX_SCHEMA:
        raise InputError(where, f"is not an index (schema {INDEX_SCHEMA!r})")
    if document.get("version") != INDEX_VERSION or not isinstance(document.get("runs"), list):
        raise InputError(where, f"is an index of another version than {INDEX_VERSION}")
    runs: dict[str, bytes] = {}
    for at, entry in enumerate(document["runs"]):
        if not isinstance(entry, Mapping):
            raise InputError(where, f"runs[{at}]: expected an object")
        name, record = entry.get("name"), entry.get("record")
        if not isinstance(name, str) or not isinstance(record, str):
            raise InputError(where, f"runs[{at}]: expected a name and a record, as text")
        runs[name] = record.encode("utf-8")
    return runs
