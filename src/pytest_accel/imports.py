"""A callback the moment a module has been imported, wherever the import happens (a
test's body, a fixture, collection): what the features that listen to JAX (the
compile listener, the dependency map's program fingerprints) start from, so that a
suite that imports jax late is measured from its first use, and one that never
imports it pays one string comparison per import.  And the spans of a package's
imports, for the compile listener to count torch.compile's own as compiling."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Any


def after_import(name: str, then: Callable[[], None]) -> AfterImport:
    """Watch for ``name``'s first import; ``then`` runs once it has been executed.
    ``stop()`` the returned watcher when it is no longer wanted."""
    hook = AfterImport(name, then)
    sys.meta_path.insert(0, hook)
    return hook


def imports_timed(packages: Sequence[str], heard: Callable[[float, float], None]) -> ImportsTimed:
    """Time each import of the ``packages`` and their modules from now on: ``heard(began,
    ended)`` (``time.time()``) once its module has run.  A module imported by another
    one is timed too, its span within its importer's.  ``stop()`` it when done."""
    hook = ImportsTimed(packages, heard)
    sys.meta_path.insert(0, hook)
    return hook


class _Watcher(importlib.abc.MetaPathFinder):
    """A finder first in ``sys.meta_path``: the modules it ``watches`` are found by the
    finders after it, and their loaders wrapped to call ``ran(began)`` (the import's
    start, ``time.time()``) once the module has run.  Every other import costs a check."""

    finding = False  # while the finders below are asked, through importlib again

    def watches(self, fullname: str) -> bool:
        raise NotImplementedError

    def ran(self, began: float) -> None:
        raise NotImplementedError

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self.finding or not self.watches(fullname):
            return None
        began = time.time()
        self.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        except (ImportError, ValueError):
            return None
        finally:
            self.finding = False
        # Only a loader that executes modules can say when one has run.
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _ThenLoader(spec.loader, lambda: self.ran(began))
        return spec

    def stop(self) -> None:
        """No longer watch (once fired, or at the session's end)."""
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)


class AfterImport(_Watcher):
    """Calls ``then`` once the module ``name`` has been imported, wherever the import
    happens.  ``began`` is when that import started (``time.time()``), so its seconds
    run from there to ``then``'s call."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then
        self.began: float | None = None

    def watches(self, fullname: str) -> bool:
        return fullname == self.name

    def ran(self, began: float) -> None:
        self.began = began
        self.then()


class ImportsTimed(_Watcher):
    """Hands on the span of each import of some packages' modules, nested ones too."""

    def __init__(self, packages: Sequence[str], heard: Callable[[float, float], None]) -> None:
        self.packages = frozenset(packages)
        self.prefixes = tuple(f"{package}." for package in packages)
        self.heard = heard

    def watches(self, fullname: str) -> bool:
        return fullname in self.packages or fullname.startswith(self.prefixes)

    def ran(self, began: float) -> None:
        self.heard(began, time.time())


class _ThenLoader(importlib.abc.Loader):
    """A module's own loader, and ``then`` once it has run the module."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module: types.ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # resources, source, ...: the loader's own
        return getattr(self.loader, name)
