"""Reading and writing the plugin's JSON files safely.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``): a reader
sees the old file or the new one, never half of one, and a crash leaves no partial
file behind.  orjson is imported here, lazily, only when a file is read or written.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class InputError(Exception):
    """A file the user gave us cannot be used; the message names the file and the problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


def dumps(data: Any) -> bytes:
    """Compact JSON: these files are machine-read and can be large (``jq`` shows them)."""
    import orjson

    return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE)


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Serialise first, then replace ``path`` in one step."""
    write_atomic(path, [dumps(data)])


def write_atomic(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to a temp file beside ``path``, fsync, then ``os.replace``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(target)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600; the result should read like any other file
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(target.parent)


def _file_mode(target: Path) -> int:
    """The existing file's permissions, else what the umask gives a new file."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every filesystem allows opening a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for building large trees without cycles
    (parsed JSON, end-of-session tables), where a full collection set off by the new
    containers would only walk the whole session's objects once more."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A file's bytes, or InputError saying why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file, or raise InputError saying why it cannot be read."""
    import orjson

    raw = read_bytes(path)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 BOM from an editor is untidy, not invalid
    if not raw.strip():
        raise InputError(path, "is empty")
    with gc_paused():
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InputError(path, f"is not valid JSON ({exc})") from None


def update_locked(
    path: str | os.PathLike[str],
    load: Callable[[str], T],
    create: Callable[[], T],
    change: Callable[[T], object],
    dump: Callable[[T], Any],
) -> T:
    """Read ``path`` (or create), change and atomically replace it, all under ``PATH.lock``:
    parallel jobs updating one file lose nothing."""
    from filelock import FileLock

    target = os.fspath(path)
    with FileLock(f"{target}.lock"):
        document = load(target) if os.path.exists(target) else create()
        change(document)
        write_json_atomic(target, dump(document))
    return document


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Create the parent directory and prove we can write there, before the run starts."""
    target = Path(path)
    if target.is_dir():
        raise InputError(path, "is a directory; give a file path such as record.json")
    for ancestor in target.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(path, f"cannot be written: {ancestor} is not a directory")
            break
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}."):
            pass
    except OSError as exc:
        raise InputError(path, f"cannot be written: {exc.strerror or exc}") from None
    return target


def finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# Larger than any test duration could be: a unit error or corruption.
MAX_SECONDS = 1e6


def all_plausible(values: list[Any]) -> bool:
    """All numbers finite, non-negative and at most ``MAX_SECONDS`` (checked in bulk)."""
    import numpy as np

    numbers = np.array(values, dtype=np.float64)
    return bool(
        np.isfinite(numbers).all() and (numbers >= 0).all() and (numbers <= MAX_SECONDS).all()
    )
