"""A committed project and its map, made once per module and test process, copied into
each test's directory: thirty tests of selection start from the same map, and a mapping
run costs a third of a second.  A copy carries its repository (the same commit the map
was made at) and no bytecode: an edit of the same size within a second would leave a
copied ``.pyc`` valid."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakesys import hermetic_environ
from tests.forked import Run, run_forked

_NO_BYTECODE = shutil.ignore_patterns("__pycache__")


def copy_project(template: Path, into: Path) -> Path:
    shutil.copytree(template, into, dirs_exist_ok=True, ignore=_NO_BYTECODE)
    return into


def map_of(template: Path, tmp_path_factory: pytest.TempPathFactory, *options: str) -> Path:
    """The map a mapping run (``--accel-map map.db`` and ``options``) of a copy of
    ``template`` writes, made in a process of its own (tests/forked.py)."""
    root = copy_project(template, tmp_path_factory.mktemp("mapped"))
    arguments = ["-p", "no:cacheprovider", "--accel-map", "map.db", *options]
    [mapping] = run_forked(
        [Run("pytest", arguments, root)],
        tmp_path_factory.mktemp("forked"),
        environ=hermetic_environ(tmp_path_factory),
    )
    assert mapping.code == 0, mapping.stderr
    return root / "map.db"
