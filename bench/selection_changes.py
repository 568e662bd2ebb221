"""Selection against the changes users commit, each judged by a full run (issue 56).

    python bench/selection_changes.py --work /tmp/changes [--python .venv/bin/python] [NAME...]

A small project of the shapes real ones have (a src layout, a package ``__init__``
that imports its modules, a plugin module loaded by ``pytest_plugins`` with hooks and
a fixture, module- and class-scoped setup, ``lru_cache``, properties with setters,
``singledispatch`` registrations, a metaclass and ``__init_subclass__``, dataclasses,
enums, module ``__getattr__``, a monkey-patch at import, ``pkgutil`` discovery,
package data read through ``importlib.resources``, a SQLite file opened by C code,
data files read by ``parametrize``, a doctest in an ``.rst`` file, a CLI run in a
subprocess, an environment variable) is committed and mapped once (``--accel-map``).
Each change in ``CHANGES`` is then committed on a branch of a fresh copy, and judged by
what runs show, never by coverage: a **full run** says which tests fail (the ground
truth), and a selecting run (``--accel-select=changed``) from the base map says which
ran.  A change whose full run fails where the selecting run passes is a **miss**; a
failing test the selecting run did not run is named either way.  A change that fails
no test (``no-fail``) does not count.  Results go to ``WORK/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

FILES = {
    "pyproject.toml": """
[project]
name = "calc"
version = "0.1"
[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["src"]
markers = ["heavy: heavy"]
""",
    "src/calc/__init__.py": """
from calc.constants import SCALE
from calc import patches  # noqa: F401
PRECISION = 3
__all__ = ["SCALE", "PRECISION"]
""",
    "src/calc/constants.py": """
SCALE = 10
""",
    "src/calc/patches.py": """
from calc.shapes import Shape
Shape.sides_default = 0
""",
    "src/calc/shapes.py": """
import dataclasses, enum, functools


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Registry(type):
    names = []
    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        mcs.names.append(name.lower())
        return cls


class Shape(metaclass=Registry):
    sides = 0
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.tag = cls.__name__[:3]
    def describe(self):
        return f"{self.name()} with {self.sides} sides"
    def name(self):
        return "shape"
    @staticmethod
    def unit():
        return "cm"
    @functools.cached_property
    def area_cache(self):
        return self.area() * 1


class Square(Shape):
    sides = 4
    def __init__(self, s=2):
        self.s = s
    def area(self):
        return self.s * self.s


class Tri(Square):
    sides = 3


@dataclasses.dataclass
class Point:
    x: int = 0
    y: int = 1
    def norm1(self):
        return abs(self.x) + abs(self.y)


def __getattr__(name):
    if name == "ORIGIN":
        return Point(0, 0)
    raise AttributeError(name)
""",
    "src/calc/ops.py": """
import functools, os, sqlite3
from importlib import resources


def add(a, b):
    return a + b


def scaled(x, factor=2):
    return x * factor


@functools.lru_cache(maxsize=None)
def table_size(n):
    return n * 3


def mode():
    return os.environ.get("CALC_MODE", "fast")


def release(value):
    return value


def resource_value():
    return int(resources.files("calc").joinpath("data/res.txt").read_text())


def db_value(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("select v from t").fetchone()[0]
    finally:
        con.close()


class Temp:
    def __init__(self):
        self._v = 1
    @property
    def value(self):
        return self._v * 2
    @value.setter
    def value(self, v):
        self._v = v


@functools.singledispatch
def kind(x):
    return "other"


@kind.register(int)
def _(x):
    return "int"


@kind.register(str)
def _(x):
    return "str"
""",
    "src/calc/data/res.txt": "7\n",
    "src/calc/extra.py": """
import contextlib, functools

double = lambda x: x * 2  # noqa: E731


def make_handler(offset):
    base = offset * 10
    def handler(x):
        return x + base
    return handler


HANDLER = make_handler(1)
triple = functools.partial(lambda a, b: a * b, 3)


def tagged(tag):
    def wrap(fn):
        fn.tag = tag
        return fn
    return wrap


class Money:
    __slots__ = ("cents",)
    def __init__(self, cents):
        self.cents = cents
    def __eq__(self, other):
        return self.cents == other.cents
    def __hash__(self):
        return hash(self.cents)


def counter(n):
    i = 0
    while i < n:
        yield i
        i += 1


LOG = []


def start_cents():
    return 100


@contextlib.contextmanager
def logged():
    LOG.append("in")
    yield
    LOG.append("out")
""",
    "tests/test_extra.py": """
from calc import extra

@extra.tagged("fast")
def test_tag():
    assert test_tag.tag == "fast"

def test_double():
    assert extra.double(2) == 4

def test_handler():
    assert extra.HANDLER(1) == 11

def test_partial():
    assert extra.triple(2) == 6

def test_money_eq():
    assert extra.Money(5) == extra.Money(5)

def test_counter():
    assert list(extra.counter(3)) == [0, 1, 2]

def test_logged():
    extra.LOG.clear()
    with extra.logged():
        pass
    assert extra.LOG == ["in", "out"]
""",
    "src/calc/plugins/__init__.py": """
import importlib, pkgutil
def discover():
    return sorted(m.name for m in pkgutil.iter_modules(__path__))
def load_all():
    return [importlib.import_module(f"calc.plugins.{n}") for n in discover()]
""",
    "src/calc/plugins/alpha.py": "NAME = 'alpha'\n",
    "src/calc/cli.py": """
import sys
from calc.ops import add
if __name__ == "__main__":
    print(add(int(sys.argv[1]), int(sys.argv[2])))
""",
    "tests/conftest.py": """
pytest_plugins = ["helpers.plugin"]
""",
    "tests/helpers/__init__.py": "",
    "tests/helpers/plugin.py": """
import pytest
import calc.ops

SETTINGS = {}

def pytest_configure(config):
    SETTINGS["factor"] = 2

def pytest_collection_modifyitems(items):
    for item in items:
        if "heavy" in item.name:
            item.add_marker(pytest.mark.heavy)

@pytest.fixture
def factor():
    return SETTINGS["factor"]
""",
    "tests/helpers/util.py": """
def triple(x):
    return x * 3
""",
    "tests/data/cases.json": "[[1, 2, 3], [2, 2, 4]]\n",
    "tests/test_ops.py": """
import json, os, subprocess, sys
from pathlib import Path
import pytest
import calc
from calc import ops
from helpers.util import triple

CASES = json.loads((Path(__file__).parent / "data" / "cases.json").read_text())

@pytest.fixture(scope="module")
def base():
    value = ops.add(1, 1)
    yield value
    assert ops.add(0, 0) == 0
    ops.release(value)

def setup_module(module):
    module.START = ops.scaled(1)

@pytest.mark.parametrize("a,b,c", CASES)
def test_cases(a, b, c):
    assert ops.add(a, b) == c

def test_base_first(base):
    assert base == 2

def test_base_second(base):
    assert base == 2

def test_setup_module():
    assert START == 2

def test_default():
    assert ops.scaled(3) == 6

def test_cache_one():
    assert ops.table_size(2) == 6

def test_cache_two():
    assert ops.table_size(2) == 6

def test_mode():
    assert ops.mode() == "fast"

def test_resource():
    assert ops.resource_value() == 7

def test_db(tmp_path):
    import sqlite3
    src = Path(__file__).parent / "data" / "values.db"
    assert ops.db_value(str(src)) == 5

def test_getter():
    assert ops.Temp().value == 2

def test_dispatch_int():
    assert ops.kind(1) == "int"

def test_cli():
    env = {**os.environ, "PYTHONPATH": "src"}
    argv = [sys.executable, "-m", "calc.cli", "2", "3"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "5"

def test_precision():
    assert calc.PRECISION == 3 and calc.SCALE == 10

def test_triple():
    assert triple(2) == 6

def test_factor(factor):
    assert ops.scaled(1, factor) == 2

def test_heavy_marked(request):
    assert request.node.get_closest_marker("heavy") is not None

@pytest.mark.parametrize("name", ["base"])
def test_by_name(request, name):
    assert request.getfixturevalue(name) == 2

def test_light_unmarked(request):
    assert request.node.get_closest_marker("heavy") is None
""",
    "tests/test_shapes.py": """
from calc import shapes
from calc.shapes import Color, Point, Shape, Square, Tri, Registry

def pytest_generate_tests(metafunc):
    if "side" in metafunc.fixturenames:
        metafunc.parametrize("side", [Square().sides])

class TestShapes:
    @classmethod
    def setup_class(cls):
        cls.square = Square(3)

    def test_area(self):
        assert self.square.area() == 9

    def test_tri_describe(self):
        assert Tri().describe() == "shape with 3 sides"

    def test_tri_tag(self):
        assert Tri.tag == "Tri"

def test_side(side):
    assert side == 4

def test_color():
    assert Color.BLUE.value == 2

def test_point_default():
    assert Point().norm1() == 1

def test_registry():
    assert "tri" in Registry.names

def test_unit():
    assert Square.unit() == "cm"

def test_cached_area():
    assert Square(2).area_cache == 4

def test_origin():
    assert shapes.ORIGIN.norm1() == 0

def test_patched_default():
    assert Shape.sides_default == 0
""",
    "tests/test_unit.py": """
import unittest

from calc import extra


class TestMoney(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.money = extra.Money(extra.start_cents())

    def setUp(self):
        self.other = extra.Money(extra.start_cents())

    def test_equal(self):
        self.assertEqual(self.money, self.other)

    def test_cents(self):
        self.assertEqual(self.money.cents, 100)
""",
    "tests/test_plugins.py": """
from calc import plugins

def test_discovered():
    assert plugins.discover() == ["alpha"]

def test_loaded_names():
    assert [m.NAME for m in plugins.load_all()] == ["alpha"]
""",
    "docs/usage.rst": """
Usage
=====

>>> from calc.ops import add
>>> add(2, 2)
4
""",
}


Change = Callable[[Path], None] | None


def sub(rel: str, old: str, new: str) -> Callable[[Path], None]:
    """Replace the first ``old`` of ``rel`` with ``new``."""

    def apply(root: Path) -> None:
        path = root / rel
        text = path.read_text()
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new, 1))

    return apply


def write(rel: str, text: str) -> Callable[[Path], None]:
    """Write ``rel`` anew (a new file, or all of one)."""

    def apply(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return apply


def db(root: Path) -> None:
    """The SQLite file a test opens through C code, which no ``open`` wrapper sees."""
    connection = sqlite3.connect(root / "tests/data/values.db")
    connection.execute("update t set v = 6")
    connection.commit()
    connection.close()


CHANGES: dict[str, Change] = {
    "constant_other_module": sub("src/calc/constants.py", "SCALE = 10", "SCALE = 11"),
    "package_init_constant": sub("src/calc/__init__.py", "PRECISION = 3", "PRECISION = 4"),
    "subclass_attribute": sub(
        "src/calc/shapes.py",
        "class Tri(Square):\n    sides = 3",
        "class Tri(Square):\n    sides = 5",
    ),
    "override_added": sub(
        "src/calc/shapes.py",
        "class Tri(Square):\n    sides = 3\n",
        "class Tri(Square):\n    sides = 3\n    def name(self):\n        return 'tri'\n",
    ),
    "module_fixture_setup": sub(
        "tests/test_ops.py", "value = ops.add(1, 1)", "value = ops.add(1, 2)"
    ),
    "module_fixture_teardown": sub(
        "tests/test_ops.py", "assert ops.add(0, 0) == 0", "assert ops.add(0, 0) == 1"
    ),
    "fixture_teardown_helper": sub(
        "src/calc/ops.py",
        "def release(value):\n    return value",
        "def release(value):\n    raise ValueError(value)",
    ),
    "setup_module": sub(
        "tests/test_ops.py", "module.START = ops.scaled(1)", "module.START = ops.scaled(2)"
    ),
    "lru_cache_body": sub("src/calc/ops.py", "return n * 3", "return n * 4"),
    "default_argument": sub(
        "src/calc/ops.py", "def scaled(x, factor=2):", "def scaled(x, factor=3):"
    ),
    "parametrize_data": write("tests/data/cases.json", "[[1, 2, 4], [2, 2, 4]]\n"),
    "package_data_resources": write("src/calc/data/res.txt", "8\n"),
    "sqlite_data_file": db,
    "discovered_module": write("src/calc/plugins/beta.py", "NAME = 'beta'\n"),
    "rst_doctest": sub("docs/usage.rst", ">>> add(2, 2)\n4", ">>> add(2, 2)\n5"),
    "pytest_toml": write("pytest.toml", '[pytest]\ntestpaths = ["tests"]\n'),
    "subprocess_code": sub("src/calc/cli.py", "print(add(", "print(1 + add("),
    "getter_with_setter": sub("src/calc/ops.py", "return self._v * 2", "return self._v * 3"),
    "dispatch_not_last": sub("src/calc/ops.py", 'return "int"', 'return "INT"'),
    "plugin_configure_hook": sub(
        "tests/helpers/plugin.py", 'SETTINGS["factor"] = 2', 'SETTINGS["factor"] = 3'
    ),
    "plugin_modifyitems_hook": sub(
        "tests/helpers/plugin.py", '"heavy" in item.name', '"heavy" in item.name and False'
    ),
    "test_helper_module": sub("tests/helpers/util.py", "return x * 3", "return x * 4"),
    "generate_tests_hook": sub("tests/test_shapes.py", "[Square().sides]", "[Square().sides + 1]"),
    "setup_class": sub("tests/test_shapes.py", "cls.square = Square(3)", "cls.square = Square(4)"),
    "enum_value": sub("src/calc/shapes.py", "BLUE = 2", "BLUE = 3"),
    "dataclass_default": sub("src/calc/shapes.py", "y: int = 1", "y: int = 2"),
    "init_subclass": sub(
        "src/calc/shapes.py", "cls.tag = cls.__name__[:3]", "cls.tag = cls.__name__[:2]"
    ),
    "metaclass_body": sub(
        "src/calc/shapes.py", "mcs.names.append(name.lower())", "mcs.names.append(name)"
    ),
    "staticmethod_body": sub("src/calc/shapes.py", 'return "cm"', 'return "mm"'),
    "cached_property": sub(
        "src/calc/shapes.py", "return self.area() * 1", "return self.area() * 2"
    ),
    "module_getattr": sub("src/calc/shapes.py", "return Point(0, 0)", "return Point(1, 0)"),
    "import_time_patch": sub(
        "src/calc/patches.py", "Shape.sides_default = 0", "Shape.sides_default = 1"
    ),
    "dataclass_method": sub(
        "src/calc/shapes.py", "return abs(self.x) + abs(self.y)", "return abs(self.x) - abs(self.y)"
    ),
    "module_lambda": sub("src/calc/extra.py", "lambda x: x * 2", "lambda x: x * 3"),
    "closure_factory_outer": sub("src/calc/extra.py", "base = offset * 10", "base = offset * 20"),
    "partial_args": sub("src/calc/extra.py", "lambda a, b: a * b, 3)", "lambda a, b: a * b, 4)"),
    "decorator_factory_body": sub("src/calc/extra.py", "fn.tag = tag", "fn.tag = tag.upper()"),
    "dunder_eq": sub(
        "src/calc/extra.py", "return self.cents == other.cents", "return self.cents != other.cents"
    ),
    "generator_body": sub("src/calc/extra.py", "i += 1", "i += 2"),
    "contextmanager_exit": sub("src/calc/extra.py", 'LOG.append("out")', 'LOG.append("OUT")'),
    "unittest_setupclass": sub("src/calc/extra.py", "    return 100", "    return 101"),
    "env_variable": None,  # no code change: CALC_MODE differs from the mapping run's
}

ENV_CHANGE = {"CALC_MODE": "slow"}
SESSION_FAILS = "<the session stops before its tests>"
ARGS = ["tests", "docs", "--doctest-glob=*.rst", "-p", "no:cacheprovider", "-rA", "-q"]
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def make_project(root: Path) -> None:
    for relative, text in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    connection = sqlite3.connect(root / "tests/data/values.db")
    connection.execute("create table t(v)")
    connection.execute("insert into t values (5)")
    connection.commit()
    connection.close()
    (root / ".gitignore").write_text(".accel/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")


def run_pytest(
    python: str, root: Path, extra: list[str], env: dict[str, str] | None = None
) -> tuple[int, dict[str, set[str]], str]:
    """Exit status, each test's outcomes (``-rA``'s lines) and the output."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    environment.update(env or {})
    done = subprocess.run(
        [python, "-m", "pytest", *ARGS, *extra],
        cwd=root,
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    out = done.stdout + done.stderr
    outcomes: dict[str, set[str]] = {}
    for line in out.splitlines():
        found = OUTCOME.match(line)
        if found:
            outcomes.setdefault(found.group(2), set()).add(found.group(1))
    return done.returncode, outcomes, out


@dataclass(frozen=True)
class Verdict:
    status: str  # caught, MISS or no-fail
    failing: list[str]
    ran: int
    tests: int
    missed: list[str]
    valve: str | None


def judge(
    python: str,
    base: Path,
    work: Path,
    name: str,
    change: Change,
    *,
    mapped: int,
    extra: list[str],
) -> Verdict:
    root = work / name
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(base, root, symlinks=True)
    env = None
    if change is None:
        env = ENV_CHANGE
    else:
        change(root)
        git(root, "checkout", "-qb", name)
        git(root, "add", "-A")
        git(root, "commit", "-qm", name)
    full_code, full, full_out = run_pytest(python, root, [], env)
    failing = {t for t, o in full.items() if o & {"FAILED", "ERROR"}}
    selected_code, selected, selected_out = run_pytest(
        python, root, ["--accel-map=.accel/map.db", "--accel-select=changed", "-v", *extra], env
    )
    ran = {t for t, o in selected.items() if o - {"SKIPPED"}}
    failed = {t for t, o in selected.items() if o & {"FAILED", "ERROR"}}
    # A change that stops the session before any test (a configuration file, a plugin
    # that no longer imports): caught when the selecting run stops too.
    if not full and full_code not in (0, 1):
        failing.add(SESSION_FAILS)
        if selected_code not in (0, 1, 5):
            ran.add(SESSION_FAILS)
            failed.add(SESSION_FAILS)
    # The measure: a selecting run that passes where the full run fails.  A
    # failing test it did not run is named even when another failed there (a module
    # fixture's teardown fails in whichever test ends the module).
    missed = sorted(failing - ran)
    status = "no-fail" if not failing else ("caught" if failed else "MISS")
    if missed:
        (work / f"{name}.selecting.txt").write_text(selected_out)
        (work / f"{name}.full.txt").write_text(full_out)
    valves = [line for line in selected_out.splitlines() if line.startswith("selection kept")]
    tests = len(full) or mapped  # a session that stopped: the suite it would have run
    return Verdict(status, sorted(failing), len(ran), tests, missed, next(iter(valves), None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--map-args", default="", help="more arguments for the mapping run (-n 2, --cov=calc)"
    )
    parser.add_argument(
        "--select-args", default="", help="more arguments for the selecting runs (-n 2)"
    )
    parser.add_argument("names", nargs="*", help="only these changes")
    args = parser.parse_args(argv)
    work: Path = args.work.resolve()
    base = work / "base"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    make_project(base)
    code, outcomes, out = run_pytest(
        args.python, base, ["--accel-map=.accel/map.db", *shlex.split(args.map_args)]
    )
    if code != 0 or not outcomes:
        print(out)
        return 1
    print(f"base: {len(outcomes)} tests mapped")
    results: dict[str, Verdict] = {}
    for name, change in CHANGES.items():
        if args.names and name not in args.names:
            continue
        found = results[name] = judge(
            args.python,
            base,
            work,
            name,
            change,
            mapped=len(outcomes),
            extra=shlex.split(args.select_args),
        )
        missed = f"missed {', '.join(found.missed)} " if found.missed else ""
        print(
            f"{name:26} {found.status:8} failing {len(found.failing)}"
            f"  ran {found.ran}/{found.tests}  {missed}{found.valve or ''}",
            flush=True,
        )
    (work / "results.json").write_text(
        json.dumps({name: asdict(found) for name, found in results.items()}, indent=1)
    )
    judged = [found for found in results.values() if found.status != "no-fail"]
    caught = sum(found.status == "caught" for found in judged)
    share = sum(found.ran / max(found.tests, 1) for found in judged) / max(len(judged), 1)
    print(
        f"{len(judged)} change(s) that fail a test: {caught} caught, {len(judged) - caught}"
        f" missed; {100 * share:.1f}% of the tests run on average"
    )
    return 0 if caught == len(judged) else 1


if __name__ == "__main__":
    sys.exit(main())
