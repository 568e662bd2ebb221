"""Files that several jobs update: the lock that serialises them, and the locked
read-change-replace.

Locks live in our cache directory, never beside the user's files, named after the
resolved path of the file they guard (docs/format.md).  A history or baseline read
before the tests can be reused under the lock when the file is still the one that was
read (``file_identity``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pytest_accel.files import InputError, resolved, write_json_atomic

T = TypeVar("T")


def cache_subdir(name: str) -> Path | None:
    """A writable directory of ours, never beside the user's files (None: there is none)."""
    for base in _cache_dirs():
        directory = base / name
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory
    return None


def lock_path(target: Path) -> Path:
    """The lock for ``target``: in our cache directory (never beside the user's files),
    named after the resolved path, so a link and its target share one lock."""
    import hashlib  # 6 ms of OpenSSL, for the commands that never write a file

    digest = hashlib.sha256(os.fsencode(target)).hexdigest()[:32]
    directory = cache_subdir("locks")
    if directory is None:
        raise InputError(target, "cannot be locked: no writable cache directory for the lock")
    return directory / f"{digest}.lock"


@contextlib.contextmanager
def exclusive_lock(target: str | os.PathLike[str]) -> Iterator[None]:
    """Held by one process (or thread) at a time: the lock for ``target`` (``lock_path``).

    On POSIX an ``flock`` on the lock file, released when it is closed (a crashed
    holder releases it too); elsewhere filelock's lock.  Importing filelock 4 costs
    more than a run's whole use of the lock: it loads its read-write and async locks
    and registers at-fork handlers (59 million instructions on a 500-test run, and an
    exit collection that grows with the suite; docs/benchmarks.md, "The flaky
    features' cost per run").
    """
    path = lock_path(Path(target))
    try:
        import fcntl
    except ImportError:  # Windows
        from filelock import FileLock

        with FileLock(path):
            yield
        return
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # waits; PEP 475 retries after a signal
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _cache_dirs() -> Iterator[Path]:
    explicit = os.environ.get("PYTEST_ACCEL_CACHE_DIR")
    if explicit:
        yield Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    yield (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-accel"
    import tempfile  # the last resort; `compare` takes no lock

    yield Path(tempfile.gettempdir()) / f"pytest-accel-{os.getuid()}"


FileIdentity = tuple[int, int, int, int]


def file_identity(path: str | os.PathLike[str]) -> FileIdentity | None:
    """What changes when a file is written or replaced (device, inode, size, mtime);
    None when it does not exist.  Our atomic writes always make a new inode."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def update_locked(
    path: str | os.PathLike[str],
    load: Callable[[str], T],
    create: Callable[[], T],
    change: Callable[[T], object],
    dump: Callable[[T], Any],
    *,
    read_before: tuple[FileIdentity | None, T] | None = None,
) -> T:
    """Read ``path`` (or create), change and atomically replace it, all under one lock:
    parallel jobs updating one file lose nothing.

    ``read_before`` is the file as read earlier (its identity taken before the read):
    reused when the file is still that one, so a large file is not parsed twice.
    """
    target = resolved(path)
    with exclusive_lock(target):
        identity = file_identity(target)
        if identity is None:
            document = create()
        elif read_before is not None and read_before[0] == identity:
            document = read_before[1]
        else:
            document = load(os.fspath(target))
        change(document)
        write_json_atomic(target, dump(document))
    return document
