"""A store's URL and the objects in it, through fsspec.

fsspec and its backend (s3fs, gcsfs, adlfs) are imported only when a store is opened,
and only the backend the URL names.  Every failure is a ``StoreError`` with one line
that never holds a credential: URLs are shown without their user, password or query
(where signed URLs keep their signature), and a backend's message is cut to its first
line with anything that looks like a secret taken out.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pytest_accel.files import write_atomic
from pytest_accel.store.layout import MAPS, RUNS, RunObject, key_folder, parse_name, parse_progress

# The schemes a store may have, and the extra that installs each one's backend.
BACKENDS = {
    "file": None,
    "memory": None,
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
}
# A store never holds up the tests' result for long: a dead endpoint costs seconds.
S3_OPTIONS: dict[str, Any] = {
    "config_kwargs": {
        "connect_timeout": 5,
        "read_timeout": 30,
        "retries": {"max_attempts": 2, "mode": "standard"},
    },
}
_SECRET = re.compile(
    r"((?:X-Amz-(?:Signature|Credential|Security-Token)|sig|se|sv|token|key|secret|password)"
    r"(?:=|%3D))[^&\s'\"%]+",
    re.IGNORECASE,
)
_USERINFO = re.compile(r"(://)[^/@\s]+@")


class StoreError(Exception):
    """A store could not be opened, read or written; its text is one safe line."""


class ObjectExists(StoreError):
    """A name taken already: objects are never rewritten."""


def redact(text: str) -> str:
    """``text`` without what could be a credential: a URL's user and password, and the
    values of signature, token, key and password parameters."""
    return _SECRET.sub(r"\1<hidden>", _USERINFO.sub(r"\1", text))


@dataclass(frozen=True)
class StoreLocation:
    """A store as given: ``url`` (a directory, ``file://``, ``memory://``, ``s3://``,
    ``gs://``, ``az://``) and its scheme."""

    url: str
    protocol: str

    @property
    def shown(self) -> str:
        """The URL as every output shows it: no user, password, query or fragment."""
        if self.protocol == "file" and "://" not in self.url:
            return self.url
        parts = urlsplit(self.url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))


def parse_location(text: str) -> StoreLocation:
    """The store ``text`` names; ValueError (one line) for a scheme no backend serves."""
    url = text.strip()
    if not url:
        raise ValueError("an empty store URL")
    if "://" not in url:
        return StoreLocation(os.path.abspath(os.path.expanduser(url)), "file")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in BACKENDS:
        known = ", ".join(f"{s}://" for s in BACKENDS)
        raise ValueError(f"{redact(url)}: no store for {scheme}:// (known: a directory, {known})")
    return StoreLocation(url, scheme)


def safe_reason(exc: BaseException) -> str:
    """A backend's failure as one line that holds no credential."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    reason = f"{name}: {text}" if text else name
    return redact(reason)[:300]


class Store:
    """The objects of one store.  Runs are written once under new names and never
    rewritten (``put_new``); a reader lists a key's runs and fetches them at once."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self.local = location.protocol == "file"
        if self.local:
            path = location.url.removeprefix("file://") if "://" in location.url else location.url
            self.root = path.rstrip("/") or "/"
            self.fs: Any = None
            return
        try:
            from fsspec.core import url_to_fs
        except ImportError:  # pragma: no cover - a dependency of the package
            raise StoreError("fsspec is not installed: pip install fsspec") from None
        options = S3_OPTIONS if location.protocol in ("s3", "s3a") else {}
        # A query or fragment means nothing to a bucket's path (credentials come from the
        # backend's own settings, or the URL's user and password).
        url = location.url.split("?", 1)[0].split("#", 1)[0]
        try:
            self.fs, root = url_to_fs(url, skip_instance_cache=True, **options)
        except ImportError:
            module, extra = BACKENDS[location.protocol] or ("?", "?")
            raise StoreError(
                f'{location.shown}: {module} is not installed: pip install "pytest-accel[{extra}]"'
            ) from None
        except Exception as exc:
            raise StoreError(f"{location.shown}: {safe_reason(exc)}") from None
        self.root = str(root).rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def runs_of(self, key: str) -> list[RunObject]:
        """Every run of ``key`` the store holds (an absent folder: none)."""
        folder = key_folder(key)
        found = (parse_name(f"{folder}/{name}") for name in self._names(folder))
        return [run for run in found if run is not None and run.key == key]

    def unfinished_of(self, key: str) -> dict[RunObject, list[str]]:
        """The runs of ``key`` that left progress and no record (killed: they never
        ended), each with its progress objects, oldest first."""
        folder = key_folder(key)
        names = self._names(folder)
        ended = {run for run in (parse_name(f"{folder}/{n}") for n in names) if run is not None}
        unfinished: dict[RunObject, list[tuple[int, str]]] = {}
        for name in names:
            found = parse_progress(f"{folder}/{name}")
            if found is not None and found[0] not in ended and found[0].key == key:
                unfinished.setdefault(found[0], []).append((found[1], f"{folder}/{name}"))
        return {
            run: [name for _, name in sorted(parts)]
            for run, parts in sorted(unfinished.items(), key=lambda item: item[0].started)
        }

    def _names(self, folder: str) -> list[str]:
        try:
            if self.local:
                directory = Path(self._path(folder))
                names = [entry.name for entry in directory.iterdir()] if directory.is_dir() else []
            else:
                listed = (
                    self.fs.ls(self._path(folder), detail=False) if self._exists(folder) else []
                )
                names = [str(path).rstrip("/").rsplit("/", 1)[-1] for path in listed]
        except Exception as exc:
            raise StoreError(f"could not list {self.location.shown}: {safe_reason(exc)}") from None
        return names

    def hardware_keys(self) -> list[str]:
        """The hardware keys the store holds runs of."""
        from urllib.parse import unquote

        return sorted(unquote(name) for name in self._names(RUNS) if not name.startswith("."))

    def maps_of(self, commits: Sequence[str]) -> tuple[str, str] | None:
        """The newest map of the first of ``commits`` the store holds a map of: (the
        commit, the object's name); None where it holds none of theirs."""
        held = set(self._names(MAPS))
        for commit in commits:
            if commit in held:
                names = sorted(n for n in self._names(f"{MAPS}/{commit}") if n.endswith(".db"))
                if names:
                    return commit, f"{MAPS}/{commit}/{names[-1]}"
        return None

    def _exists(self, name: str) -> bool:
        try:
            return bool(self.fs.exists(self._path(name)))
        except FileNotFoundError:
            return False

    def read(self, names: Sequence[str]) -> dict[str, bytes | Exception]:
        """Each object's bytes (fetched together), or why it could not be read."""
        if not names:
            return {}
        if self.local:
            found: dict[str, bytes | Exception] = {}
            for name in names:
                try:
                    found[name] = Path(self._path(name)).read_bytes()
                except OSError as exc:
                    found[name] = exc
            return found
        paths = [self._path(name) for name in names]
        try:
            fetched = self.fs.cat(paths, on_error="return")
        except Exception as exc:
            raise StoreError(f"could not read {self.location.shown}: {safe_reason(exc)}") from None
        if not isinstance(fetched, dict):  # one path: fsspec gives its bytes alone
            fetched = {paths[0]: fetched}
        by_path = {str(path).lstrip("/"): value for path, value in fetched.items()}
        result: dict[str, bytes | Exception] = {}
        for name, path in zip(names, paths, strict=True):
            value = by_path.get(path.lstrip("/"))
            if value is None:
                value = FileNotFoundError(name)
            result[name] = value if isinstance(value, bytes | Exception) else bytes(value)
        return result

    def remove(self, names: Sequence[str]) -> None:
        """Delete objects (an object gone already is no error): retention's only write
        that is not a new object."""
        try:
            if self.local:
                for name in names:
                    Path(self._path(name)).unlink(missing_ok=True)
            elif names:
                self.fs.rm([self._path(name) for name in names])
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise StoreError(
                f"could not delete from {self.location.shown}: {safe_reason(exc)}"
            ) from None

    @property
    def conditional(self) -> bool:
        """Whether this backend's writes can be made conditional here (the index)."""
        return self.local or self.location.protocol in ("s3", "s3a", "memory")

    def read_versioned(self, name: str) -> tuple[bytes, str] | None:
        """An object's bytes and the tag ``replace_if`` checks (S3's ETag; elsewhere the
        content's hash); None where it is absent or cannot be read."""
        if not self.local and self.location.protocol in ("s3", "s3a"):
            try:
                tag = str(self.fs.info(self._path(name))["ETag"])
            except Exception:
                return None
        else:
            tag = ""
        value = self.read([name])[name]
        if isinstance(value, Exception):
            return None
        return value, tag or hashlib.sha256(value).hexdigest()

    def replace_if(self, name: str, data: bytes, tag: str | None) -> bool:
        """Write ``name`` only if it is still at ``tag`` (None: only if absent): False
        where another writer came first (a lost race, no error).  S3 checks the ETag
        (``If-Match``, ``If-None-Match``); a directory a file lock and the content."""
        try:
            if self.local:
                return self._replace_local(name, data, tag)
            if self.location.protocol in ("s3", "s3a"):
                if tag is None:
                    self.fs.pipe_file(self._path(name), data, mode="create")
                else:
                    self.fs.pipe_file(self._path(name), data, IfMatch=tag)
                return True
            held = self.read_versioned(name)  # memory: one process, no race to lose
            if (held[1] if held else None) != tag:
                return False
            self.fs.pipe_file(self._path(name), data)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if "pre-condition" in str(exc).lower() or "precondition" in str(exc).lower():
                return False
            raise StoreError(
                f"could not write to {self.location.shown}: {safe_reason(exc)}"
            ) from None
        except Exception as exc:
            raise StoreError(
                f"could not write to {self.location.shown}: {safe_reason(exc)}"
            ) from None

    def _replace_local(self, name: str, data: bytes, tag: str | None) -> bool:
        from filelock import FileLock

        target = Path(self._path(name))
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(target.parent / f".{target.name}.lock"), timeout=30):
            try:
                held: str | None = hashlib.sha256(target.read_bytes()).hexdigest()
            except FileNotFoundError:
                held = None
            if held != tag:
                return False
            write_atomic(target, [data])
        return True

    def put_new(self, name: str, data: bytes) -> str:
        """Write ``data`` as the new object ``name``; its URL (as shown).  An object
        appears whole or not at all: a directory gets a hidden temporary file linked
        into place (a name taken already is an error, never overwritten); an object
        store's single PUT is atomic, and no two runs share a name."""
        try:
            if self.local:
                self._put_local(name, data)
            elif self.location.protocol in ("s3", "s3a"):  # If-None-Match: never a rewrite
                self.fs.pipe_file(self._path(name), data, mode="create")
            else:
                self.fs.pipe_file(self._path(name), data)
        except FileExistsError:
            raise ObjectExists(f"{self.location.shown}/{name} exists already") from None
        except Exception as exc:
            raise StoreError(
                f"could not write to {self.location.shown}: {safe_reason(exc)}"
            ) from None
        return f"{self.location.shown.rstrip('/')}/{name}"

    def _put_local(self, name: str, data: bytes) -> None:
        target = Path(self._path(name))
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".{target.name}.{os.getpid()}.part"
        with open(temporary, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temporary, target)  # fails where the name is taken: never a rewrite
        finally:
            temporary.unlink()


def open_store(text: str) -> Store:
    """The store ``text`` names, opened (StoreError: one line)."""
    try:
        location = parse_location(text)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    return Store(location)
