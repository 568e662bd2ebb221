"""The one place the plugin's files are read and written, and their headers checked.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``): a reader
sees the old file or the new one, never half of one, and a crash leaves no partial
file behind.  Shared files are updated under a file lock.  Every format module
(``perf.record``, ``perf.baseline``, ``flaky.history``, ``flaky.quarantine``) reads
through ``read_json`` and checks its header with ``check_header``; problems are
``InputError``\\ s that name the file and the field.  orjson, filelock and numpy are
imported lazily, only when a file is read or written.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
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


def expect_object(path: str, where: str, value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else InputError naming ``where``."""
    if not isinstance(value, dict):
        raise InputError(path, f"{where}: expected an object, got {type(value).__name__}")
    return value


def expect_seconds(path: str, where: str, value: Any) -> float:
    """A duration: a finite, non-negative, plausible number of seconds."""
    if not finite_number(value):  # bools included: True is no duration
        raise InputError(path, f"{where}: expected a number of seconds, got {value!r}")
    if value < 0:
        raise InputError(path, f"{where}: {value!r} is negative")
    if value > MAX_SECONDS:
        raise InputError(path, f"{where}: {value!r} seconds is implausibly large")
    return float(value)


def check_version(path: str, data: Mapping[str, Any], supported: int, default: Any = None) -> int:
    """The document's ``version``: an integer from 1 to ``supported``."""
    version = data.get("version", default)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InputError(path, f"version: expected an integer, got {version!r}")
    if version > supported:
        raise InputError(
            path, f"version {version} is newer than this pytest-accel reads ({supported}); upgrade"
        )
    if version < 1:
        raise InputError(path, f"version: {version} is not a valid version")
    return version


def check_header(
    path: str,
    data: Any,
    *,
    schema: str,
    supported: int,
    what: str,
    schema_required: bool = True,
) -> dict[str, Any]:
    """The one header check of every format: an object, its ``schema``, its ``version``."""
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    found = data.get("schema", None if schema_required else schema)
    if found != schema:
        raise InputError(path, f"is not {what} (schema {found!r}, expected {schema!r})")
    check_version(path, data, supported, default=None if schema_required else 1)
    return data


_TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


def utc_timestamp(epoch: float) -> str:
    """``2026-11-21T02:00:00Z``: how every file of ours writes a moment."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime(_TIMESTAMP)


def parse_utc_timestamp(path: str, where: str, text: Any) -> float:
    try:
        moment = datetime.strptime(str(text), _TIMESTAMP)
    except ValueError:
        raise InputError(path, f"{where}: {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    return moment.replace(tzinfo=timezone.utc).timestamp()
