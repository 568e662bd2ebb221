"""The suite's own root conftest.py: the helper plugins it names are imported by pytest,
so that their asserts are rewritten, and the modules whose tests start the most
processes are handed out first, each module whole."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_root_conftest_leaves_importing_its_plugins_to_pytest() -> None:
    """A module named in ``pytest_plugins`` and imported by the conftest first is not
    rewritten: pytest warns, an error under ``-W error``.  A checkout hides it, because
    the editable install's egg-info marks the whole ``tests`` package for rewriting;
    the release matrix, running the installed wheel, failed on it."""
    tree = ast.parse((ROOT / "conftest.py").read_text(encoding="utf-8"))
    plugins: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:  # the module's top level: what runs when pytest imports it
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytest_plugins"
            for target in node.targets
        ):
            plugins |= set(ast.literal_eval(node.value))
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    assert plugins >= {"tests.fakesys", "tests.processes"}
    assert not plugins & imported


@dataclass
class _Item:
    nodeid: str
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_the_modules_that_start_the_most_processes_go_first_each_whole(
    request: pytest.FixtureRequest,
) -> None:
    conftest = request.config.pluginmanager.get_plugin(str(ROOT / "conftest.py"))
    assert conftest is not None
    items = [
        _Item("tests/test_a.py::test_one"),
        _Item("tests/test_b.py::test_one", {"processes"}),
        _Item("tests/test_c.py::test_one", {"processes"}),
        _Item("tests/test_b.py::test_two"),
        _Item("tests/test_c.py::Class::test_two", {"processes"}),
        _Item("tests/test_d.py::test_one", {"processes"}),
    ]
    conftest._long_modules_first(items)
    assert [item.nodeid for item in items] == [
        "tests/test_c.py::test_one",
        "tests/test_c.py::Class::test_two",
        "tests/test_b.py::test_one",  # one each: as collected, b before d
        "tests/test_b.py::test_two",
        "tests/test_d.py::test_one",
        "tests/test_a.py::test_one",
    ]


def test_what_the_conftest_imported_is_out_of_the_collectors_sight() -> None:
    """A thousand in-process sessions allocate a great deal; each full collection they
    cause would walk every object JAX, numpy and pytest made as they were imported."""
    import gc

    import numpy

    assert gc.get_freeze_count() > 100_000
    collected = {id(obj) for obj in gc.get_objects()}  # the frozen are not among them
    assert id(numpy.__dict__) not in collected
    assert id(pytest.__dict__) not in collected
    assert gc.get_threshold()[0] == 10_000
