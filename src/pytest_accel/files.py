"""The one place the plugin's files are read and written, and their headers checked.

Writes are atomic (temp file in the same directory, fsync, ``os.replace``): a reader
sees the old file or the new one, never half of one, and a crash leaves no partial
file behind.  Shared files are updated under a file lock (``locking``).  Every
format module (``perf.formats.record``, ``perf.formats.baseline``, ``flaky.history``,
``flaky.quarantine``) reads through ``read_json`` and checks its header with
``check_header``; problems are ``InputError``\\ s that name the file and the field.
orjson is used only where it is already imported (the command line tool), numpy only
when a file's samples are read.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import itertools
import math
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_accel.text import capped


class InputError(Exception):
    """A file the user gave us cannot be used; the message names the file and the problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(capped(f"{capped(os.fspath(path), 200)}: {problem}"))
        self.path = os.fspath(path)
        self.problem = problem


# orjson parses and writes JSON several times faster than the standard library, but a
# process that has imported it takes longer to exit, in proportion to what it holds:
# 160 ms more after a 10,000-test pytest run, more than all our JSON work in that run
# (docs/benchmarks.md).  So the JSON here goes through orjson only where it is already
# imported: the pytest-accel command imports it (large files, little else in memory);
# a pytest run does not.


def dumps(data: Any, *, indent: bool = False) -> bytes:
    """JSON: compact for the machine-read files, which can be large (``jq`` shows them);
    indented, one field a line, for files people review in pull requests."""
    if "orjson" not in sys.modules:
        import json

        try:
            text = json.dumps(
                data,
                ensure_ascii=False,
                allow_nan=False,
                indent=2 if indent else None,
                separators=(",", ": ") if indent else (",", ":"),
            )
            return (text + "\n").encode()
        except (TypeError, ValueError):  # NaN (orjson writes null), a dataclass, ...
            pass
    import orjson

    option = orjson.OPT_APPEND_NEWLINE | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(data, option=option)


def dumps_in_pieces(data: Mapping[str, Any], depth: int = 2) -> Iterator[bytes]:
    """``dumps(data)``, compact, in pieces: each value ``depth`` levels down is encoded on
    its own, and a value there that is a function is called for it just then; a list or
    an object there of more than ``SLICE`` entries is encoded ``SLICE`` entries at a time.
    The standard library encodes a document as one fragment per token before joining
    them (5 MB more for a 10,000-test record, 25 MB for a 100,000-test flaky history); a
    piece at a time, one slice of the largest column is the peak."""
    yield from _pieces(data, depth)
    yield b"\n"


SLICE = 4096  # entries of a large list or object encoded at once


def _pieces(data: Mapping[str, Any], depth: int) -> Iterator[bytes]:
    yield b"{"
    for position, (key, value) in enumerate(data.items()):
        yield (b"," if position else b"") + dumps(key).rstrip(b"\n") + b":"
        made = value() if callable(value) else value
        if depth > 1 and isinstance(made, Mapping):
            yield from _pieces(made, depth - 1)
        else:
            yield from _sliced(made)
    yield b"}"


class Encoded(bytes):
    """A value already encoded as compact JSON (``microseconds_json``), written as it is."""


def microseconds_json(seconds: Sequence[float]) -> Encoded | list[float]:
    """A column of seconds as JSON numbers to the microsecond, encoded in C: each with
    six decimals (``%.6f``, correctly rounded, as ``round(v, 6)``), a zero as ``0.0``.
    A third of the time of ``repr`` of each rounded float, and the same numbers read
    back.  Infinity or NaN, which JSON has no number for: the rounded floats, for
    ``dumps`` to write as it writes them."""
    # A slice at a time: a string per number, for the whole of a 100,000-test column,
    # would be 6 MB at once.
    text = ",".join(map(_microseconds_text, _slices(seconds)))
    if "n" in text:  # "inf" or "nan": no digit, point, comma or sign has an n
        return [round(value, 6) for value in seconds]
    # Each number has six decimals, so ",0.000000" is a whole zero, never part of one.
    text = f",{text}".replace(",0.000000", ",0.0")
    return Encoded(f"[{text[1:]}]".encode())


def _slices(seconds: Sequence[float]) -> Iterator[Sequence[float]]:
    """``SLICE`` numbers at a time."""
    return (seconds[start : start + SLICE] for start in range(0, len(seconds), SLICE))


_SIX_DECIMALS = ",".join(itertools.repeat("%.6f", SLICE))  # a whole slice's format


def _microseconds_text(seconds: Sequence[float]) -> str:
    """A slice of a column, each number ``%.6f``, in one format of the whole slice (a
    third fewer instructions than a format per number); a slice of zeros, as most runs'
    garbage-collection column is, without formatting a number."""
    if not any(seconds):
        return ",".join(itertools.repeat("0.0", len(seconds)))
    count = len(seconds)
    form = _SIX_DECIMALS if count == SLICE else ",".join(itertools.repeat("%.6f", count))
    return form % tuple(seconds)


def _sliced(value: Any) -> Iterator[bytes]:
    """``dumps(value)``, compact, a slice of a large list or object at a time: the same
    bytes, as a compact encoding of a slice is the whole's between two commas."""
    if isinstance(value, Encoded):
        yield value
        return
    if isinstance(value, Mapping) and len(value) > SLICE:
        opening, closing = b"{", b"}"
        items = iter(value.items())
        slices: Iterator[Any] = iter(lambda: dict(itertools.islice(items, SLICE)), {})
    elif isinstance(value, (list, tuple)) and len(value) > SLICE:
        opening, closing = b"[", b"]"
        slices = (value[start : start + SLICE] for start in range(0, len(value), SLICE))
    else:
        yield dumps(value).rstrip(b"\n")
        return
    yield opening
    for position, piece in enumerate(slices):
        yield (b"," if position else b"") + dumps(piece).rstrip(b"\n")[1:-1]
    yield closing


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: bool = False) -> None:
    """Serialise, then replace ``path`` in one step.  A compact document is encoded in
    pieces (``dumps_in_pieces``, three levels down: a history's or a baseline's key), each
    written as it is made."""
    if indent or not isinstance(data, Mapping):
        write_atomic(path, [dumps(data, indent=indent)])
    else:
        write_atomic(path, dumps_in_pieces(data, depth=3))


TEMP_SUFFIX = ".pytest-accel.tmp"
STALE_TEMP_SECONDS = 3600  # a temp file of ours this old belongs to a killed writer


def _writer_tag() -> str:
    """This writer in a temp file's name: its host (hashed: a name safe in a file name)
    and process, ``1a2b3c4d-12345``, so the next writer on the host can tell that it is
    gone (``kill -9`` leaves no chance to clean up)."""
    import socket
    import zlib

    host = zlib.crc32(socket.gethostname().encode()) & 0xFFFFFFFF
    return f"{host:08x}-{os.getpid()}"


def _dead_writer(middle: str, tag: str) -> bool:
    """Whether a temp file's name (``middle``: ``<host>-<pid>.<random>``) says its
    writer ran on this host and is gone.  Older names carry no writer: never."""
    writer = middle.split(".", 1)[0]
    host, dash, pid = writer.partition("-")
    if not dash or host != tag.partition("-")[0] or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def resolved(path: str | os.PathLike[str]) -> Path:
    """Where ``path`` really is: a symlinked file is written through its link, which
    stays a link (a dangling link creates its target, in a directory that exists: no
    directory is made where a link points).  A symlink loop is an error."""
    try:
        return Path(os.path.realpath(os.fspath(path), strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(path, f"cannot be resolved: {exc.strerror}") from None
    target = Path(os.path.realpath(os.fspath(path)))  # not there yet: written on first use
    if os.path.islink(path) and not target.parent.is_dir():
        raise InputError(
            path,
            f"is a link to {capped(str(target), 200)}, whose directory does not exist;"
            " a write goes through a link but makes no directory where it points",
        )
    return target


def write_atomic(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to a temp file beside ``path``, fsync, then ``os.replace``.

    On failure the old file is as it was and the temp file is gone.
    """
    if names_a_directory(path):  # as check_writable refuses it up front
        raise InputError(path, "ends like a directory ('/', '.' or '..'); give a file path")
    target = resolved(path)
    try:
        _write_atomic(target, chunks)
    except OSError as exc:  # named as the user named it, never by our temp file's name
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from None


def make_directories(directory: Path) -> None:
    """``directory`` and its missing parents, created one level at a time without
    recursion (``mkdir(parents=True)`` recurses once per level: a path of 2,000 levels
    would be a RecursionError, not an OSError)."""
    missing = []
    for level in (directory, *directory.parents):
        if os.path.isdir(level):
            break
        missing.append(level)
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level)


def _write_atomic(target: Path, chunks: Iterable[bytes]) -> None:
    make_directories(target.parent)
    remove_stale_temp_files(target)
    mode = _file_mode(target)
    import tempfile  # only a write needs it: `compare` and a run without files do not

    fd, temp_name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.{_writer_tag()}.", suffix=TEMP_SUFFIX
    )
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


def remove_stale_temp_files(target: Path, now: float | None = None) -> None:
    """Temp files of ours for ``target`` left by a writer that was killed (kill -9 leaves
    no chance to clean up): one whose writer ran on this host and is gone, at once; any
    other once it is an hour old (no live writer takes that long; a writer on another
    host sharing the directory cannot be asked)."""
    now = time.time() if now is None else now
    tag = _writer_tag()
    prefix = f".{target.name}."
    with contextlib.suppress(OSError):
        for name in os.listdir(target.parent):
            if name.startswith(prefix) and name.endswith(TEMP_SUFFIX):
                stale = target.parent / name
                middle = name[len(prefix) : -len(TEMP_SUFFIX)]
                with contextlib.suppress(OSError):
                    if (
                        _dead_writer(middle, tag)
                        or now - stale.lstat().st_mtime > STALE_TEMP_SECONDS
                    ):
                        stale.unlink()


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


MAX_INPUT_BYTES = 1 << 30  # 1 GiB: a 100,000-test, 20-run baseline is under 50 MB
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """A regular file's bytes, or InputError saying why it cannot be read.

    Opened without blocking and checked before reading: a FIFO, a device or a directory
    is an error at once, never a hang; a file over ``limit`` bytes is refused.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(path, "is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise InputError(path, f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise InputError(path, f"is {info.st_size} bytes, over the {limit}-byte limit")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            # What the file holds, and then whatever it grew by (up to the limit): one
            # read of ``limit`` bytes would allocate them all first.
            data = handle.read(min(info.st_size, limit) + 1)
            if len(data) > info.st_size:
                data += handle.read(limit + 1 - len(data))
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(path, f"grew over the {limit}-byte limit while being read")
    return data


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file, or raise InputError saying why it cannot be read."""
    if "orjson" in sys.modules:
        return parse_json(path, read_bytes(path))
    # The standard library parses text: the file's bytes go before the parse, so that
    # they and the text and the parsed values are never all held at once.
    return parse_json(path, _text(path, read_bytes(path)))


def _text(path: str | os.PathLike[str], raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({str(exc)[:200]})") from None


def parse_json(path: str | os.PathLike[str], raw: bytes | str) -> Any:
    """Strict JSON (UTF-8, no NaN or Infinity, no number beyond a float, nesting within
    limits), the same with orjson or the standard library (``dumps`` says which)."""
    # A UTF-8 BOM from an editor is untidy, not invalid.
    if isinstance(raw, bytes):
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    else:
        raw = raw.removeprefix("\ufeff")
    if not raw or raw.isspace():  # no copy of a large file, as strip() would make
        raise InputError(path, "is empty")
    with gc_paused():
        if "orjson" in sys.modules:
            import orjson

            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise InputError(path, f"is not valid JSON ({exc})") from None
        import json

        text = _text(path, raw) if isinstance(raw, bytes) else raw
        try:
            return json.loads(
                text, parse_constant=_no_constant, parse_int=_int64, parse_float=_finite
            )
        except RecursionError:
            raise InputError(path, "is not valid JSON (nested too deeply)") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, ours below
            raise InputError(path, f"is not valid JSON ({str(exc)[:200]})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    """A number as orjson reads it: one beyond any double (``1e400``) is refused, as
    orjson refuses it, not read as infinity."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:20]} is infinity when parsed as double")
    return value


def _int64(text: str) -> int | float:
    """An integer as orjson reads it: one beyond 64 bits is a float, one beyond any
    float is refused."""
    value = int(text)  # over 4,300 digits: ValueError, as Python caps int parsing
    if -(2**63) <= value < 2**64:
        return value
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"number {text[:20]}... is beyond any float") from None


def check_writable(path: str | os.PathLike[str], example: str = "record.json") -> Path:
    """Create the parent directory and prove we can write there, before the run starts.
    ``example``: a name the file could have, for the message of a path that cannot be
    one (the option's own kind of file: ``report.html`` for a page)."""
    try:
        return _check_writable(path, f"give a file path such as {example}")
    except OSError as exc:  # a name too long for the OS, a path through a file, ...
        raise InputError(path, f"cannot be written: {exc.strerror or exc}") from None


def names_a_directory(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` as written can only be a directory: it ends in a separator, or
    in ``.`` or ``..`` (``r.json/``, ``r.json/.``), which resolving would quietly drop."""
    text = os.fspath(path)
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    last = text.rsplit(os.sep, 1)[-1] if os.sep in text else text
    return text.endswith(seps) or last in (".", "..")


def _check_writable(path: str | os.PathLike[str], hint: str) -> Path:
    import tempfile

    if names_a_directory(path):
        raise InputError(path, f"ends like a directory ('/', '.' or '..'); {hint}")
    try:  # what the path is, followed as a write would follow it (/dev/stdout: a pipe)
        info = os.stat(path)
    except (OSError, ValueError):
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise InputError(
            path,
            f"is {kind}, not a regular file: files are written whole and atomically (a"
            " temporary file beside it, then renamed over it), which a device or a pipe"
            f" cannot take; {hint}",
        )
    target = resolved(path)
    if target.is_dir():
        raise InputError(path, f"is a directory; {hint}")
    if target.exists() and not target.is_file():
        raise InputError(path, f"is not a regular file; {hint}")
    for ancestor in Path(path).parents:  # as the user wrote it, for the message
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(path, f"cannot be written: {ancestor} is not a directory")
            break
    try:
        make_directories(target.parent)
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX
        ):
            pass
        if target.exists() and not os.access(target, os.W_OK):
            # The directory is writable, so os.replace would succeed; but a read-only
            # file says its owner does not want it changed.
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise InputError(path, f"cannot be written: {exc.strerror or exc}") from None
    return target
