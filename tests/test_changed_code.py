"""A slower test's alarm names the changed code it runs (issue 57): the functions that
differ between the run before the step and the first run at it, of those the
dependency map says the test ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_accel.perf.analysis.causes import CommitRange, changed_code_of, code_questions
from pytest_accel.perf.model.findings import Change, Comparison, Finding, TimingVerdict
from pytest_accel.perf.model.timings import RunIdentity
from pytest_accel.selection.suspects import changed_names, describe_block, innermost
from tests.test_change_selection import commit, edit, git, git_project

OPS = """\
import time


def work():
    time.sleep(0.05)  # a history a stall cannot widen (see SLOW)
    return 1


def idle():
    return 2


class Meter:
    @property
    def value(self):
        return 3

    @value.setter
    def value(self, new):
        pass
"""

TESTS = """\
from pkg import ops


def test_work():
    assert ops.work() == 1


def test_idle():
    assert ops.idle() == 2
"""

# Far above any rule's ratio and floor on a loaded runner: the finding cannot fail to come.
# The test slowed sleeps before too: a test of microseconds has a history of three runs
# that one 10 ms stall of a loaded runner widens (in log space) past a 0.4 s slowdown,
# as it once did at a load of 8.
SLOW = "time.sleep(0.4)\n    return 1"


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    return git_project(pytester.path, OPS, TESTS)


def _head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def _slow_down(root: Path) -> str:
    edit(root / "pkg" / "ops.py", "return 1", SLOW)
    commit(root, "slower work")
    return _head(root)


RUN = ("-p", "no:cacheprovider", "--perf-min-samples=1", "--accel-map-programs=off")


@pytest.mark.parametrize("selecting", [False, True], ids=["mapping run", "selecting run"])
def test_a_regression_names_the_changed_function_its_test_runs(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, selecting: bool
) -> None:
    summary = project / "summary.md"
    pytester.runpytest(*RUN, "--accel-map=map.db", "--perf-record=base.json").assert_outcomes(
        passed=2
    )
    base = _head(project)
    _slow_down(project)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    mode = ("--accel-select=changed",) if selecting else ()
    result = pytester.runpytest(
        *RUN, "--accel-map=map.db", *mode, "--perf-baseline=base.json", "--perf-record=now.json"
    )
    result.assert_outcomes(passed=1 if selecting else 2)
    result.stdout.fnmatch_lines(
        [
            "REGRESSION test tests/test_ops.py::test_work: *",
            f"  changed code it runs since {base[:12]}: pkg/ops.py:work",
        ]
    )
    result.stdout.no_fnmatch_line("*pkg/ops.py:idle*")
    result.stdout.fnmatch_lines(
        [f"::warning *::*test_work*changed code it runs since {base[:12]}: pkg/ops.py:work*"]
    )
    assert "| changed code it runs | test | pkg/ops.py:work | | | |" in summary.read_text()
    record = json.loads((project / "now.json").read_text())
    assert record["comparison"]["changed_code"] == [
        {
            "kind": "test",
            "id": "tests/test_ops.py::test_work",
            "since": base,
            "until": _head(project),
            "code": ["pkg/ops.py:work"],
        }
    ]


def test_without_a_map_the_regression_reads_as_before(
    project: Path, pytester: pytest.Pytester
) -> None:
    pytester.runpytest(*RUN, "--perf-record=base.json").assert_outcomes(passed=2)
    _slow_down(project)
    result = pytester.runpytest(*RUN, "--perf-baseline=base.json")
    result.stdout.fnmatch_lines(["REGRESSION test tests/test_ops.py::test_work: *"])
    result.stdout.no_fnmatch_line("*changed code*")


def test_a_slowdown_of_one_commit_names_no_code(
    project: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test slower at the commit its baseline ran: the runner moved, not the code."""
    (project / "tests" / "conftest.py").write_text(
        "import os, time\n\ndef pytest_runtest_call(item):\n"
        "    time.sleep(float(os.environ.get('EXTRA', '0')))\n"
    )
    commit(project, "a conftest")
    pytester.runpytest(*RUN, "--accel-map=map.db", "--perf-record=base.json").assert_outcomes(
        passed=2
    )
    monkeypatch.setenv("EXTRA", "0.4")
    result = pytester.runpytest(*RUN, "--accel-map=map.db", "--perf-baseline=base.json")
    result.stdout.fnmatch_lines(["REGRESSION test tests/test_ops.py::test_work: *"])
    result.stdout.no_fnmatch_line("*changed code*")


def test_same_named_definitions_and_nested_functions_are_told_apart(project: Path) -> None:
    base = _head(project)
    edit(project / "pkg" / "ops.py", "return 3", "return 4")  # the getter, not the setter
    assert changed_names(project, base, None) == {"pkg/ops.py": {"Meter.value"}}
    commit(project, "getter")
    getter = _head(project)
    edit(project / "pkg" / "ops.py", "pass", "self.x = new")
    commit(project, "setter")
    assert changed_names(project, base, getter) == {"pkg/ops.py": {"Meter.value"}}
    assert changed_names(project, getter, _head(project)) == {"pkg/ops.py": {"Meter.value#2"}}
    assert changed_names(project, "no-such-commit", None) == {}
    assert innermost(["f", "f.inner", "<import>", "Box"]) == ["Box", "f.inner", "<import>"]
    assert describe_block("a.py", "<import>") == "a.py (import-time code)"


def _identity(commit: str | None) -> RunIdentity:
    return RunIdentity(commit=commit)


def test_a_pending_regression_asks_for_the_commits_before_the_run_it_left_out() -> None:
    """Judged without the baseline's newest run (as slow, of this run's commit), a
    regression came between the run before that one and this one."""
    pending = Finding("test", "t.py::a", 0.1, 0.5, 5.0, 3, pending=True)
    plain = Finding("test", "t.py::b", 0.1, 0.5, 5.0, 3)
    comparison = Comparison("cpu/x1", TimingVerdict(regressions=[pending, plain]))
    questions = code_questions(
        comparison, run_commit="c3", baseline_commit="c3", before_newest="c1"
    )
    assert {key: q.between for key, q in questions.items()} == {("test", "t.py::a"): ("c1", "c3")}


def test_each_alarm_asks_for_the_commits_its_step_came_between() -> None:
    regression = Finding("test", "t.py::a", 0.1, 0.5, 5.0, 3)
    group = Finding("module", "t.py", 1.0, 2.0, 2.0, 3, movers=(("t.py::b", 0.4), ("t.py::c", 0.2)))
    change = Change("test", "t.py::d", 0.1, 0.3, 2, _identity("c2"), previous=_identity("c1"))
    same = Change("test", "t.py::e", 0.1, 0.3, 2, _identity("c2"), previous=_identity("c2"))
    unknown = Change("test", "t.py::f", 0.1, 0.3, 2, _identity("c2"))
    comparison = Comparison(
        "cpu/x1", TimingVerdict(regressions=[regression, group], changes=[change, same, unknown])
    )
    questions = code_questions(comparison, run_commit="c3", baseline_commit="c2")
    assert {key: (q.between, q.tests) for key, q in questions.items()} == {
        ("test", "t.py::a"): (("c2", "c3"), ("t.py::a",)),
        ("module", "t.py"): (("c2", "c3"), ("t.py::b", "t.py::c")),
        ("test", "t.py::d"): (("c1", "c2"), ("t.py::d",)),
    }
    answers: dict[CommitRange, dict[str, list[str]]] = {
        ("c2", "c3"): {
            "t.py::a": ["m.py:f"],
            "t.py::b": ["m.py:g", "m.py:f"],
            "t.py::c": ["m.py:h"],
        },
        ("c1", "c2"): {},
    }
    found = changed_code_of(questions, answers)
    assert {key: code.names for key, code in found.items()} == {
        ("test", "t.py::a"): ("m.py:f",),
        ("module", "t.py"): ("m.py:g", "m.py:f", "m.py:h"),
    }
    assert code_questions(comparison, run_commit=None, baseline_commit=None).keys() == {
        ("test", "t.py::d")
    }


def test_a_change_over_runs_names_the_code_changed_where_it_began(
    project: Path, pytester: pytest.Pytester
) -> None:
    history = ("--accel-map=map.db", "--perf-baseline=history.json", "--perf-update-baseline")
    for _ in range(3):
        pytester.runpytest(*RUN, *history).assert_outcomes(passed=2)
    base = _head(project)
    slower = _slow_down(project)
    first = pytester.runpytest(*RUN, *history)
    first.stdout.fnmatch_lines(
        [
            "REGRESSION test tests/test_ops.py::test_work: *",
            f"  changed code it runs since {base[:12]}: pkg/ops.py:work",
        ]
    )
    second = pytester.runpytest(*RUN, *history)  # pending: judged against the runs before
    second.stdout.fnmatch_lines(
        [
            "REGRESSION test tests/test_ops.py::test_work: * run left out: it was as slow*",
            f"  changed code it runs since {base[:12]}: pkg/ops.py:work",
        ]
    )
    third = pytester.runpytest(*RUN, *history)
    third.stdout.fnmatch_lines(
        [
            f"CHANGED test tests/test_ops.py::test_work: * since {slower[:12]}, 3 runs",
            f"  changed code it runs since {base[:12]}: pkg/ops.py:work",
        ]
    )
