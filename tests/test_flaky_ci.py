"""Flaky tests the way CI users ask for them: Surefire's JUnit elements, a rerun budget
shared by xdist workers, the mass-failure guard, rerun filters and delay, new tests run
several times, one sentence per test, and the plugin and the CLI agreeing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_accel import cli
from pytest_accel.cli.flaky import history_inputs
from pytest_accel.flaky.classify import analysis
from pytest_accel.flaky.history import load_history

SERIAL_AND_XDIST = pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-p", "xdist", "-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)

# Flaky through a counter file beside the test: fails its first `FAIL_FIRST` attempts.
COUNTED = """
import os, pathlib, pytest

def attempt(name):
    state = pathlib.Path(__file__).with_name(name + ".count")
    n = int(state.read_text()) if state.exists() else 0
    state.write_text(str(n + 1))
    return n
"""

JUNIT_SUITE = (
    COUNTED
    + """
def test_flaky_call():
    print("attempt output")
    assert attempt("call") >= 1, "fails the first time"

@pytest.fixture
def shaky():
    if attempt("setup") < 1:
        raise RuntimeError("setup fails the first time")

def test_flaky_setup(shaky):
    pass

def test_always_fails():
    raise ValueError("always <broken> & bad")
"""
)


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("seconds", "warnings")}


def cases(path: Path) -> dict[str, ET.Element]:
    return {str(c.get("name")): c for c in ET.parse(path).iter("testcase")}


@SERIAL_AND_XDIST
@pytest.mark.processes
def test_junit_keeps_each_failed_attempt_as_surefire_does(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_j=JUNIT_SUITE)
    result = pytester.runpytest_inprocess("--flaky-reruns=2", "--junitxml=junit.xml", *workers)
    assert result.ret == 1  # test_always_fails
    found = cases(pytester.path / "junit.xml")
    assert sorted(found) == ["test_always_fails", "test_flaky_call", "test_flaky_setup"]

    call = found["test_flaky_call"]
    assert [child.tag for child in call if child.tag != "properties"] == ["flakyFailure"]
    flaky = call.find("flakyFailure")
    assert flaky is not None
    assert flaky.get("message") == "AssertionError: fails the first time"
    assert flaky.get("type") == "AssertionError"
    trace = flaky.findtext("stackTrace") or ""
    assert 'assert attempt("call") >= 1' in trace
    assert "attempt output" in (flaky.findtext("system-out") or "")

    setup = found["test_flaky_setup"]
    assert [c.tag for c in setup if c.tag != "properties"] == ["flakyError"]
    assert setup.find("flakyError").get("type") == "RuntimeError"  # type: ignore[union-attr]

    broken = found["test_always_fails"]
    tags = [c.tag for c in broken if c.tag not in ("properties", "system-out", "system-err")]
    assert tags == ["failure", "rerunFailure", "rerunFailure"]
    for rerun in broken.iter("rerunFailure"):
        assert rerun.get("type") == "ValueError"
        assert rerun.get("message") == "ValueError: always <broken> & bad"
    # Readers that know only <failure> still see the flaky tests pass.
    assert call.find("failure") is None
    assert setup.find("error") is None


ALWAYS_FAILING = (
    "import pytest\n@pytest.mark.parametrize('i', range({n}))\ndef test_f(i): assert {fail}"
)


@SERIAL_AND_XDIST
@pytest.mark.processes
def test_the_rerun_budget_is_shared_by_every_worker_and_says_when_it_ran_out(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(ALWAYS_FAILING.format(n=6, fail="False"))
    result = pytester.runpytest_inprocess(
        "--flaky-reruns=3", "--flaky-rerun-budget=4", "--flaky-mass-failure=100", *workers
    )
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 6
    assert outcomes["rerun"] == 4  # not 18: all workers together
    # How many asked once it was gone depends on how the workers interleaved.
    result.stdout.fnmatch_lines(
        ["rerun budget: 4 of 4 rerun(s) used; it ran out: * failure(s) were not rerun"]
    )
    assert not list(Path(pytester.path).glob("*.json"))  # the budget file is not here


@SERIAL_AND_XDIST
@pytest.mark.processes
def test_a_mass_failure_stops_reruns_and_the_history_learns_nothing_from_it(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(ALWAYS_FAILING.format(n=60, fail="False"))
    result = pytester.runpytest_inprocess("--flaky-reruns=2", "--flaky-history=h.json", *workers)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 60
    # Reruns stop once 20 tests ran in a process and more than 30% failed: each process
    # reruns at most its first 19 failures twice.
    processes = 2 if workers else 1
    assert outcomes.get("rerun", 0) <= 2 * 19 * processes < 2 * 60
    result.stdout.fnmatch_lines(
        [
            "mass failure: 60 of 60 test(s) (100%) failed: reruns stopped, and the history"
            " infers no flakiness from this run"
        ]
    )
    env = load_history(pytester.path / "h.json").envs["cpu/x1"]
    assert env.runs[-1]["mass_failure"] is True
    assert env.tests == {}  # no outcome of this run counts
    report = analysis(history_inputs([str(pytester.path / "h.json")], None))
    assert report["envs"]["cpu/x1"]["mass_failure_runs"] == 1


FILTER_SUITE = (
    COUNTED
    + """
def test_network():
    if attempt("net") < 1:
        raise ConnectionError("reset by peer")

def test_logic():
    assert attempt("logic") >= 1, "wrong answer"
"""
)


@pytest.mark.parametrize(
    ("option", "flaky", "failed"),
    [
        ("--flaky-only-rerun=ConnectionError", "test_network", "test_logic"),
        ("--flaky-rerun-except=^AssertionError: wrong", "test_network", "test_logic"),
        ("--flaky-only-rerun=wrong answer", "test_logic", "test_network"),
    ],
)
def test_rerun_filters_match_the_exception_type_and_message(
    pytester: pytest.Pytester, option: str, flaky: str, failed: str
) -> None:
    pytester.makepyfile(test_filters=FILTER_SUITE)
    result = pytester.runpytest("--flaky-reruns=1", option)
    assert outcomes(result) == {"failed": 1, "rerun": 1, "flaky": 1}
    result.stdout.fnmatch_lines([f"FLAKY test_filters.py::{flaky} (2 attempts: failed, passed)"])
    result.stdout.fnmatch_lines([f"FAILED test_filters.py::{failed} - *"])


def test_filters_in_the_ini_and_a_bad_pattern(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_filters=FILTER_SUITE)
    pytester.makeini("[pytest]\nflaky_only_rerun =\n    Timeout\n    ConnectionError\n")
    assert outcomes(pytester.runpytest("--flaky-reruns=1"))["rerun"] == 1
    result = pytester.runpytest("--flaky-reruns=1", "--flaky-rerun-except=([")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --flaky-rerun-except: '([' is not a regular expression*"])


def test_the_rerun_delay_waits_before_each_rerun(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)  # the reruns' time.sleep
    pytester.makepyfile(ALWAYS_FAILING.format(n=2, fail="False"))
    result = pytester.runpytest("--flaky-reruns=2", "--flaky-rerun-delay=0.25")
    assert outcomes(result) == {"failed": 2, "rerun": 4}
    assert slept == [0.25] * 4


NEW_SUITE = (
    COUNTED
    + """
def test_old():
    attempt("old")

def test_new_and_shaky():
    assert attempt("new") % 3 != 1, "every third run fails"
"""
)


@SERIAL_AND_XDIST
@pytest.mark.processes
def test_a_new_test_runs_several_times_and_mixed_outcomes_make_it_flaky(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_n=COUNTED + "\ndef test_old():\n    attempt('old')\n")
    pytester.runpytest("--flaky-history=h.json").assert_outcomes(passed=1)
    for count in Path(pytester.path).glob("*.count"):
        count.unlink()
    pytester.makepyfile(test_n=NEW_SUITE)
    result = pytester.runpytest_inprocess(
        "--flaky-history=h.json", "--flaky-new-runs=3", "--junitxml=j.xml", *workers
    )
    assert result.ret == 0
    assert outcomes(result) == {"passed": 1, "rerun": 1, "flaky": 1}
    result.stdout.fnmatch_lines(
        [
            "NEW AND FLAKY test_n.py::test_new_and_shaky"
            " (a new test, ran 3 times: passed, failed, passed)",
            "new tests: 1 ran 3 times each (--flaky-new-runs); 1 of them flaky",
        ]
    )
    assert (pytester.path / "new.count").read_text() == "3"
    assert (pytester.path / "old.count").read_text() == "1"  # known: run once
    letters = load_history(pytester.path / "h.json").envs["cpu/x1"].tests
    assert letters["test_n.py::test_new_and_shaky"] == "K"
    case = cases(pytester.path / "j.xml")["test_new_and_shaky"]
    assert len(list(case.iter("flakyFailure"))) == 1
    # Known now: the next run runs it once.
    pytester.runpytest("--flaky-history=h.json", "--flaky-new-runs=3")
    assert (pytester.path / "new.count").read_text() == "4"


@SERIAL_AND_XDIST
@pytest.mark.processes
def test_a_new_test_that_passes_every_run_is_a_pass_not_flaky_and_passes_the_gate(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_n=COUNTED + "\ndef test_old():\n    attempt('old')\n")
    pytester.runpytest("--flaky-history=h.json").assert_outcomes(passed=1)
    pytester.makepyfile(
        test_n=COUNTED + "\ndef test_old():\n    attempt('old')\n"
        "\ndef test_new():\n    attempt('new')\n"
    )
    result = pytester.runpytest_inprocess(
        "--flaky-history=h.json",
        "--flaky-new-runs=3",
        "--flaky-max-pct=5",
        "--flaky-report=r.json",
        *workers,
    )
    assert result.ret == 0
    assert outcomes(result) == {"passed": 2}
    result.stdout.no_fnmatch_line("*NEW AND FLAKY*")
    result.stdout.fnmatch_lines(
        [
            "new tests: 1 ran 3 times each (--flaky-new-runs); 0 of them flaky",
            "flaky: 0 of 2 test(s) (0.00%) on cpu*--flaky-max-pct 5: within",
        ]
    )
    assert (pytester.path / "new.count").read_text() == "3"
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["run"]["flaky"] == []
    assert load_history(pytester.path / "h.json").envs["cpu/x1"].tests["test_n.py::test_new"] == "P"


def test_new_runs_need_a_history(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--flaky-new-runs=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --flaky-new-runs needs --flaky-history PATH*"])
    # A history with no run yet makes nothing new: a first run runs each test once.
    pytester.runpytest("--flaky-history=h.json", "--flaky-new-runs=3").assert_outcomes(passed=1)


def history_file(path: Path, tests: dict[str, str]) -> None:
    runs = max(len(letters) for letters in tests.values())
    path.write_text(
        json.dumps(
            {
                "schema": "pytest-accel/flaky-history",
                "version": 1,
                "window": 50,
                "envs": {
                    "cpu/x1": {
                        "platform": "cpu",
                        "runs": [{"started": "2026-11-01T00:00:00Z"}] * runs,
                        "tests": tests,
                    }
                },
            }
        )
    )


def test_each_test_gets_one_status_and_one_sentence(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_s="def test_quarantined_and_shaky(): pass\ndef test_quarantined_and_steady(): pass\n"
    )
    history_file(
        pytester.path / "h.json",
        {
            "test_s.py::test_quarantined_and_shaky": "PFPPFPPFPPP",
            "test_s.py::test_quarantined_and_steady": "PPPPPPPPPPP",
        },
    )
    (pytester.path / "q.txt").write_text(
        "test_s.py::test_quarantined_and_shaky  # JIRA-1\n"
        "test_s.py::test_quarantined_and_steady  # JIRA-2\n"
    )
    result = pytester.runpytest("--flaky-history=h.json", "--flaky-quarantine=q.txt")
    out = result.stdout.str()
    shaky = [line for line in out.splitlines() if "test_quarantined_and_shaky" in line]
    assert shaky == [
        "quarantined, keep it: test_s.py::test_quarantined_and_shaky passed this run, but is"
        " flaky across 12 run(s) (failed 3)"
    ]
    steady = [line for line in out.splitlines() if "test_quarantined_and_steady" in line]
    assert steady == [
        "passed while quarantined, candidate for removal: test_s.py::test_quarantined_and_steady"
    ]


def test_the_plugin_and_the_cli_agree_on_a_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(
        test_a=COUNTED + "\ndef test_flaky():\n    assert attempt('f') >= 1\n"
        "def test_fine():\n    pass\n"
    )
    result = pytester.runpytest("--flaky-reruns=1", "--perf-record=r.json")
    result.stdout.fnmatch_lines(["flaky: 1 of 2 test(s) (50.00%) on cpu: 1 in this run"])
    capsys.readouterr()
    assert cli.main(["flaky", str(pytester.path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "0 flaky across runs, 0 broken; 1 flaky in the last run (passed on a rerun)" in out
    assert "flaky_pct cpu: 50.00%" in out


def test_max_pct_says_why_on_the_last_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=COUNTED + "\ndef test_flaky():\n    assert attempt('f') >= 1\n")
    result = pytester.runpytest("--flaky-reruns=1", "--flaky-max-pct=2")
    assert result.ret == 1
    assert result.outlines[-1] == (
        "pytest-accel: exit status 1: the flaky share 100.00% on cpu is over --flaky-max-pct 2"
    )


SUBTESTS_SUITE = (
    COUNTED
    + """
import unittest

class TestCase(unittest.TestCase):
    def test_subtest_once(self):
        first = attempt("unittest") == 0
        for i in range(3):
            with self.subTest(i=i):
                self.assertFalse(first and i == 1, "fails the first time")

def test_fixture_once(subtests):
    first = attempt("fixture") == 0
    for i in range(3):
        with subtests.test(i=i):
            assert not (first and i == 2), "fails the first time too"

def test_fixture_always(subtests):
    for i in range(2):
        with subtests.test(i=i):
            assert i == 0, "always"

def test_plain():
    pass
"""
)
PYTEST_9 = pytest.mark.skipif(
    int(pytest.__version__.split(".")[0]) < 9, reason="subtests are built in from pytest 9"
)


@PYTEST_9
@SERIAL_AND_XDIST
@pytest.mark.processes
def test_a_failed_subtest_is_rerun_as_its_test_and_a_superseded_attempts_subtests_vanish(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """A subtest reports while its test's call runs, and the call itself passes: such a
    failure was never tried again, and a failure on every attempt read as flaky."""
    pytester.makepyfile(test_subtests=SUBTESTS_SUITE)
    result = pytester.runpytest(
        "--flaky-reruns=2",
        "--perf-record=r.json",
        "--flaky-history=h.json",
        "--junitxml=junit.xml",
        "-p",
        "no:randomly",
        "-q",  # the tally counts subtests where it is short
        *workers,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The failing subtest and its test fail, as pytest counts them; the superseded
    # attempts' subtests are not counted: 3 + 3 + 1 passed, once each.
    assert outcomes(result) == {
        "failed": 2,
        "passed": 1,
        "subtests": 7,  # "7 subtests passed", as parseoutcomes reads it
        "rerun": 4,
        "flaky": 2,
    }
    result.stdout.fnmatch_lines_random(
        [
            "FLAKY test_subtests.py::TestCase::test_subtest_once (2 attempts: failed, passed)",
            "FLAKY test_subtests.py::test_fixture_once (2 attempts: failed, passed)",
            "FAILED test_subtests.py::test_fixture_always - contains 1 failed subtest",
        ]
    )
    assert "FLAKY test_subtests.py::test_fixture_always" not in result.stdout.str()
    letters = load_history(pytester.path / "h.json").envs["cpu/x1"].tests
    assert letters == {
        "test_subtests.py::TestCase::test_subtest_once": "K",
        "test_subtests.py::test_fixture_once": "K",
        "test_subtests.py::test_fixture_always": "F",
        "test_subtests.py::test_plain": "P",
    }
    tests = json.loads((pytester.path / "r.json").read_text())["tests"]
    attempts = {test: [a["outcome"] for a in runs] for test, runs in tests["attempts"].items()}
    assert attempts == {
        "test_subtests.py::TestCase::test_subtest_once": ["failed", "passed"],
        "test_subtests.py::test_fixture_once": ["failed", "passed"],
        "test_subtests.py::test_fixture_always": ["failed", "failed", "failed"],
    }
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    names = {case.get("name") for case in suite.iter("testcase")}
    assert names >= {"test_subtest_once", "test_fixture_once", "test_fixture_always"}


@PYTEST_9
def test_a_new_tests_runs_hold_their_subtests_and_one_failing_makes_that_run_failed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_subtests=SUBTESTS_SUITE)
    pytester.runpytest("--flaky-history=h.json", "-k", "test_plain").assert_outcomes(passed=1)
    result = pytester.runpytest(
        "--flaky-history=h.json", "--flaky-new-runs=3", "-p", "no:randomly", "-q"
    )
    assert outcomes(result)["subtests"] == 7  # the logged run's subtests only
    result.stdout.fnmatch_lines_random(
        [
            "NEW AND FLAKY test_subtests.py::TestCase::test_subtest_once (a new test, ran 3"
            " times: failed, passed, passed)",
            "NEW AND FLAKY test_subtests.py::test_fixture_once (a new test, ran 3 times:"
            " failed, passed, passed)",
            "FAILED test_subtests.py::test_fixture_always - contains 1 failed subtest",
        ]
    )
