"""Selection is never silently wrong: every dependency a test has, not only the lines
its call ran (issue 56).  Each case commits a small project, maps it, makes one change
a user makes, and checks the failing test is kept: by a full run of the changed project
first (the ground truth: the test fails), then by a selecting run."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import textwrap
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import coverage  # noqa: F401  (imported once: in-process runs keep its C tracer)
import pytest

from tests.project_copies import copy_project, map_of

NO_PROGRAMS = "--accel-map-programs=off"

CONSTANTS = """\
LIMIT = 10
"""

CORE = """\
import functools
import json
import shutil
from pathlib import Path

from pkg.constants import LIMIT

TABLE = json.loads((Path(__file__).parent / "data" / "table.json").read_text())


class Base:
    unit = "m"

    def describe(self):
        return f"{self.size()} {self.unit}"

    def size(self):
        return 1


class Child(Base):
    pass


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


@functools.lru_cache
def expensive(n):
    return n * 2


def scaled(n, factor=3):
    return n * factor


def build_solver():
    return {"steps": LIMIT}
"""

CONFTEST = """\
import pytest

from pkg.core import build_solver


@pytest.fixture(scope="module")
def solver():
    return build_solver()
"""

TESTS = """\
import json
import shutil
from pathlib import Path

import pytest

from pkg import VERSION
from pkg.constants import LIMIT
from pkg.core import TABLE, Child, Temp, build_solver, expensive, kind, scaled

CASES = json.loads((Path(__file__).parent / "data" / "cases.json").read_text())
SOLVER = build_solver()


def test_version():
    assert VERSION == "1"


def test_limit():
    assert LIMIT == 10


def test_child_unit():
    assert Child().describe() == "1 m"


def test_getter():
    assert Temp().value == 2


def test_dispatch_int():
    assert kind(1) == "int"


def test_cache_first():
    assert expensive(3) == 6


def test_cache_second():
    assert expensive(3) == 6


def test_default():
    assert scaled(2) == 6


def test_table():
    assert TABLE == {"a": 1}


def test_read_by_the_test():
    assert json.loads((Path(__file__).parent / "data" / "expected.json").read_text()) == 1


@pytest.mark.parametrize("case", CASES)
def test_cases(case):
    assert case < 4


def test_import_time_solver():
    assert SOLVER == {"steps": 10}


def test_solver_one(solver):
    assert solver == {"steps": 10}


def test_solver_two(solver):
    assert solver == {"steps": 10}
"""


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def commit(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "change")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
GITIGNORE = "*.db\n.*.lock\n__pycache__/\n"


def committed(root: Path, files: dict[str, str]) -> Path:
    """``files`` written (a ``pyproject.toml`` putting the rootdir on ``sys.path`` and a
    ``.gitignore`` of the maps where they give none) and committed in a new repository."""
    write(root, {"pyproject.toml": PYPROJECT, ".gitignore": GITIGNORE, **files})
    git(root, "init", "-q", "-b", "main")
    commit(root)
    return root


Select = Callable[..., pytest.RunResult]


@pytest.fixture(autouse=True)
def no_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of the same size within a second would leave a stale ``.pyc`` valid:
    the runs here import what is on disk."""
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")


PROJECT = {
    "pkg/__init__.py": 'VERSION = "1"\n',
    "pkg/constants.py": CONSTANTS,
    "pkg/core.py": CORE,
    "pkg/data/table.json": '{"a": 1}\n',
    "tests/conftest.py": CONFTEST,
    "tests/test_core.py": TESTS,
    "tests/data/cases.json": "[1, 2, 3]\n",
    "tests/data/expected.json": "1\n",
    # Outside tests/: neither its conftest nor the package reaches it.
    "checks/test_unrelated.py": "def test_unrelated():\n    assert True\n",
}


def run_all(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


# Made once per module and test process; each test gets a copy (tests/project_copies.py).
@pytest.fixture(scope="module")
def committed_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return committed(tmp_path_factory.mktemp("project"), PROJECT)


@pytest.fixture(scope="module")
def project_map(committed_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return map_of(committed_project, tmp_path_factory, NO_PROGRAMS)


@pytest.fixture
def project(pytester: pytest.Pytester, committed_project: Path) -> Path:
    return copy_project(committed_project, pytester.path)


@pytest.fixture
def mapped(project: Path, pytester: pytest.Pytester, project_map: Path) -> Select:
    """The project mapped at its commit; returns a runner of selecting runs."""
    shutil.copy2(project_map, project / "map.db")

    def select(*args: str) -> pytest.RunResult:
        return run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v", *args)

    return select


def kept_and_failed(result: pytest.RunResult, *tests: str) -> None:
    """Each of ``tests`` ran and failed (never deselected)."""
    out = result.stdout.str()
    for test in tests:
        assert f"FAILED tests/test_core.py::{test}" in out, out


CHANGES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    # name: (file, old, new, the tests that fail)
    "a constant in another module": (
        "pkg/constants.py",
        "LIMIT = 10",
        "LIMIT = 11",
        ("test_limit", "test_import_time_solver", "test_solver_one", "test_solver_two"),
    ),
    "a constant in a package __init__": (
        "pkg/__init__.py",
        'VERSION = "1"',
        'VERSION = "2"',
        ("test_version",),
    ),
    "a subclass's class attribute": (
        "pkg/core.py",
        "class Child(Base):\n    pass",
        'class Child(Base):\n    unit = "cm"',
        ("test_child_unit",),
    ),
    "an overriding method added to a subclass": (
        "pkg/core.py",
        "class Child(Base):\n    pass",
        "class Child(Base):\n    def size(self):\n        return 2",
        ("test_child_unit",),
    ),
    "a property's getter followed by its setter": (
        "pkg/core.py",
        "return self._v * 2",
        "return self._v * 3",
        ("test_getter",),
    ),
    "a dispatch registration that is not the last": (
        "pkg/core.py",
        'return "int"',
        'return "integer"',
        ("test_dispatch_int",),
    ),
    "a cached function the cache answered": (
        "pkg/core.py",
        "return n * 2",
        "return n * 4",
        ("test_cache_first", "test_cache_second"),
    ),
    "a default argument": (
        "pkg/core.py",
        "def scaled(n, factor=3):",
        "def scaled(n, factor=4):",
        ("test_default",),
    ),
    "code a module-scoped fixture ran for another test": (
        "pkg/core.py",
        'return {"steps": LIMIT}',
        'return {"steps": LIMIT + 1}',
        ("test_import_time_solver", "test_solver_one", "test_solver_two"),
    ),
    "package data in a subfolder": (
        "pkg/data/table.json",
        '{"a": 1}',
        '{"a": 2}',
        ("test_table",),
    ),
    "a file a test read": (
        "tests/data/expected.json",
        "1",
        "2",
        ("test_read_by_the_test",),
    ),
    "a file a parametrize read": (
        "tests/data/cases.json",
        "[1, 2, 3]",
        "[1, 2, 5]",
        ("test_cases[5]",),
    ),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_change_keeps_every_test_it_breaks(
    project: Path, pytester: pytest.Pytester, mapped: Select, change: str
) -> None:
    name, old, new, failing = CHANGES[change]
    edit(project / name, old, new)
    truth = run_all(pytester)
    kept_and_failed(truth, *failing)  # the ground truth: a full run
    result = mapped()
    kept_and_failed(result, *failing)
    # The test that depends on nothing of it is still left out.
    result.stdout.fnmatch_lines(["deselected checks/test_unrelated.py::test_unrelated: *"])


def test_a_file_a_test_read_keeps_only_its_readers(project: Path, mapped: Select) -> None:
    edit(project / "tests" / "data" / "expected.json", "1", "2")
    result = mapped()
    result.assert_outcomes(failed=1, deselected=16)
    result.stdout.fnmatch_lines(
        [
            "kept tests/test_core.py::test_read_by_the_test: changed since the map of *:"
            " file tests/data/expected.json it read"
        ]
    )


def test_each_same_named_definition_is_its_own_block(project: Path, mapped: Select) -> None:
    edit(project / "pkg" / "core.py", 'return "str"', 'return "string"')
    result = mapped()
    # Nothing calls kind("..."): the change to the second ``_`` keeps no test, and the
    # first ``_`` (run by test_dispatch_int) is unchanged.
    result.assert_outcomes(deselected=17)
    with closing(sqlite3.connect(project / "map.db")) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM blocks")}
    assert {"Temp.value", "_"} <= names


def test_an_unread_file_in_the_tree_fires_the_data_valve_and_docs_do_not(
    project: Path, mapped: Select
) -> None:
    write(project, {"tests/data/unread.csv": "a,b\n", "pkg/README.md": "# docs\n"})
    result = mapped()
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(
        [
            "selection kept every test: data: a file that is not Python, which no mapped test"
            " read, changed: tests/data/unread.csv"
        ]
    )
    assert "README" not in result.stdout.str()
    (project / "tests" / "data" / "unread.csv").unlink()
    assert mapped().parseoutcomes().get("deselected") == 17  # a .md changes nothing


def test_select_ignore_adds_to_what_is_no_change(project: Path, mapped: Select) -> None:
    write(project, {"tests/data/notes.csv": "a,b\n"})
    result = mapped("--accel-select-ignore", "*.csv")
    result.assert_outcomes(deselected=17)


def test_a_data_file_under_a_non_ascii_directory_is_named(project: Path, mapped: Select) -> None:
    write(project, {"tests/données/table.csv": "a,b\n"})
    result = mapped()
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(["*data: *changed: tests/données/table.csv"])


def test_a_new_module_found_by_discovery_keeps_the_tests_that_used_its_package(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path
    committed(
        root,
        {
            "plug/__init__.py": textwrap.dedent(
                """\
                import importlib
                import pkgutil


                def plugins():
                    return sorted(
                        importlib.import_module(f"plug.{m.name}").NAME
                        for m in pkgutil.iter_modules(__path__)
                    )
                """
            ),
            "plug/alpha.py": 'NAME = "alpha"\n',
            "tests/test_plug.py": (
                "from plug import plugins\n\n\ndef test_plugins():\n"
                '    assert plugins() == ["alpha"]\n\n\ndef test_other():\n    pass\n'
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    write(root, {"plug/beta.py": 'NAME = "beta"\n'})
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    # test_other imports the package too: what its import runs may have changed
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["kept tests/test_plug.py::test_plugins: *plug/beta.py (not in the map) beside code*"]
    )


PLUGIN_MODULE = """\
import os

import pytest

SETTINGS = {}


def pytest_configure(config):
    SETTINGS["factor"] = 2
    SETTINGS["mode"] = os.environ.get("SUPPORT_MODE", "fast")


def pytest_collection_modifyitems(items):
    for item in items:
        if "heavy" in item.name:
            item.add_marker(pytest.mark.heavy)
"""

PLUGIN_TESTS = """\
from support.plugin import SETTINGS


def test_factor():
    assert SETTINGS["factor"] == 2


def test_heavy_marked(request):
    assert request.node.get_closest_marker("heavy") is not None


def test_mode():
    assert SETTINGS["mode"] == "fast"
"""


def plugin_project(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    committed(
        root,
        {
            "support/__init__.py": "",
            "support/plugin.py": PLUGIN_MODULE,
            "tests/conftest.py": 'pytest_plugins = ["support.plugin"]\n',
            "tests/test_plugin.py": PLUGIN_TESTS,
            "pyproject.toml": (
                '[tool.pytest.ini_options]\npythonpath = ["."]\nmarkers = ["heavy: heavy"]\n'
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=3)
    return root


@pytest.mark.parametrize(
    ("old", "new", "failing", "hook"),
    [
        ('SETTINGS["factor"] = 2', 'SETTINGS["factor"] = 3', "test_factor", "pytest_configure"),
        (
            '"heavy" in item.name',
            '"heavy" in item.name and False',
            "test_heavy_marked",
            "pytest_collection_modifyitems",
        ),
    ],
    ids=["pytest_configure", "pytest_collection_modifyitems"],
)
def test_a_plugin_modules_hooks_are_a_dependency_of_every_test(
    pytester: pytest.Pytester, old: str, new: str, failing: str, hook: str
) -> None:
    """A project module registered as a plugin (``pytest_plugins``, ``-p``) runs its
    hooks outside every test, collection and fixture: what they run is every test's."""
    root = plugin_project(pytester)
    edit(root / "support" / "plugin.py", old, new)
    commit(root)
    run_all(pytester).assert_outcomes(failed=1, passed=2)  # the ground truth
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        [f"kept tests/test_plugin.py::{failing}: changed since *: support/plugin.py::{hook}"]
    )
    # Why every test ran is said at every verbosity, the hook named.
    quiet = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-q")
    quiet.stdout.fnmatch_lines(
        [
            "selection: every test depends on what the session ran outside them (a plugin's"
            f" hooks, what they call), which changed: support/plugin.py::{hook}"
        ]
    )


def test_a_variable_a_plugins_hook_read_is_a_dependency_of_every_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin_project(pytester)
    monkeypatch.setenv("SUPPORT_MODE", "slow")
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        ["kept tests/test_plugin.py::test_mode: *environment variable SUPPORT_MODE differs*"]
    )
    reasons = [line for line in result.stdout.lines if line.startswith(("kept", "selection"))]
    assert reasons, result.stdout.str()
    assert not [line for line in reasons if "slow" in line.replace("SUPPORT_MODE", "")]


def test_what_a_plugin_named_by_p_imports_is_a_dependency_of_every_test(
    pytester: pytest.Pytester,
) -> None:
    """A plugin the session imports itself (``-p``, an entry point) is no test file's
    import: its import, and what it imports, count for every test."""
    root = pytester.path
    write(
        root,
        {
            "support/__init__.py": "",
            "support/values.py": "FACTOR = 2\n",
            "support/plugin.py": (
                "from support import values\n\n\ndef pytest_configure(config):\n"
                "    config.support_factor = values.FACTOR\n"
            ),
            "tests/test_factor.py": (
                "def test_factor(pytestconfig):\n    assert pytestconfig.support_factor == 2\n"
            ),
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p support.plugin"\n',
            ".gitignore": "*.db\n.*.lock\n__pycache__/\n",
        },
    )
    pytester.syspathinsert()
    git(root, "init", "-q", "-b", "main")
    commit(root)
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=1)
    edit(root / "support" / "values.py", "FACTOR = 2", "FACTOR = 3")
    commit(root)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["kept tests/test_factor.py::test_factor: changed since *: support/values.py::<import>"]
    )


def test_a_module_fixtures_teardown_is_the_fixtures_not_the_test_that_ends_the_module(
    pytester: pytest.Pytester,
) -> None:
    """The teardown of a module-scoped fixture runs in whichever test ends the module
    (here one that does not use it): what it runs is every user's dependency, so a
    change there keeps them, and the teardown runs and fails."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "def release(value):\n    return value\n",
            "tests/test_a.py": (
                "import pytest\n\nfrom pkg import release\n\n\n"
                '@pytest.fixture(scope="module")\ndef resource():\n    yield 1\n'
                "    release(1)\n\n\ndef test_user(resource):\n    assert resource == 1\n\n\n"
                "def test_last():\n    pass\n"
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "pkg" / "__init__.py", "return value", "raise ValueError(value)")
    commit(root)
    run_all(pytester).assert_outcomes(passed=2, errors=1)  # the ground truth
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["kept tests/test_a.py::test_user: *pkg/__init__.py::release"])


def test_with_pytest_cov_a_module_outside_its_sources_is_depended_on_whole(
    pytester: pytest.Pytester,
) -> None:
    """pytest-cov measures only its ``--cov`` sources: a helper module of the tests
    outside them is imported but not measured, so its importers depend on all of it."""
    pytest.importorskip("pytest_cov")
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "def one():\n    return 1\n",
            "helpers/__init__.py": "",
            "helpers/util.py": "def triple(x):\n    return x * 3\n",
            "tests/test_a.py": (
                "from helpers.util import triple\nfrom pkg import one\n\n\n"
                "def test_triple():\n    assert triple(one()) == 3\n"
            ),
            "tests/test_b.py": "from pkg import one\n\n\ndef test_one():\n    assert one() == 1\n",
            ".gitignore": "*.db\n.*.lock\n__pycache__/\n.coverage*\n",
        },
    )
    mapping = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--cov=pkg", "--cov-report=", "--accel-map", "map.db", NO_PROGRAMS
    )
    mapping.assert_outcomes(passed=2)
    edit(root / "helpers" / "util.py", "x * 3", "x * 4")
    commit(root)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["kept tests/test_a.py::test_triple: *helpers/util.py::<file>"])


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_a_test_that_failed_in_the_mapping_run_is_kept_until_one_sees_it_pass(
    pytester: pytest.Pytester, layout: list[str]
) -> None:
    """A test that fails at the map's commit fails there whatever a change does: a
    selecting run that left it out would pass where a full run fails."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "def one():\n    return 1\n",
            "tests/test_a.py": (
                "from pkg import one\n\n\ndef test_ok():\n    assert one() == 1\n\n\n"
                "def test_broken():\n    assert one() == 2\n"
            ),
            "tests/test_b.py": "def test_other():\n    pass\n",
        },
    )
    mapping = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", *layout, "--accel-map", "map.db", NO_PROGRAMS
    )
    mapping.assert_outcomes(passed=2, failed=1)
    edit(root / "tests" / "test_b.py", "pass", "assert True")
    select = ("--accel-map", "map.db", "--accel-select=changed", "-v")
    result = run_all(pytester, *select, "-q")
    result.assert_outcomes(failed=1, passed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "selection: 1 test(s) kept that did not pass in the mapping run:"
            " tests/test_a.py::test_broken"
        ]
    )
    # Fixed and mapped again, it is judged by what it depends on like any other.
    edit(root / "tests" / "test_a.py", "one() == 2", "one() == 1")
    commit(root)
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=3)
    edit(root / "tests" / "test_b.py", "assert True", "assert 1")
    result = run_all(pytester, *select)
    result.assert_outcomes(passed=1, deselected=2)
    assert "did not pass" not in result.stdout.str()


def test_a_fixture_a_test_asks_for_as_it_runs_is_a_dependency(pytester: pytest.Pytester) -> None:
    """``request.getfixturevalue(name)`` (a fixture chosen by a parameter) is in no
    signature: the fixtures pytest gave the test as it ran count too."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "def make():\n    return 1\n",
            "tests/test_a.py": textwrap.dedent(
                """\
                import pytest

                from pkg import make


                @pytest.fixture(scope="module")
                def resource():
                    return make()


                @pytest.mark.parametrize("name", ["resource"])
                def test_dynamic(request, name):
                    assert request.getfixturevalue(name) == 1
                """
            ),
            "tests/test_b.py": "def test_other():\n    pass\n",
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "pkg" / "__init__.py", "return 1", "return 2")
    commit(root)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["kept tests/test_a.py::test_dynamic[[]resource[]]: *pkg/__init__.py::make"]
    )


def test_a_test_that_skipped_itself_as_it_ran_is_not_mapped(pytester: pytest.Pytester) -> None:
    """A call that skips itself where no accelerator is (``pytest.skip``) ran only the
    start of what it runs on the accelerator tier: a map of the CPU tier must not
    deselect it there."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": (
                "import os\n\n\ndef on_gpu():\n    return os.path.exists('gpu-here')\n\n\n"
                "def kernel():\n    return 1\n"
            ),
            "tests/test_a.py": textwrap.dedent(
                """\
                import pytest

                from pkg import kernel, on_gpu


                def test_kernel():
                    if not on_gpu():
                        pytest.skip("needs a GPU")
                    assert kernel() == 1


                @pytest.mark.xfail(reason="known", strict=True)
                def test_known():
                    assert False
                """
            ),
            "tests/test_b.py": "def test_other():\n    pass\n",
            ".gitignore": "*.db\n.*.lock\n__pycache__/\ngpu-here\n",
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(
        passed=1, skipped=1, xfailed=1
    )
    edit(root / "pkg" / "__init__.py", "return 1", "return 2")
    commit(root)
    (root / "gpu-here").write_text("")  # the accelerator tier (a file git ignores)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, xfailed=1, deselected=1)
    result.stdout.fnmatch_lines(["kept tests/test_a.py::test_kernel: no entry in the map*"])


def test_a_module_a_test_imports_as_it_runs_is_its_import_time_dependency(
    pytester: pytest.Pytester,
) -> None:
    """A module loaded lazily inside the test (a package ``__getattr__``, a plugin
    registry filled at import) runs its import in the test: that is the test's."""
    root = pytester.path
    committed(
        root,
        {
            "calc/__init__.py": textwrap.dedent(
                """\
                import importlib

                REGISTRY = {}


                def get(name):
                    return REGISTRY[name]()


                def __getattr__(name):
                    if name == "extras":
                        return importlib.import_module("calc.extras")
                    raise AttributeError(name)
                """
            ),
            "calc/extras.py": (
                "import functools\n\nfrom calc import REGISTRY\n\n"
                'REGISTRY["one"] = functools.partial(int, 1)\n'
            ),
            "tests/test_a.py": (
                "import calc\n\n\ndef test_lazy():\n    assert calc.extras\n"
                '    assert calc.get("one") == 1\n'
            ),
            "tests/test_b.py": (
                "import calc\n\n\ndef test_other():\n    assert calc.REGISTRY is not None\n"
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "calc" / "extras.py", "int, 1", "int, 2")
    commit(root)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["kept tests/test_a.py::test_lazy: *calc/extras.py::<import>"])


def test_a_classs_generated_tests_are_its_files_collection(pytester: pytest.Pytester) -> None:
    """pytest collects a class after its file, and calls ``pytest_generate_tests`` for
    its methods then: what that runs belongs to the file's tests, not to every test."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "def sides():\n    return 4\n",
            "tests/test_shapes.py": (
                "from pkg import sides\n\n\ndef pytest_generate_tests(metafunc):\n"
                '    if "side" in metafunc.fixturenames:\n'
                '        metafunc.parametrize("side", [sides()], ids=["s"])\n\n\n'
                "class TestShapes:\n    def test_side(self, side):\n        assert side == 4\n"
            ),
            "tests/test_other.py": "def test_other():\n    pass\n",
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "pkg" / "__init__.py", "return 4", "return 5")
    commit(root)
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["kept tests/test_shapes.py::TestShapes::test_side[[]s[]]: *pkg/__init__.py::sides*"]
    )


def test_a_text_file_doctest_is_a_test_file(pytester: pytest.Pytester) -> None:
    root = pytester.path
    committed(
        root,
        {
            "docs/usage.rst": "Usage\n=====\n\n>>> 1 + 1\n2\n",
            "tests/test_a.py": "def test_a():\n    pass\n",
            "pyproject.toml": (
                '[tool.pytest.ini_options]\naddopts = "--doctest-glob=*.rst"\n'
                'testpaths = ["tests", "docs"]\n'
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "docs" / "usage.rst", "2\n", "3\n")
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["kept docs/usage.rst::usage.rst: *file docs/usage.rst it read"])


@pytest.mark.parametrize("name", ["pytest.toml", ".pytest.toml", ".pytest.ini", "pytest.ini"])
def test_pytest_configuration_files_fire_the_packaging_valve(
    project: Path, mapped: Select, name: str
) -> None:
    write(project, {f"src/{name}": "# a setting\n"})
    result = mapped()
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines([f"selection kept every test: packaging: *src/{name}"])


@pytest.mark.processes
def test_a_test_that_starts_a_process_is_kept_when_python_changes(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "",
            "pkg/tool.py": "print(2)\n",
            "pkg/other.py": "def other():\n    return 1\n",
            "tests/test_proc.py": textwrap.dedent(
                """\
                import subprocess
                import sys

                from pkg.other import other


                def test_tool():
                    out = subprocess.run(
                        [sys.executable, "-m", "pkg.tool"], capture_output=True, text=True
                    ).stdout
                    assert out.strip() == "2"


                def test_other():
                    assert other() == 1
                """
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    edit(root / "pkg" / "tool.py", "print(2)", "print(3)")
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PYTHONPATH", str(root))
    try:
        result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    finally:
        monkeypatch.undo()
    result.assert_outcomes(failed=1, passed=1)  # pkg/tool.py, never imported, is beside both
    result.stdout.fnmatch_lines(
        ["kept tests/test_proc.py::test_tool: *it starts a process, whose code is not measured*"]
    )
    edit(root / "pkg" / "tool.py", "print(3)", "print(2)")
    edit(root / "pkg" / "other.py", "return 1", "return 1  # a comment")
    commit(root)
    edit(root / "pkg" / "other.py", "return 1  # a comment", "return 2 - 1")
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["kept tests/test_proc.py::test_tool: *it starts a process*"])
    # The blind spot is named at every verbosity, -q included.
    quiet = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-q")
    quiet.stdout.fnmatch_lines(
        [
            "selection: 1 test(s) kept that start a process, whose code is not measured"
            " (the project's Python changed): tests/test_proc.py::test_tool"
        ]
    )


def test_a_variable_the_code_reads_keeps_its_tests_and_is_named_not_shown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "",
            # Its names listed first (a whole-environment iteration), then one read.
            "pkg/mode.py": "import os\n\n\ndef mode():\n    names = list(os.environ)\n"
            "    return os.getenv('PKG_MODE', 'fast') if names else 'none'\n",
            "tests/test_mode.py": (
                "from pkg.mode import mode\n\n\ndef test_mode():\n    assert mode() == 'fast'\n"
                "\n\ndef test_other():\n    pass\n"
            ),
        },
    )
    monkeypatch.delenv("PKG_MODE", raising=False)
    monkeypatch.setenv("GITHUB_RUN_ID", "1")
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    monkeypatch.setenv("GITHUB_RUN_ID", "2")  # CI's own run ids are no change
    select = ("--accel-map", "map.db", "--accel-select=changed", "-v")
    run_all(pytester, *select).assert_outcomes(deselected=2)
    monkeypatch.setenv("PKG_MODE", "secret-value")
    result = run_all(pytester, *select)
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["kept tests/test_mode.py::test_mode: *environment variable PKG_MODE differs*"]
    )
    assert "secret-value" not in result.stdout.str().split("= FAILURES =")[0]
    quiet = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-q")
    quiet.stdout.fnmatch_lines(
        [
            "selection: 1 test(s) kept: environment variable PKG_MODE differs from the map's:"
            " tests/test_mode.py::test_mode"
        ]
    )
    assert "secret-value" not in quiet.stdout.str().split("= FAILURES =")[0]
    with closing(sqlite3.connect(root / "map.db")) as connection:
        stored = " ".join(str(row) for row in connection.execute("SELECT * FROM test_env"))
    assert "PKG_MODE" in stored
    assert "secret" not in stored


def test_a_variable_the_test_sets_itself_is_no_dependency(pytester: pytest.Pytester) -> None:
    """A test that sets the variable its code reads (``monkeypatch.setenv``) reads no
    input from outside: it was kept by every selecting run, the value never the map's."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": (
                "import os\n\n\ndef mode():\n    return os.getenv('PKG_MODE', 'fast')\n"
            ),
            "tests/test_mode.py": (
                "from pkg import mode\n\n\ndef test_slow(monkeypatch):\n"
                "    monkeypatch.setenv('PKG_MODE', 'slow')\n    assert mode() == 'slow'\n"
                "\n\ndef test_default():\n    assert mode() == 'fast'\n"
            ),
        },
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    select = ("--accel-map", "map.db", "--accel-select=changed", "-v")
    run_all(pytester, *select).assert_outcomes(deselected=2)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PKG_MODE", "slow")  # from outside: test_default's input
    try:
        result = run_all(pytester, *select)
    finally:
        monkeypatch.undo()
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["kept tests/test_mode.py::test_default: *PKG_MODE differs*"])


def test_a_partial_mapping_run_keeps_the_other_tests_evidence(
    project: Path, pytester: pytest.Pytester, mapped: Select
) -> None:
    """A dependency that moved since the whole map was made still fires for the tests
    a later partial run (-k) did not map again."""
    with closing(sqlite3.connect(project / "map.db")) as connection, connection:
        connection.execute(
            "UPDATE snapshots SET dependencies = json_set(dependencies, '$.jax', '0.0.1')"
        )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS, "-k", "test_limit").assert_outcomes(
        passed=1, deselected=16
    )
    result = mapped()
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(
        ["selection kept every test: dependency: installed versions changed *jax 0.0.1 -> *"]
    )
    # Only the test mapped again relies on a snapshot of now.
    only = mapped("-k", "test_limit")
    only.assert_outcomes(deselected=17)


def test_a_selecting_run_leaves_no_sqlite_companions(project: Path, mapped: Select) -> None:
    mapped().assert_outcomes(deselected=17)
    assert not list(project.glob("map.db-*"))


def test_a_max_age_of_zero_keeps_every_test(mapped: Select) -> None:
    result = mapped("--accel-map-max-age", "0")
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(["selection kept every test: age: the map is * days old*"])


def test_a_version_1_map_is_upgraded_and_its_entries_kept_until_mapped_again(
    project: Path, pytester: pytest.Pytester, mapped: Select
) -> None:
    with closing(sqlite3.connect(project / "map.db")) as connection, connection:
        connection.execute("UPDATE tests SET evidence = 1")
    result = mapped()
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(
        ["kept tests/test_core.py::test_limit: mapped by an older pytest-accel (map version 1)*"]
    )
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=17)
    mapped().assert_outcomes(deselected=17)


# -- small defects ----------------------------------------------------------------------


def test_min_recall_100_fails_whenever_a_failing_test_is_missed(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """One failing test kept, another (broken by a file outside the rootdir, which no
    map sees) left out: the run is a miss, not a catch."""
    from pytest_accel.cli import main

    outside = project.parent / f"{project.name}.broken"
    write(
        project,
        {
            "checks/test_unrelated.py": "from pathlib import Path\n\n\ndef test_unrelated():\n"
            f"    assert not Path({str(outside)!r}).exists()\n"
        },
    )
    commit(project)
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=17)
    outside.write_text("")
    edit(project / "pkg" / "core.py", "return n * 2", "return n * 4")
    args = ("--accel-map", "map.db", "--accel-select=shadow", "--perf-record", "shadow.json")
    run_all(pytester, *args).assert_outcomes(passed=14, failed=3)
    capsys.readouterr()
    assert main(["selection", "shadow.json", "--min-recall", "100"]) == 1
    out = capsys.readouterr().out
    assert "MISSED 1: checks/test_unrelated.py::test_unrelated" in out
    assert "recall 0.0% (0 of 1 faulty shadow run(s))" in out


def test_a_map_whose_metadata_is_not_utf8_stops_in_one_line(
    project: Path, pytester: pytest.Pytester, mapped: Select
) -> None:
    with closing(sqlite3.connect(project / "map.db")) as connection, connection:
        connection.execute("UPDATE meta SET value = CAST(x'fffe' AS TEXT) WHERE key = 'branch'")
    result = mapped()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-map: map.db: is a damaged map (SQLite says: *"])
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()


def test_merge_names_a_damaged_map_and_writes_nothing(
    project: Path, mapped: Select, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    damaged = project / "damaged.db"
    damaged.write_bytes((project / "map.db").read_bytes())
    with closing(sqlite3.connect(damaged)) as connection, connection:
        connection.execute("UPDATE snapshots SET dependencies = 'not json'")
    code = main(["merge", str(project / "map.db"), str(damaged), "-o", str(project / "out.db")])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1, err
    assert "damaged.db: is a damaged map" in err
    assert not (project / "out.db").exists()


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_under_xdist_the_last_line_counts_what_selection_deselected(
    project: Path, pytester: pytest.Pytester, mapped: Select
) -> None:
    edit(project / "pkg" / "core.py", "return n * 2", "return n * 4")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-n", "2", "--accel-map", "map.db", "--accel-select=changed"
    )
    result.assert_outcomes(failed=2, deselected=15)


def test_the_headline_counts_skipped_tests_apart_and_agrees_with_k(
    project: Path, pytester: pytest.Pytester
) -> None:
    edit(
        project / "tests" / "test_core.py",
        "def test_cache_second():",
        "@pytest.mark.skipif('config.getoption(\"-k\")', reason='not under -k')\n"
        "def test_cache_second():",
    )
    commit(project)
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=17)
    edit(project / "pkg" / "core.py", "return n * 2", "return n * 4")
    result = run_all(
        pytester, "--accel-map", "map.db", "--accel-select=changed", "-k", "not test_limit"
    )
    # pytest's last line: 1 by -k and 14 by selection; the headline says both, and
    # counts the kept test the marker skipped as skipped, not as run.
    result.assert_outcomes(failed=1, skipped=1, deselected=15)
    result.stdout.fnmatch_lines(
        [
            "selection (changed): 1 of 16 test(s) run; 1 skipped here; 14 deselected"
            " (15 in all with -k, -m and other options); map of *"
        ]
    )


def test_a_change_that_breaks_collection_never_passes(project: Path, mapped: Select) -> None:
    """The module the test files (and their conftest) import now fails at import: the
    run fails, whatever selection would have left out."""
    edit(project / "pkg" / "constants.py", "LIMIT = 10", "LIMIT = 10 // 0")
    result = mapped()
    assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert "ZeroDivisionError" in result.stdout.str() + result.stderr.str()


def test_a_docstring_example_is_a_dependency_of_its_doctest(pytester: pytest.Pytester) -> None:
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": "",
            "pkg/text.py": 'def shout(s):\n    """\n    >>> shout("a")\n    \'A\'\n    """\n'
            "    return s.upper()\n\n\ndef other():\n    return 1\n",
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--doctest-modules"\n'
            'pythonpath = ["."]\n',
        },
    )
    run_all(pytester, "pkg", "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=1)
    edit(root / "pkg" / "text.py", "'A'", "'B'")
    result = run_all(pytester, "pkg", "--accel-map", "map.db", "--accel-select=changed")
    result.assert_outcomes(failed=1)


@pytest.mark.processes
def test_threads_that_start_together_survive_a_mapping_run(pytester: pytest.Pytester) -> None:
    """A mapping run adds no Python code to ``sys.settrace`` (an audit hook would):
    threads started together under coverage.py's thread tracer all reach their target
    (plum's own suite hung on this)."""
    root = pytester.path
    committed(
        root,
        {
            "tests/test_threads.py": textwrap.dedent(
                """\
                import sys
                import threading


                def test_sixteen_threads_meet():
                    old = sys.getswitchinterval()
                    sys.setswitchinterval(1e-6)
                    try:
                        for _ in range(100):
                            barrier = threading.Barrier(16, timeout=20)
                            errors = []

                            def worker():
                                try:
                                    barrier.wait()
                                except BaseException as exc:
                                    errors.append(exc)

                            threads = [threading.Thread(target=worker) for _ in range(16)]
                            for thread in threads:
                                thread.start()
                            for thread in threads:
                                thread.join()
                            assert not errors
                    finally:
                        sys.setswitchinterval(old)
                """
            ),
        },
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS, timeout=300
    )
    result.assert_outcomes(passed=1)


def test_a_map_outside_the_project_given_apart_is_named_as_moving_the_rootdir(
    pytester: pytest.Pytester,
) -> None:
    """pytest finds its rootdir from a separate argument that names an existing path:
    the map outside the project moves it, and the run says so rather than only that
    git cannot list the changes."""
    root = pytester.path
    write(root, {"test_a.py": "def test_a():\n    pass\n", ".gitignore": "__pycache__/\n"})
    git(root, "init", "-q", "-b", "main")
    commit(root)
    outside = root.parent / f"{root.name}-map.db"
    run_all(pytester, "--accel-map", str(outside), NO_PROGRAMS).assert_outcomes(passed=1)
    result = run_all(pytester, "--accel-map", str(outside), "--accel-select=changed")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "selection kept every test: git: the changed files cannot be listed (*; the rootdir"
            " is *: a path outside the project given as its own argument moves it (write"
            " --accel-map=PATH, or --rootdir))"
        ]
    )
    outside.unlink()
    run_all(pytester, f"--accel-map={outside}", NO_PROGRAMS).assert_outcomes(passed=1)
    chosen = run_all(pytester, f"--accel-map={outside}", "--accel-select=changed")
    chosen.assert_outcomes(deselected=1)


def test_merge_of_byte_damaged_maps_is_one_line_or_a_merge(
    project: Path, mapped: Select, capsys: pytest.CaptureFixture[str]
) -> None:
    """200 maps damaged at random bytes (a fixed seed): each merges, or is named in one
    line with exit 2; never a traceback (a name in a damaged page that is not UTF-8,
    a page SQLite's check finds broken)."""
    import random

    from pytest_accel.cli import main

    original = (project / "map.db").read_bytes()
    rng = random.Random(1)
    outcomes = {0: 0, 2: 0}
    for index in range(200):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(100, len(data))] = rng.randrange(256)
        damaged = project / f"damaged{index}.db"
        damaged.write_bytes(data)
        code = main(["merge", str(damaged), "-o", str(project / f"out{index}.db")])
        err = capsys.readouterr().err
        assert code in outcomes, err
        assert err.count("\n") <= 1, err
        outcomes[code] += 1
    assert outcomes[2] > 0  # some damage is found, and named


def test_a_fixture_no_test_uses_any_more_leaves_the_map_on_the_next_mapping_run(
    project: Path, mapped: Select, pytester: pytest.Pytester
) -> None:
    """The tests stop asking for the ``solver`` fixture: the next mapping run writes the
    map (its unit and the unit's blocks go), never "could not write ... FOREIGN KEY"."""
    tests = project / "tests" / "test_core.py"
    tests.write_text(
        tests.read_text()
        .replace("def test_solver_one(solver):", "def test_solver_one(solver=None):")
        .replace("def test_solver_two(solver):", "def test_solver_two(solver=None):")
        .replace('assert solver == {"steps": 10}', "assert solver is None")
    )
    commit(project)
    remapped = run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS)
    remapped.assert_outcomes(passed=17)
    assert remapped.ret == 0, remapped.stdout.str() + remapped.stderr.str()
    with closing(sqlite3.connect(project / "map.db")) as connection:
        units = {name for (name,) in connection.execute("SELECT name FROM units")}
        orphans = connection.execute(
            "SELECT count(*) FROM unit_blocks WHERE unit_id NOT IN (SELECT id FROM units)"
        ).fetchone()[0]
    assert not any(name.endswith("::solver") for name in units), units
    assert any(name.startswith("collect:") for name in units), units
    assert orphans == 0


def test_merge_names_a_map_whose_rows_refer_to_nothing(
    project: Path, mapped: Select, capsys: pytest.CaptureFixture[str]
) -> None:
    """A map whose pages are sound but whose rows point at a unit that is not there (a
    damaged byte in an id) is named in one line, exit 2; a unit no test uses (a link
    lost) merges, and leaves the merged map."""
    from pytest_accel.cli import main

    dangling = project / "dangling.db"
    unused = project / "unused.db"
    for path in (dangling, unused):
        path.write_bytes((project / "map.db").read_bytes())
    with closing(sqlite3.connect(dangling)) as connection:
        connection.execute("UPDATE unit_blocks SET unit_id = unit_id + 9999")
        connection.commit()
    with closing(sqlite3.connect(unused)) as connection:
        connection.execute("DELETE FROM test_units WHERE unit_id = (SELECT min(id) FROM units)")
        connection.commit()
    assert main(["merge", str(dangling), "-o", str(project / "out1.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "dangling.db" in err, err
    assert "unit_blocks" in err, err
    assert not (project / "out1.db").exists()
    assert main(["merge", str(unused), "-o", str(project / "out2.db")]) == 0, capsys.readouterr()
    with closing(sqlite3.connect(project / "out2.db")) as connection:
        assert (
            connection.execute(
                "SELECT count(*) FROM units WHERE id NOT IN (SELECT unit_id FROM test_units)"
            ).fetchone()[0]
            == 0
        )


def test_an_editable_install_of_a_sibling_is_a_dependency_by_its_code(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip install -e ../sibling`` (a monorepo's other package, a JAX checkout): its
    code changes and its version does not, so its version alone would hide the change."""
    sibling = project.parent / f"{project.name}-sibling"
    (sibling / "sib").mkdir(parents=True)
    (sibling / "sib" / "__init__.py").write_text("def value():\n    return 1\n")
    site = project.parent / f"{project.name}-site"
    info = site / "sib-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sib\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(
        json.dumps({"url": sibling.as_uri(), "dir_info": {"editable": True}})
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(sibling))
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=17)
    select = ("--accel-map", "map.db", "--accel-select=changed")
    run_all(pytester, *select).assert_outcomes(deselected=17)
    (sibling / "sib" / "__init__.py").write_text("def value():\n    return 2\n")
    result = run_all(pytester, *select)
    result.assert_outcomes(passed=17)
    result.stdout.fnmatch_lines(
        ["selection kept every test: dependency: *sib 0.1 (editable, *) -> 0.1 (editable, *)"]
    )


def test_a_virtual_environment_inside_an_editable_sibling_is_not_its_code(
    tmp_path: Path,
) -> None:
    """A sibling checkout keeps its own environment in its tree (``build/env``, any
    name): what is installed there is not the sibling's code, and hashing it would cost
    every run a tenth of a second or more."""
    from pytest_accel.selection.changes import source_digest

    (tmp_path / "sib").mkdir()
    (tmp_path / "sib" / "__init__.py").write_text("def value():\n    return 1\n")
    before = source_digest(tmp_path)
    env = tmp_path / "build" / "env-3.11"
    (env / "lib" / "site-packages").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "lib" / "site-packages" / "other.py").write_text("X = 1\n")
    assert source_digest(tmp_path) == before
    (tmp_path / "build" / "generated.py").write_text("X = 1\n")  # not an environment
    assert source_digest(tmp_path) != before


def test_the_projects_own_egg_info_is_its_code_not_a_dependency(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setuptools leaves ``pkg.egg-info`` in the project's tree; with the rootdir on
    ``sys.path`` it reads as an installed distribution, whose version moves with every
    commit under setuptools-scm: it is the project, never a dependency of the map."""
    import json

    from pytest_accel.selection.changes import installed_distributions

    info = project / "pkg.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0.dev1\n")
    monkeypatch.syspath_prepend(str(project))
    assert "pkg" not in installed_distributions(project)
    assert installed_distributions(project / "elsewhere").get("pkg") == "1.0.dev1"
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=17)
    with closing(sqlite3.connect(project / "map.db")) as connection:
        (recorded,) = connection.execute("SELECT dependencies FROM snapshots").fetchone()
    assert "pkg" not in json.loads(recorded)


@pytest.mark.processes
def test_a_process_started_at_import_and_a_copied_environment_are_not_dependencies(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """versioneer's ``_version.py`` asks git for the version when the package is
    imported, handing it ``os.environ.copy()``: that makes no test a process-starting
    one, and reads no variable of any test (orthax's replay kept every test for it)."""
    root = pytester.path
    committed(
        root,
        {
            "pkg/__init__.py": textwrap.dedent(
                """\
                import os
                import subprocess
                import sys

                env = os.environ.copy()
                VERSION = subprocess.run(
                    [sys.executable, "-c", "print(1)"], env=env, capture_output=True, text=True
                ).stdout.strip()


                def twice(x):
                    return 2 * x
                """
            ),
            "pkg/other.py": "def one():\n    return 1\n",
            "tests/test_a.py": (
                "from pkg import twice\nfrom pkg.other import one\n\n\n"
                "def test_twice():\n    assert twice(1) == 2\n\n\n"
                "def test_one():\n    assert one() == 1\n"
            ),
        },
    )
    monkeypatch.setenv("SOME_TERMINAL_WIDTH", "80")
    run_all(pytester, "--accel-map", "map.db", NO_PROGRAMS).assert_outcomes(passed=2)
    monkeypatch.setenv("SOME_TERMINAL_WIDTH", "120")  # the environment moved
    edit(root / "pkg" / "other.py", "return 1", "return 2 - 1")
    result = run_all(pytester, "--accel-map", "map.db", "--accel-select=changed", "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["deselected tests/test_a.py::test_twice: *"])
