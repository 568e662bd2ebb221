"""Files that several jobs update: the lock that serialises them, and the locked
read-change-replace.

A file's lock lives beside it, hidden (``.baseline.json.lock`` for ``baseline.json``,
after links are resolved): every writer of the file finds the same lock, whatever its
environment, and each file has one lock file, never more.  A history or baseline read
before the tests can be reused under the lock when the file is still the one that was
read (``file_identity``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pytest_accel.files import InputError, resolved, write_json_atomic

T = TypeVar("T")

LOCK_TIMEOUT_ENV = "PYTEST_ACCEL_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0  # seconds: longer than any honest update of a shared file
WAIT_NOTICE_AFTER = 5.0  # seconds of waiting before saying what for


def cache_subdir(name: str) -> Path | None:
    """A private directory of ours (None: there is none): owned by this user and
    writable by no one else, so that no other user can plant a link in it."""
    for base in _cache_dirs():
        directory = base / name
        try:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
            directory.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            continue
        if _private(base) and _private(directory) and os.access(directory, os.W_OK):
            return directory
    return None


def _private(directory: Path) -> bool:
    """A real directory (not a link to one) of this user, not group or world writable."""
    try:
        info = directory.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def lock_path(target: Path) -> Path:
    """The lock for ``target`` (a resolved path): beside it, hidden, so a link and its
    target, and every writer whatever its cache directory, share one lock."""
    return target.parent / f".{target.name}.lock"


def lock_timeout() -> float:
    """Seconds to wait for a lock: ``PYTEST_ACCEL_LOCK_TIMEOUT`` (a non-negative decimal
    number), else 300.  A value that is not one is an InputError naming the variable:
    ``abc``, ``-5`` or ``nan`` once meant 300 without a word.  The plugin and the
    command check it before they start (``check_lock_timeout``)."""
    from pytest_accel.settings import number_value

    text = os.environ.get(LOCK_TIMEOUT_ENV, "")
    if not text.strip():
        return DEFAULT_LOCK_TIMEOUT
    value = number_value(text)
    if value is None:
        raise InputError(
            LOCK_TIMEOUT_ENV,
            f"{text[:40]!r} is not a number of seconds to wait for a lock (0 or more, e.g."
            f" {DEFAULT_LOCK_TIMEOUT:g})",
        )
    return value


def check_lock_timeout() -> None:
    """Before anything runs: a bad ``PYTEST_ACCEL_LOCK_TIMEOUT`` is refused now, not when
    a shared file is updated at the end."""
    lock_timeout()


@contextlib.contextmanager
def exclusive_lock(target: str | os.PathLike[str]) -> Iterator[None]:
    """Held by one process (or thread) at a time: the lock for ``target`` (``lock_path``).

    On POSIX an ``flock`` on the lock file, released when it is closed (a crashed
    holder releases it too); elsewhere filelock's lock.  A wait of more than a few
    seconds says on stderr what it waits for; one longer than ``lock_timeout()`` is an
    InputError naming the file.  Importing filelock 4 costs more than a run's whole use
    of the lock (docs/benchmarks.md, "The flaky features' cost per run").
    """
    path = lock_path(Path(target))
    timeout = lock_timeout()
    try:
        import fcntl
    except ImportError:  # Windows
        from filelock import FileLock, Timeout

        try:
            with FileLock(path, timeout=timeout):
                yield
        except Timeout:
            raise InputError(target, _timed_out(path, timeout)) from None
        return
    try:
        descriptor = os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o644
        )
    except OSError as exc:
        reason = "it is a link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise InputError(target, f"cannot be locked: {path}: {reason}") from None
    try:
        _wait_for(descriptor, fcntl, target, path, timeout)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _wait_for(
    descriptor: int, fcntl: Any, target: str | os.PathLike[str], path: Path, timeout: float
) -> None:
    try:  # the usual case: nobody holds it
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    started = time.monotonic()
    told = False
    delay = 0.01
    while True:
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - started
        if waited >= timeout:
            raise InputError(target, _timed_out(path, timeout))
        if not told and waited >= WAIT_NOTICE_AFTER:
            told = True
            sys.stderr.write(
                f"pytest-accel: waiting for {path} (another job is updating"
                f" {os.fspath(target)}; {LOCK_TIMEOUT_ENV}={timeout:g} seconds at most)\n"
            )
            sys.stderr.flush()


def _timed_out(path: Path, timeout: float) -> str:
    return (
        f"cannot be locked: another job held {path} for {timeout:g} seconds; if no job is"
        f" running, another process has it open (or raise {LOCK_TIMEOUT_ENV})"
    )


def _cache_dirs() -> Iterator[Path]:
    explicit = os.environ.get("PYTEST_ACCEL_CACHE_DIR")
    if explicit:
        yield Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    yield (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-accel"
    import tempfile  # the last resort

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
        write_json_atomic(path, dump(document))  # an error names it as the user did
    return document
