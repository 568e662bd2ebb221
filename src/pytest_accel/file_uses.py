"""The files a run or a command names, and what it does with each: one file serves one
purpose.  Two options (or arguments) naming one file, links and hard links included,
where one of them writes it, are refused before any test runs or anything is written:
``--accel-report=b.json`` beside ``--perf-baseline=b.json`` would replace the baseline
with HTML."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_accel.files import InputError


@dataclass(frozen=True)
class FileUse:
    """A file an option (or argument) names, and what the run does with it."""

    name: str  # as the user gave it: "--perf-record", "-o", "RECORD"
    path: str
    reads: bool = False
    writes: bool = False

    @property
    def role(self) -> str:
        return {
            (True, True): "read and rewritten",
            (False, True): "written",
        }.get((self.reads, self.writes), "read")


def refuse_shared_files(uses: Iterable[FileUse]) -> None:
    """InputError when two uses name one file (links and hard links included) and one of
    them writes it: the write would destroy what the other reads or writes.  An option
    that reads and rewrites its own file (``--perf-baseline`` with
    ``--perf-update-baseline``) is one use.  Checked before any test runs."""
    seen: dict[object, FileUse] = {}
    for use in uses:
        identity = _file_identity(use.path)
        earlier = seen.get(identity)
        if earlier is None:
            seen[identity] = use
            continue
        if earlier.name == use.name or not (earlier.writes or use.writes):
            continue
        raise InputError(
            use.path,
            f"named by both {earlier.name} ({earlier.role}) and {use.name} ({use.role});"
            " one would overwrite the other: give each its own file",
        )


def _file_identity(path: str) -> object:
    """What makes two paths one file: the inode of an existing file (hard links share
    it), else the resolved path (a symlink and its target, a file not written yet).
    Resolved first, as a write would resolve it: ``r.json/`` and ``r.json/.`` are
    ``r.json`` to ``os.path.realpath`` (where a write would land, were it not refused)."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = os.path.abspath(path)
    try:
        info = os.stat(real)
        if stat.S_ISREG(info.st_mode):
            return ("inode", info.st_dev, info.st_ino)
    except (OSError, ValueError):  # not there yet, or a name too long: the path decides
        pass
    return ("path", real)
