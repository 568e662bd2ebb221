"""Change-aware selection end to end: a mapping run writes the map, a later run
deselects what a change cannot affect, keeps everything when a valve fires, and says
so in every output (issue 40)."""

from __future__ import annotations

import html
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import coverage  # noqa: F401  (imported once: in-process runs keep its C tracer)
import pytest

from pytest_accel.cli import main
from pytest_accel.selection.mapfile import open_map, read_run
from tests.jax_runs import run_jax_suite
from tests.project_copies import copy_project, map_of

OPS = """\
def add(a, b):
    return a + b


def mul(a, b):
    return a * b


class Box:
    def size(self):
        return 3

    def double(self):
        return 2 * self.size()
"""

TESTS = """\
from pkg.ops import Box, add, mul


def test_add():
    assert add(1, 2) == 3


def test_mul():
    assert mul(2, 3) == 6


def test_box():
    assert Box().double() == 6


def test_nothing():
    assert True
"""

NO_PROGRAMS = "--accel-map-programs=off"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def commit(root: Path, message: str = "change") -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


def git_project(root: Path, ops: str, tests: str) -> Path:
    """A git repository at ``root`` with a package (``pkg/ops.py``: ``ops``), its tests
    (``tests/test_ops.py``: ``tests``), and pytest's configuration."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(ops)
    (root / "tests").mkdir()
    (root / "tests" / "test_ops.py").write_text(tests)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (root / ".gitignore").write_text("*.db\n.*.lock\n*.json\n*.html\n*.md\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    commit(root, "start")
    return root


# Made once per module and test process; each test gets a copy (tests/project_copies.py).
@pytest.fixture(scope="module")
def committed_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return git_project(tmp_path_factory.mktemp("project"), OPS, TESTS)


@pytest.fixture(scope="module")
def project_map(committed_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return map_of(committed_project, tmp_path_factory, NO_PROGRAMS)


@pytest.fixture
def project(pytester: pytest.Pytester, committed_project: Path) -> Path:
    return copy_project(committed_project, pytester.path)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


Run = Callable[..., pytest.RunResult]


@pytest.fixture
def mapped(project: Path, pytester: pytest.Pytester, project_map: Path) -> Run:
    """The project mapped at its first commit; returns a runner of selecting runs."""
    shutil.copy2(project_map, project / "map.db")

    def select(*args: str, mode: str = "changed") -> pytest.RunResult:
        return pytester.runpytest(
            "-p", "no:cacheprovider", "--accel-map", "map.db", f"--accel-select={mode}", *args
        )

    return select


def map_tests(path: Path) -> dict[str, list[tuple[str, str]]]:
    with closing(open_map(path)) as connection:
        run = read_run(connection, str(path))
    return {test: sorted(blocks) for test, blocks in run.tests.items()}


def map_shared(path: Path) -> dict[str, Any]:
    with closing(open_map(path)) as connection:
        run = read_run(connection, str(path))
    return {
        "units": run.units,
        "test_units": run.test_units,
        "reads": run.reads,
        "env": run.env,
        "subprocess": run.subprocess,
    }


# -- the map --------------------------------------------------------------------------


def test_a_mapping_run_records_the_blocks_each_test_ran(
    project: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*dependency map of 4 test(s) written to map.db*"])
    found = map_tests(project / "map.db")
    assert ("pkg/ops.py", "mul") in found["tests/test_ops.py::test_mul"]
    assert ("pkg/ops.py", "add") not in found["tests/test_ops.py::test_mul"]
    box = found["tests/test_ops.py::test_box"]
    assert {("pkg/ops.py", "Box.double"), ("pkg/ops.py", "Box.size"), ("pkg/ops.py", "Box")} <= set(
        box
    )
    assert not any(path == "pkg/ops.py" for path, _ in found["tests/test_ops.py::test_nothing"])
    with closing(sqlite3.connect(project / "map.db")) as connection:
        meta = dict(connection.execute("SELECT key, value FROM meta"))
    assert meta["schema"] == "pytest-accel/map"
    assert meta["commit"] == git(project, "rev-parse", "HEAD").strip()
    assert meta["branch"] == "main"
    assert "pytest" in json.loads(meta["dependencies"])


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_xdist_and_shard_maps_equal_the_serial_one(
    project: Path, pytester: pytest.Pytester
) -> None:
    """Under a project's ``filterwarnings = error`` too: the xdist controller, which
    runs no test, measures nothing (coverage would warn that it collected no data)."""
    from pytest_accel.cli import main

    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'filterwarnings = ["error"]\n')
    base = ["-p", "no:cacheprovider", NO_PROGRAMS]
    pytester.runpytest(*base, "--accel-map", "serial.db").assert_outcomes(passed=4)
    xdist = pytester.runpytest_inprocess(*base, "-n", "2", "--accel-map", "xdist.db")
    xdist.assert_outcomes(passed=4)
    assert xdist.ret == pytest.ExitCode.OK
    assert "INTERNALERROR" not in xdist.stdout.str() + xdist.stderr.str()
    for shard in ("1/2", "2/2"):
        name = f"shard{shard[0]}.db"
        pytester.runpytest(*base, "--accel-shard", shard, "--accel-map", name)
    code = main(["merge", "-o", str(project / "merged.db"), "shard1.db", "shard2.db"])
    assert code == 0
    serial = map_tests(project / "serial.db")
    assert len(serial) == 4
    assert map_tests(project / "xdist.db") == serial
    assert map_tests(project / "merged.db") == serial
    # What tests share (their file's collection and imports) and what they read, too.
    shared = map_shared(project / "serial.db")
    assert shared["units"]["collect:tests/test_ops.py"] >= {("pkg/ops.py", "<import>")}
    assert map_shared(project / "xdist.db") == shared
    assert map_shared(project / "merged.db") == shared


def test_a_map_with_pytest_cov_active_maps_alike(project: Path, pytester: pytest.Pytester) -> None:
    """pytest-cov's coverage is used (one tracer), and a test file it does not measure
    is depended on whole."""
    pytest.importorskip("pytest_cov")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--cov=pkg", "--accel-map", "map.db", NO_PROGRAMS
    )
    result.assert_outcomes(passed=4)
    found = map_tests(project / "map.db")
    assert ("pkg/ops.py", "mul") in found["tests/test_ops.py::test_mul"]
    assert ("tests/test_ops.py", "<file>") in found["tests/test_ops.py::test_mul"]
    edit(project / "tests" / "test_ops.py", "add(1, 2) == 3", "add(2, 1) == 3")
    selected = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed"
    )
    selected.assert_outcomes(passed=4)  # the whole test file changed for pytest-cov's map


@pytest.mark.processes
def test_an_interrupted_mapping_run_leaves_the_map_as_it_was(
    project: Path, pytester: pytest.Pytester
) -> None:
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    before = map_tests(project / "map.db")
    (project / "tests" / "test_stop.py").write_text(
        "def test_a():\n    pass\n\ndef test_stop():\n    raise KeyboardInterrupt\n"
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*map: not updated: the run was interrupted (map.db)*"])
    assert map_tests(project / "map.db") == before


# -- selection ------------------------------------------------------------------------


def test_changed_runs_the_tests_of_the_changed_code_and_deselects_the_rest(
    project: Path, mapped: Run
) -> None:
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    result = mapped("-v")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "*selection (changed): 1 of 4 test(s) run; 3 deselected; map of *(main)*",
            "kept tests/test_ops.py::test_mul: changed since the map of *: pkg/ops.py::mul",
            "deselected tests/test_ops.py::test_add: what it depends on is unchanged since*",
        ]
    )
    assert "skipped" not in result.stdout.str().splitlines()[-1]


def test_a_changed_method_keeps_the_tests_that_called_it_through_another(
    project: Path, mapped: Run
) -> None:
    edit(project / "pkg" / "ops.py", "return 3", "return 1 + 2")
    result = mapped("-v")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["kept tests/test_ops.py::test_box: *pkg/ops.py::Box.size*"])


def test_comments_moves_and_formatting_change_nothing_and_exit_zero(
    project: Path, mapped: Run
) -> None:
    ops = project / "pkg" / "ops.py"
    ops.write_text("# a comment\n\n\n" + ops.read_text().replace("return a + b", "return (a +  b)"))
    result = mapped()
    result.assert_outcomes(deselected=4)
    assert result.ret == pytest.ExitCode.OK  # not 5: nothing this change can affect
    result.stdout.fnmatch_lines(["*no test depends on what changed: exit status 0*"])


def test_a_module_level_change_keeps_every_test_that_imported_the_module(
    project: Path, mapped: Run
) -> None:
    edit(project / "pkg" / "ops.py", "def add(a, b):", "SCALE = 1\n\n\ndef add(a, b):")
    result = mapped()
    # test_nothing never ran pkg/ops.py, but its file imports it: the import ran SCALE = 1
    result.assert_outcomes(passed=4)


def test_new_tests_and_accel_always_tests_are_kept(project: Path, mapped: Run) -> None:
    tests = project / "tests" / "test_ops.py"
    tests.write_text(
        tests.read_text()
        + "\n\ndef test_new():\n    assert mul(1, 1) == 1\n"
        + "\n\n@pytest.mark.accel_always\ndef test_always():\n    pass\n"
    )
    edit(tests, "from pkg.ops", "import pytest\nfrom pkg.ops")
    result = mapped("-v")
    result.stdout.fnmatch_lines(
        [
            "kept tests/test_ops.py::test_always: marked accel_always",
            "kept tests/test_ops.py::test_new: no entry in the map of * (new, or never run by*",
        ]
    )
    # the test module's body changed (an import): every test in it ran that body
    result.assert_outcomes(passed=6)


def test_tests_that_failed_were_flaky_or_are_quarantined_are_kept(
    project: Path, pytester: pytest.Pytester, mapped: Run
) -> None:
    from pytest_accel.hardware.facts import session_facts

    config = pytester.parseconfigure("-p", "pytest_accel")
    key = session_facts(config).key
    history = {
        "schema": "pytest-accel/flaky-history",
        "version": 1,
        "window": 20,
        "envs": {
            key: {
                "platform": "cpu",
                "runs": [],
                "tests": {
                    "tests/test_ops.py::test_add": "PPF",
                    "tests/test_ops.py::test_box": "PK",
                },
            }
        },
    }
    (project / "history.json").write_text(json.dumps(history))
    (project / "quarantine.txt").write_text("tests/test_ops.py::test_nothing\n")
    result = mapped("-v", "--flaky-history", "history.json", "--flaky-quarantine", "quarantine.txt")
    result.stdout.fnmatch_lines(
        [
            "kept tests/test_ops.py::test_add: failed in 1 of the flaky history's last 3 run(s)",
            "kept tests/test_ops.py::test_box: flaky in 1 of the flaky history's last 2 run(s)",
            "kept tests/test_ops.py::test_nothing: quarantined (tests/test_ops.py::test_nothing)",
        ]
    )
    result.assert_outcomes(passed=3, deselected=1)


def test_selection_composes_with_k_and_markers_and_never_runs_a_skipped_test(
    project: Path, pytester: pytest.Pytester
) -> None:
    tests = project / "tests" / "test_ops.py"
    tests.write_text(
        "import pytest\n"
        + tests.read_text()
        + "\n\n@pytest.mark.tpu\ndef test_on_tpu():\n    assert mul(1, 2) == 2\n"
    )
    commit(project)
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    args = ["-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed"]
    result = pytester.runpytest(*args, "-k", "not add")
    # -k leaves 4 of 5; selection keeps test_mul and test_on_tpu (mapped as never run:
    # kept), and the tpu marker skips it here
    result.assert_outcomes(passed=1, skipped=1, deselected=3)
    # The headline counts the test the marker skipped as skipped, and says pytest's
    # deselected count beside its own.
    result.stdout.fnmatch_lines(
        [
            "*selection (changed): 1 of 4 test(s) run; 1 skipped here; 2 deselected"
            " (3 in all with -k, -m and other options)*"
        ]
    )


def test_shards_plan_over_the_selected_tests(project: Path, pytester: pytest.Pytester) -> None:
    tests = project / "tests" / "test_ops.py"
    tests.write_text(
        tests.read_text()
        + "".join(f"\n\ndef test_mul_{i}():\n    assert mul({i}, 1) == {i}\n" for i in range(4))
    )
    commit(project)
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    ran: list[str] = []
    for shard in ("1/2", "2/2"):
        result = pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "-v",
            "--accel-map",
            "map.db",
            "--accel-select=changed",
            "--accel-shard",
            shard,
        )
        ran += [
            line.split(" ")[0]
            for line in result.stdout.lines
            if line.endswith("]") and "PASSED" in line
        ]
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed", 0) in (2, 3)  # 5 selected, split in two
    assert sorted(ran) == sorted(
        ["tests/test_ops.py::test_mul", *(f"tests/test_ops.py::test_mul_{i}" for i in range(4))]
    )


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_selection_under_xdist_decides_alike_in_every_worker(
    project: Path, pytester: pytest.Pytester, mapped: Run
) -> None:
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-n", "2", "--accel-map", "map.db", "--accel-select=changed"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*selection (changed): 1 of 4 test(s) run; 3 deselected*"])


# -- valves ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "valve"),
    [
        (
            lambda root: (root / "conftest.py").write_text("X = 1\n"),
            "conftest: conftest.py changed",
        ),
        (
            lambda root: (root / "pyproject.toml").write_text(
                (root / "pyproject.toml").read_text() + "# touched\n"
            ),
            "packaging: the build or configuration changed: pyproject.toml",
        ),
        (
            lambda root: (root / "pkg" / "table.csv").write_text("a,b\n"),
            "data: a file that is not Python, which no mapped test read, changed: pkg/table.csv",
        ),
    ],
    ids=["conftest", "packaging", "data"],
)
def test_a_change_the_map_cannot_attribute_keeps_every_test(
    project: Path, mapped: Run, change: Callable[[Path], object], valve: str
) -> None:
    change(project)
    result = mapped()
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"selection kept every test: {valve}*"])


def _set_meta(path: Path, key: str, value: str) -> None:
    """The map's header and every test's own entry, as if mapped under ``value``."""
    per_test = {
        "updated": "UPDATE tests SET mapped = ?",
        "commit": "UPDATE snapshots SET commit_id = ?",
        "dependencies": "UPDATE snapshots SET dependencies = ?",
    }
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
        connection.execute(per_test[key], (value,))


def test_a_dependency_at_another_version_keeps_every_test(project: Path, mapped: Run) -> None:
    with closing(sqlite3.connect(project / "map.db")) as connection:
        (raw,) = connection.execute("SELECT value FROM meta WHERE key = 'dependencies'").fetchone()
    dependencies = json.loads(raw)
    dependencies["jax"] = "0.0.1"
    _set_meta(project / "map.db", "dependencies", json.dumps(dependencies))
    result = mapped()
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "selection kept every test: dependency: installed versions changed since the map:"
            " jax 0.0.1 -> *"
        ]
    )


def test_an_old_map_keeps_every_test(project: Path, mapped: Run) -> None:
    _set_meta(project / "map.db", "updated", "2020-01-01T00:00:00Z")
    result = mapped("--accel-map-max-age", "30")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["selection kept every test: age: the map is * days old (--accel-map-max-age 30)"]
    )


def test_a_map_of_a_commit_git_does_not_know_keeps_every_test(project: Path, mapped: Run) -> None:
    _set_meta(project / "map.db", "commit", "0" * 40)
    result = mapped()
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["selection kept every test: git: the changed files cannot be listed*"]
    )


@pytest.mark.parametrize(
    ("map_commit", "why"),
    [
        (
            "0" * 40,
            "git does not know the map's commit 000000000000 here: a shallow clone? fetch"
            " with fetch-depth: 0",
        ),
        ("", "the map records no commit"),
    ],
    ids=["unknown here", "none recorded"],
)
def test_a_base_ref_does_not_stand_in_for_the_maps_commit(
    project: Path, mapped: Run, map_commit: str, why: str
) -> None:
    """A shallow clone that fetched the base but not the map's commit (or a map made
    outside git): a conftest changed between them is in neither the diff against the
    base nor the checksums of the mapped code, so every test runs, and the line says
    why."""
    git(project, "checkout", "-q", "-b", "topic")
    (project / "tests" / "conftest.py").write_text("import pytest\n")
    commit(project, "a conftest, on main before the branch")
    _set_meta(project / "map.db", "commit", map_commit)
    result = mapped("--accel-changed-since", "topic")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [f"selection kept every test: git: the changed files cannot be listed ({why})"]
    )


def test_changed_since_a_base_ref_counts_what_the_branch_changed(
    project: Path, mapped: Run
) -> None:
    """A map of main, a branch that committed a change: the diff against the base
    (--accel-changed-since) and against the map's commit both count."""
    git(project, "checkout", "-q", "-b", "topic")
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    commit(project)
    result = mapped("--accel-changed-since", "main")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.no_fnmatch_line("*--accel-changed-since*")


def test_a_base_ref_git_does_not_know_is_said_in_every_output(
    project: Path, mapped: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference git does not know (a CI checkout has origin/main, not main) is not
    dropped in silence: the run counts what changed since the map's commit, which git
    knows, and says so in the terminal, the job summary, the record and the page."""
    git(project, "checkout", "-q", "-b", "topic")
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    commit(project)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project / "summary.md"))
    result = mapped("--accel-changed-since", "no-such-ref", "--perf-record=r.json")
    result.assert_outcomes(passed=1, deselected=3)  # the map's commit is known: it counts
    said = (
        "--accel-changed-since no-such-ref: git does not know it here (a CI checkout names"
        " a base origin/NAME); what changed is counted since the map's commit alone"
    )
    result.stdout.fnmatch_lines([f"selection: {said}"])
    assert said in (project / "summary.md").read_text()
    record = json.loads((project / "r.json").read_text())
    assert record["selection"]["notes"] == [said]
    assert main(["report", str(project / "r.json"), "-o", str(project / "page.html")]) == 0
    assert f"<li>{html.escape(said)}</li>" in (project / "page.html").read_text()


def test_a_map_made_outside_git_keeps_every_test_and_says_so(pytester: pytest.Pytester) -> None:
    """A source tree without its .git (a container image, an unpacked sdist): the map
    records no commit, and a selecting run there cannot list changes."""
    pytester.makepyfile(test_alone="def test_one():\n    pass\n")
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed"
    )
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "selection (changed): 1 of 1 test(s) run; map of an unknown commit, made just now",
            "selection kept every test: git: the changed files cannot be listed (git *",
        ]
    )


def test_no_map_yet_runs_every_test_and_says_so(project: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "absent.db", "--accel-select=changed"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["selection kept every test: map: no map at absent.db yet*"])


# -- bad input ------------------------------------------------------------------------


def _foreign(path: Path) -> None:
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE things (x)")


def _newer(path: Path) -> None:
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA user_version = 99")


def _damaged(path: Path) -> None:
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("DROP TABLE test_blocks")


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        (lambda p: p.write_bytes(b"not a database at all" * 100), "is not a pytest-accel map"),
        (_foreign, "is not a pytest-accel map"),
        (_newer, "is a version 99 map; this pytest-accel reads up to version 2"),
        (_damaged, "is a damaged map (missing: test_blocks)"),
    ],
    ids=["garbage", "foreign", "newer", "damaged"],
)
@pytest.mark.parametrize("select", [True, False], ids=["selecting", "mapping"])
def test_a_bad_map_stops_the_run_in_one_line(
    project: Path,
    pytester: pytest.Pytester,
    spoil: Callable[[Path], object],
    problem: str,
    select: bool,
) -> None:
    path = project / "map.db"
    if spoil in (_newer, _damaged):  # a real map, spoilt
        pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    spoil(path)
    before = path.read_bytes()
    extra = ["--accel-select=changed"] if select else [NO_PROGRAMS]
    result = pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith("ERROR: --accel-map: map.db: ")
    assert problem in errors[0]
    assert "Traceback" not in result.stderr.str()
    assert path.read_bytes() == before  # refused before any test, never rewritten


@pytest.mark.parametrize("other", ["record.json", "garbage.db"])
def test_merging_a_map_with_what_is_not_one_names_that_file(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], other: str
) -> None:
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    (project / "record.json").write_text('{"version": 4}')
    (project / "garbage.db").write_bytes(b"not a database at all")
    capsys.readouterr()
    assert main(["merge", "-o", "merged.db", "map.db", other]) == 2
    assert capsys.readouterr().err == (
        f"pytest-accel: error: {other}: not a map (a map is an SQLite file), while map.db is"
        " one: merge maps with maps and records with records\n"
    )
    assert not (project / "merged.db").exists()


def test_a_record_of_a_map_from_a_clock_ahead_is_read_by_every_command(
    project: Path, mapped: Run
) -> None:
    """A map written on a machine whose clock runs ahead is younger than 0 days when a
    run reads it: the record says so, and every command reads that record."""
    mapped("--perf-record=r.json").assert_outcomes(passed=0, deselected=4)
    record = json.loads((project / "r.json").read_text())
    record["selection"]["map"]["age_days"] = -0.002
    (project / "r.json").write_text(json.dumps(record))
    assert main(["selection", "r.json"]) == 0
    assert main(["report", "r.json", "-o", "page.html"]) == 0
    assert main(["merge", "-o", "merged.json", "r.json"]) == 0


def test_programs_mode_needs_the_head_map(project: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--accel-map", "map.db", "--accel-select=programs")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-select=programs needs --accel-map-head PATH*"])


# -- what it saved, shadow mode, the budget -------------------------------------------


def test_the_record_coverage_report_and_job_summary_say_what_selection_did(
    project: Path, pytester: pytest.Pytester, mapped: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = project / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    result = mapped(
        "--perf-record", "record.json", "--accel-report", "report.html", "--accel-price", "*=3600"
    )
    result.assert_outcomes(passed=1, deselected=3)
    record = json.loads((project / "record.json").read_text())
    section = record["selection"]
    assert section["mode"] == "changed"
    assert list(section["kept"]) == ["tests/test_ops.py::test_mul"]
    assert sorted(section["deselected"]) == [
        "tests/test_ops.py::test_add",
        "tests/test_ops.py::test_box",
        "tests/test_ops.py::test_nothing",
    ]
    assert section["map"]["branch"] == "main"
    assert "pytest-accel selection" in summary.read_text()
    assert "selection (changed): 1 of 4 test(s) run" in summary.read_text()
    assert "3 deselected; map of" in summary.read_text()
    page = (project / "report.html").read_text()
    assert "Change-aware selection" in page
    assert "deselected by change: 3" in page


def test_coverage_counts_deselected_by_change_apart_from_skips(
    project: Path, mapped: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    mapped("--perf-record", "record.json").assert_outcomes(passed=1, deselected=3)
    capsys.readouterr()
    assert main(["coverage", "record.json"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 test(s) pass on" in out
    assert "3 deselected by change (not counted)" in out
    assert "0 skipped otherwise" in out


def test_shadow_mode_runs_everything_and_names_a_failure_it_would_have_missed(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    # test_nothing fails for a reason no map sees: a file outside the rootdir
    outside = project.parent / f"{project.name}.broken"
    edit(
        project / "tests" / "test_ops.py",
        "def test_nothing():\n    assert True",
        "def test_nothing():\n    from pathlib import Path\n"
        f"    assert not Path({str(outside)!r}).exists()",
    )
    commit(project)
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    outside.write_text("")
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--accel-map",
        "map.db",
        "--accel-select=shadow",
        "--perf-record",
        "record.json",
    )
    result.assert_outcomes(passed=3, failed=1)  # everything ran
    result.stdout.fnmatch_lines(
        [
            "*selection (shadow): 1 of 4 test(s) would run; 3 would be deselected*",
            "shadow: 1 failing test(s) would have been deselected: tests/test_ops.py::test_nothing",
        ]
    )
    capsys.readouterr()
    assert main(["selection", "record.json", "--min-recall", "100"]) == 1
    out = capsys.readouterr().out
    assert "record.json: shadow: would run 1 of 4 test(s) (25.0%); 1 failed; MISSED 1:" in out
    assert "recall 0.0% (0 of 1 faulty shadow run(s))" in out


def test_a_budget_in_seconds_cuts_the_least_valuable_tests_for_the_nightly_bucket(
    project: Path, pytester: pytest.Pytester, mapped: Run
) -> None:
    pytester.runpytest("-p", "no:cacheprovider", "--perf-record", "r1.json")
    from pytest_accel.cli import main

    assert main(["baseline", "--into", "baseline.json", "r1.json"]) == 0
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    result = mapped(
        "--perf-baseline",
        "baseline.json",
        "--accel-select-budget",
        "0.000001s",
        "--accel-price",
        "*=3600",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(deselected=4)
    result.stdout.fnmatch_lines(
        [
            "*0 of 4 test(s) run; 2 deselected; 2 cut by the budget (the nightly bucket);"
            " map of *; * device-seconds ($*) not spent",
            "cut for the nightly bucket: tests/test_ops.py::test_add, tests/test_ops.py::test_mul",
        ]
    )


def test_the_commands_count_tests_the_budget_cut_as_cut(
    project: Path, pytester: pytest.Pytester, mapped: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.runpytest("-p", "no:cacheprovider", "--perf-record", "r1.json")
    assert main(["baseline", "--into", "baseline.json", "r1.json"]) == 0
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    budget = ("--accel-select-budget", "0.000001s", "--perf-baseline", "baseline.json")
    mapped(*budget, "--perf-record", "cut.json").assert_outcomes(deselected=4)
    capsys.readouterr()
    assert main(["coverage", "cut.json"]) == 0
    out = capsys.readouterr().out
    assert "1 cut by the budget (not counted)" in out
    assert "3 deselected by change (not counted)" in out
    assert main(["selection", "cut.json"]) == 0
    assert "ran 0 of 4 test(s) (0.0%); 1 cut by the budget" in capsys.readouterr().out


def test_a_budget_in_dollars_needs_a_price(project: Path, mapped: Run) -> None:
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    result = mapped("--accel-select-budget", "2.50")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-select-budget: an amount in USD needs a price*"])


def test_the_selection_command_reports_share_and_recall(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    def record(
        name: str, mode: str, kept: list[str], deselected: list[str], failed: list[str]
    ) -> None:
        data = json.loads((project / "base.json").read_text())
        data["selection"] = {
            "mode": mode,
            "kept": dict.fromkeys(kept, "changed"),
            "deselected": dict.fromkeys(deselected, "unchanged"),
            "cut": {},
            "valves": [],
            "failed": failed,
        }
        (project / name).write_text(json.dumps(data))

    pytester.runpytest("-p", "no:cacheprovider", "--perf-record", "base.json")
    record("caught.json", "shadow", ["a", "b"], ["c", "d"], ["a"])
    record("missed.json", "shadow", ["a"], ["b", "c", "d"], ["c"])
    record("fine.json", "changed", ["a"], ["b", "c", "d"], [])
    capsys.readouterr()
    code = main(["selection", "caught.json", "missed.json", "fine.json", "--min-recall", "100"])
    out = capsys.readouterr().out
    assert code == 1
    assert "missed.json: shadow: would run 1 of 4 test(s) (25.0%); 1 failed; MISSED 1: c" in out
    assert "3 run(s) with selection: 33.3% of the tests run on average" in out
    assert "recall 50.0% (1 of 2 faulty shadow run(s))" in out
    assert main(["selection", "caught.json", "--min-recall", "100"]) == 0


# -- programs -------------------------------------------------------------------------

JOPS = """\
import jax
import jax.numpy as jnp


@jax.jit
def scale(x):
    return x * 2.0


def total(x):
    return jnp.sum(scale(x))
"""

JTESTS = """\
import jax.numpy as jnp

from pkg.jops import scale, total


def test_total():
    assert float(total(jnp.ones(3))) == 6.0


def test_scale():
    assert float(scale(jnp.ones(2))[0]) == 2.0
"""


@pytest.mark.requires("jax")
def test_programs_mode_runs_the_tests_whose_compiled_programs_changed(
    project: Path, pytester: pytest.Pytester
) -> None:
    (project / "pkg" / "jops.py").write_text(JOPS)
    (project / "tests" / "test_jax.py").write_text(JTESTS)
    commit(project)
    base = ["-p", "no:cacheprovider"]
    first = run_jax_suite(pytester, *base, "--accel-map", "base.db")
    first.assert_outcomes(passed=6)
    first.stdout.fnmatch_lines(
        ["*dependency map of 6 test(s) written to base.db*compiled program(s))"]
    )
    with closing(open_map(project / "base.db")) as connection:
        programs = read_run(connection, "base.db").programs
    assert {p.platform for p in programs["tests/test_jax.py::test_total"]} == {"cpu"}
    assert any("scale" in p.name for p in programs["tests/test_jax.py::test_scale"])
    assert "tests/test_ops.py::test_add" not in programs

    # A host-side change that lowers to the same programs: nothing for the device tier.
    edit(
        project / "pkg" / "jops.py",
        "    return jnp.sum(scale(x))",
        "    y = x\n    return jnp.sum(scale(y))",
    )
    commit(project)
    run_jax_suite(pytester, *base, "--accel-map", "head.db").assert_outcomes(passed=6)
    against_head = [*base, "--accel-map", "base.db", "--accel-map-head", "head.db"]
    same = run_jax_suite(pytester, *against_head, "--accel-select=programs")
    same.assert_outcomes(deselected=6)
    changed = run_jax_suite(pytester, *base, "--accel-map", "base.db", "--accel-select=changed")
    changed.assert_outcomes(passed=1, deselected=5)  # its code changed: test_total

    # A change to what is computed: every test that compiles the program runs.
    edit(project / "pkg" / "jops.py", "return x * 2.0", "return x * 2.0 + 0.0 * x")
    commit(project)
    (project / "head.db").unlink()
    run_jax_suite(pytester, *base, "--accel-map", "head.db").assert_outcomes(passed=6)
    result = run_jax_suite(pytester, *against_head, "-v", "--accel-select=programs")
    result.assert_outcomes(passed=2, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "kept tests/test_jax.py::test_scale: changed since the map of *:"
            " program jit_scale changed (cpu, *)",
            "deselected tests/test_ops.py::test_add: its compiled programs are unchanged since*",
        ]
    )


@pytest.mark.requires("jax")
def test_a_jitted_function_is_mapped_to_every_test_that_calls_it_in_one_process(
    project: Path, pytester: pytest.Pytester
) -> None:
    """The second test hits the jit cache the first filled: JAX's caches are cleared
    before each test, so both trace the function, and a serial map equals an xdist one."""
    (project / "pkg" / "jops.py").write_text(JOPS)
    (project / "tests" / "test_jax.py").write_text(
        "import jax.numpy as jnp\n\nfrom pkg.jops import scale\n\n\n"
        "def test_first():\n    assert float(scale(jnp.ones(2))[0]) == 2.0\n\n\n"
        "def test_second():\n    assert float(scale(jnp.ones(2))[1]) == 2.0\n"
    )
    commit(project)
    run_jax_suite(
        pytester,
        "-p",
        "no:cacheprovider",
        "--accel-map",
        "map.db",
        NO_PROGRAMS,
        "tests/test_jax.py",
    ).assert_outcomes(passed=2)
    found = map_tests(project / "map.db")
    assert ("pkg/jops.py", "scale") in found["tests/test_jax.py::test_first"]
    assert ("pkg/jops.py", "scale") in found["tests/test_jax.py::test_second"]


def test_merged_shard_records_keep_the_one_decision_and_every_failure(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    edit(project / "pkg" / "ops.py", "return a * b", "return b * a")
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    for shard in ("1/2", "2/2"):
        pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "--accel-map",
            "map.db",
            "--accel-select=changed",
            "--accel-shard",
            shard,
            "--perf-record",
            f"shard{shard[0]}.json",
        )
    assert main(["merge", "-o", "merged.json", "shard1.json", "shard2.json"]) == 0
    merged = json.loads((project / "merged.json").read_text())["selection"]
    assert sorted(merged["kept"]) == ["tests/test_ops.py::test_add", "tests/test_ops.py::test_mul"]
    assert len(merged["deselected"]) == 2
    capsys.readouterr()
    assert main(["selection", "merged.json"]) == 0
    assert "merged.json: changed: ran 2 of 4 test(s) (50.0%)" in capsys.readouterr().out


def test_a_branch_selects_from_the_map_of_its_nearest_commit_in_the_store(
    project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mapping run on main sends its map as its commit's; a branch that forked
    after it fetches that map (the nearest commit the store has) and selects from it;
    a commit from before any map finds none, and says what to do."""
    store = str(project.parent / f"{project.name}-store")  # outside the checkout
    first = git(project, "rev-parse", "HEAD").strip()
    edit(project / "pkg" / "ops.py", "return a + b", "return b + a")
    commit(project, "before the map")
    pytester.runpytest("-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS)
    mapped_at = git(project, "rev-parse", "HEAD").strip()
    assert main(["store", "push-map", "map.db", "--to", store]) == 0
    (project / "map.db").unlink()
    git(project, "checkout", "-q", "-b", "feature")
    edit(project / "pkg" / "ops.py", "return a * b", "return a * b * 1")
    commit(project, "feature work")
    capsys.readouterr()
    assert main(["store", "pull-map", store, "-o", "map.db"]) == 0
    said = capsys.readouterr().out
    assert f"map.db: the map of {mapped_at[:12]} (1 commit(s) before HEAD)" in said
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed", "-v"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kept tests/test_ops.py::test_mul: changed since the map of *"])
    assert main(["store", "pull-map", store, "-o", "old.db", "--ref", first]) == 2
    assert "no map of" in capsys.readouterr().err


def test_with_a_store_the_runs_send_and_fetch_the_map_themselves(
    project: Path, pytester: pytest.Pytester
) -> None:
    """--accel-store beside --accel-map: the mapping run sends its map as its commit's,
    a selecting run whose map file is not there fetches the nearest one; a store with
    no map of its commits leaves the selection without one (every test runs), said."""
    store = f"--accel-store={project.parent / f'{project.name}-store'}"
    cold = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed", store
    )
    cold.assert_outcomes(passed=4)
    cold.stdout.fnmatch_lines(["store: *: no map of HEAD or of the 0 commit(s) before it *"])
    (project / "map.db").unlink(missing_ok=True)
    mapping = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "map.db", NO_PROGRAMS, store
    )
    mapping.stdout.fnmatch_lines(["store: the dependency map of * sent to *"])
    (project / "map.db").unlink()
    git(project, "checkout", "-q", "-b", "feature")
    edit(project / "pkg" / "ops.py", "return a * b", "return a * b * 1")
    commit(project, "feature work")
    selecting = pytester.runpytest(
        "-p", "no:cacheprovider", "--accel-map", "map.db", "--accel-select=changed", store
    )
    selecting.assert_outcomes(passed=1)
    selecting.stdout.fnmatch_lines(
        ["store: the map of * (1 commit(s) before HEAD) fetched to map.db"]
    )
