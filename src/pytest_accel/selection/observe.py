"""What a mapping run sees besides the lines coverage.py measures, each attributed to
the unit that was running: a test, a test file's collection, a fixture's setup, or a
project module's import (``Units``).

- **Imports**: a meta path finder in front of the others labels each project module's
  execution (``import:pkg/mod.py``) and notes which unit imported it first; the import
  statements of every project file (``static_imports``) give the rest of the graph.
- **Files read** (``open``, ``io.open``, ``os.open``) and **processes started**
  (``subprocess.Popen``, ``os.system``, ``os.posix_spawn``, a fork), by wrapping those
  functions while a run observes (put back at its end; a fork handler, which cannot be
  removed, is added once per process and does nothing while none observes).  Not an
  audit hook: Python code run at every audit event (``sys.settrace`` among them) makes
  threads that start together under coverage.py's thread tracer die in
  ``Thread._bootstrap_inner`` ("Cannot install a trace function while another trace
  function is being installed"), which hung a real library's threaded test.
- **Environment variables read** by the project's own code (``os.environ[...]``,
  ``os.getenv``): names and a digest of the value, never the value.
- **Cached functions** (``functools.lru_cache``, ``functools.cache``) of the project a
  test called where the cache answered, so their code counts for it.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.abc
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

# Variables that differ between any two runs by design: CI's run ids, pytest's and
# xdist's own, coverage's.
EPHEMERAL_ENV = (
    "GITHUB_*",
    "RUNNER_*",
    "CI",
    "CI_*",
    "BUILD_*",
    "BUILDKITE_*",
    "PYTEST_*",
    "COV_CORE_*",
    "COVERAGE_*",
    "_",
    "OLDPWD",
    "PWD",
    "SHLVL",
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def ephemeral(name: str) -> bool:
    return any(fnmatch(name, pattern) for pattern in EPHEMERAL_ENV)


def value_digest(value: str | None) -> str:
    """What the map keeps of a variable's value: never the value."""
    if value is None:
        return "unset"
    return hashlib.blake2b(value.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


@dataclass
class Seen:
    """What one unit did besides running lines."""

    read: set[str] = field(default_factory=set)  # files, relative to the rootdir
    env: dict[str, str] = field(default_factory=dict)  # name -> value digest
    subprocess: bool = False
    imported: set[str] = field(default_factory=set)  # project files it imported first
    cached: set[tuple[str, int]] = field(default_factory=set)  # (file, line) a cache answered


class ProjectFiles:
    """Which paths are the project's own: under the rootdir, not in a virtual
    environment or ``site-packages``; relative names cached."""

    SKIP_PARTS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})

    def __init__(self, root: Path, omit: Sequence[str], own: Sequence[str] = ()) -> None:
        self.root = root
        self.prefix = str(root) + os.sep
        self.omit = tuple(omit)
        self.own = frozenset(own)  # files of ours (the map, its lock): never a dependency
        self._relative: dict[str, str | None] = {}

    def relative(self, path: str) -> str | None:
        found = self._relative.get(path, "")
        if found != "":
            return found
        if path.startswith("<"):  # "<frozen os>", "<string>": no file of the project
            return None
        absolute = os.path.abspath(path)
        if not absolute.startswith(self.prefix):
            absolute = os.path.realpath(absolute)
        relative: str | None = None
        if absolute.startswith(self.prefix) and not any(
            fnmatch(absolute, pattern) for pattern in self.omit
        ):
            relative = absolute[len(self.prefix) :].replace(os.sep, "/")
            if self.SKIP_PARTS.intersection(relative.split("/")) or relative in self.own:
                relative = None
        if len(self._relative) < 100_000:
            self._relative[path] = relative
        return relative


# What the session ran outside every other unit: a plugin module's hooks
# (``pytest_configure``, ``pytest_collection_modifyitems``, a wrapper of the test
# protocol), which can change any test.
SESSION = "session:"


def is_conftest(relative: str) -> bool:
    return relative.rpartition("/")[2] == "conftest.py"


class Units:
    """The unit running now (a stack: a fixture set up inside a test, an import inside
    a collection), what each unit saw, and coverage.py's context kept in step."""

    def __init__(self, files: ProjectFiles, switch: Callable[[str], None] | None) -> None:
        self.files = files
        self.switch = switch  # coverage's switch_context, where ours are used
        self.stack: list[str] = []
        self.seen: dict[str, Seen] = {}
        self.written: set[str] = set()  # files the run wrote: not inputs
        # The environment the run was given: a variable the run set itself (a test's
        # ``monkeypatch.setenv``, a fixture) is no input from outside it.
        self.given = dict(os.environ)

    @property
    def current(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def of(self, unit: str) -> Seen:
        found = self.seen.get(unit)
        if found is None:
            found = self.seen[unit] = Seen()
        return found

    def enter(self, unit: str) -> None:
        self.stack.append(unit)
        if self.switch is not None:
            self.switch(unit)

    def leave(self) -> None:
        if self.stack:
            self.stack.pop()
        if self.switch is not None:
            self.switch(self.stack[-1] if self.stack else "")

    def leave_unit(self, unit: str) -> None:
        """Leave ``unit`` if it is the one running (a teardown whose setup failed
        never entered it)."""
        if self.current == unit:
            self.leave()

    @contextmanager
    def running(self, unit: str) -> Iterator[None]:
        self.enter(unit)
        try:
            yield
        finally:
            self.leave()

    # -- files opened, processes started, variables read ----------------------------

    def started_process(self) -> None:
        unit = self.current
        if unit is not None:
            self.of(unit).subprocess = True

    def opened(self, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, int) or path is None:
            return
        try:
            name = os.fsdecode(path)
        except TypeError:
            return
        if name.endswith((".py", ".pyc", ".pyi")):
            return  # code: its blocks say what changed
        relative = self.files.relative(name)
        if relative is None:
            return
        if isinstance(mode, str):
            writes = any(c in mode for c in "wax+")
        else:
            writes = isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        if writes:
            self.written.add(relative)
            return
        unit = self.current
        if unit is not None and os.path.isfile(name):
            self.of(unit).read.add(relative)

    def env_read(self, name: str, value: str | None) -> None:
        if ephemeral(name) or self.given.get(name) != value:
            return
        # Read by the project's code outside every unit (a plugin's pytest_configure):
        # the session's, which every test depends on.
        self.of(self.current or SESSION).env.setdefault(name, value_digest(value))


# -- the process-wide wrappers -------------------------------------------------------

_ACTIVE: Units | None = None
_FORK_HANDLER = False
# The frames between a read and its reader: ``os.getenv``, ``Mapping.get`` (frozen
# modules in Python 3.11 and later).
_ENV_FILES = (
    os.sep + "os.py",
    os.sep + "_collections_abc.py",
    "<frozen os>",
    "<frozen _collections_abc>",
)
_original_open = builtins.open
_original_os_open = os.open
_original_system = os.system
_original_posix_spawn = getattr(os, "posix_spawn", None)
_original_posix_spawnp = getattr(os, "posix_spawnp", None)
_original_popen_init = subprocess.Popen.__init__
_original_getitem = os._Environ.__getitem__
_original_iter = os._Environ.__iter__


def _open(file: Any, *args: Any, **kwargs: Any) -> Any:
    units = _ACTIVE
    if units is not None:
        units.opened(file, args[0] if args else kwargs.get("mode", "r"), None)
    return _original_open(file, *args, **kwargs)


def _os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
    units = _ACTIVE
    if units is not None:
        units.opened(path, None, flags)
    return _original_os_open(path, flags, *args, **kwargs)


def _popen_init(self: Any, *args: Any, **kwargs: Any) -> None:
    units = _ACTIVE
    if units is not None:
        units.started_process()
    _original_popen_init(self, *args, **kwargs)


def _system(command: Any) -> int:
    units = _ACTIVE
    if units is not None:
        units.started_process()
    return _original_system(command)


def _spawning(original: Any) -> Any:
    def spawn(*args: Any, **kwargs: Any) -> Any:
        units = _ACTIVE
        if units is not None:
            units.started_process()
        return original(*args, **kwargs)

    return spawn


def _forking() -> None:
    units = _ACTIVE
    if units is not None:
        units.started_process()


def _recording_iter(self: Any) -> Iterator[str]:
    """Iterating the whole environment (``os.environ.copy()``, ``dict(os.environ)``,
    ``.items()``: a process's environment handed on) reads no variable in particular:
    the reads that follow it key by key, in its order, are not recorded."""
    if _ACTIVE is None or self is not os.environ:
        yield from _original_iter(self)
        return
    _BULK.keys, _BULK.next = [], 0
    for key in _original_iter(self):
        _BULK.keys.append(key)
        yield key


class _Bulk:
    """The keys a whole-environment iteration gave, and how many of their reads came."""

    keys: list[str] = []  # noqa: RUF012  (one process-wide instance)
    next = 0


_BULK = _Bulk()


def _recording_getitem(self: Any, key: str) -> str:
    units = _ACTIVE
    if units is None or self is not os.environ:
        return _original_getitem(self, key)  # type: ignore[no-any-return]
    if _BULK.next < len(_BULK.keys) and _BULK.keys[_BULK.next] == key:
        _BULK.next += 1  # the next read of a whole-environment iteration
        return _original_getitem(self, key)
    _BULK.keys, _BULK.next = [], 0  # any other read ends it
    try:
        value: str | None = _original_getitem(self, key)
    except KeyError:
        value = None
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.endswith(_ENV_FILES):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is not None and units.files.relative(frame.f_code.co_filename) is not None:
        units.env_read(key, value)
    if value is None:
        raise KeyError(key)
    return value


def observe(units: Units | None) -> None:
    """Make ``units`` the process's observer (None: stop observing, and put every
    wrapped function back)."""
    global _ACTIVE, _FORK_HANDLER
    if units is not None and not _FORK_HANDLER and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_forking)
        _FORK_HANDLER = True
    _ACTIVE = units
    on = units is not None
    builtins.open = io.open = _open if on else _original_open
    os.open = _os_open if on else _original_os_open
    os.system = _system if on else _original_system
    if _original_posix_spawn is not None:
        os.posix_spawn = _spawning(_original_posix_spawn) if on else _original_posix_spawn
    if _original_posix_spawnp is not None:
        os.posix_spawnp = _spawning(_original_posix_spawnp) if on else _original_posix_spawnp
    popen: Any = subprocess.Popen
    popen.__init__ = _popen_init if on else _original_popen_init
    environ_class: Any = os._Environ
    environ_class.__getitem__ = _recording_getitem if on else _original_getitem
    environ_class.__iter__ = _recording_iter if on else _original_iter


# -- imports ---------------------------------------------------------------------------


class ImportLabeller(importlib.abc.MetaPathFinder):
    """In front of ``sys.meta_path``: a project module's execution runs as its own
    unit (``import:pkg/mod.py``), and the unit that imported it first is noted."""

    def __init__(self, units: Units) -> None:
        self.units = units
        self.searching = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if self.searching:
            return None
        self.searching = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.searching = False
        if spec is None or spec.loader is None or not spec.origin:
            return spec
        relative = self.units.files.relative(spec.origin)
        if (
            relative is None
            or not relative.endswith(".py")
            or not hasattr(spec.loader, "exec_module")
        ):
            return spec
        spec.loader = _LabelledLoader(spec.loader, self.units, relative)  # type: ignore[assignment]
        return spec

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)


class _LabelledLoader:
    """A project module's loader, its ``exec_module`` run as the module's own unit."""

    def __init__(self, loader: Any, units: Units, relative: str) -> None:
        self._loader = loader
        self._units = units
        self._relative = relative

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        importer = self._units.current
        if importer is not None:
            self._units.of(importer).imported.add(self._relative)
        elif not is_conftest(self._relative):
            # Imported by the session itself (a plugin named by ``-p`` or an entry
            # point): every test's.  A conftest is its own directory's tests'.
            self._units.of(SESSION).imported.add(self._relative)
        with self._units.running(f"import:{self._relative}"):
            self._loader.exec_module(module)


def static_imports(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """The absolute module names a file's import statements (anywhere in it, lazy
    ones in functions too) name, with the packages they run on the way."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                kept = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*kept, base] if base else kept)
            if base:
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    with_parents = set(found)
    for module in found:
        parts = module.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return with_parents


def cached_functions(modules: Sequence[Any]) -> list[tuple[Any, str]]:
    """The ``lru_cache`` wrappers in ``modules`` (their globals and their classes'
    attributes), each with its function's file."""
    found: list[tuple[Any, str]] = []
    seen: set[int] = set()
    for module in modules:
        try:
            values = list(vars(module).values())
        except TypeError:
            continue
        for value in values:
            candidates = [value]
            if isinstance(value, type):
                try:
                    candidates = list(vars(value).values())
                except TypeError:
                    continue
            for candidate in candidates:
                inner = getattr(candidate, "__func__", candidate)  # staticmethod, classmethod
                if id(inner) in seen or not callable(getattr(inner, "cache_info", None)):
                    continue
                code = getattr(getattr(inner, "__wrapped__", None), "__code__", None)
                if code is not None:
                    seen.add(id(inner))
                    found.append((inner, code.co_filename))
    return found
