"""The ``processes`` mark of the project's own tests stays true (tests/processes.py):
a test that starts a process other than git without it fails, naming itself, or the
fixture that started it; a fixture listed as starting processes marks its tests."""

from __future__ import annotations

import pytest

GENERATED = """
import subprocess, sys
import pytest

@pytest.fixture(scope="module")
def server():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.fixture(scope="module")
def unlisted():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_unmarked_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_unmarked_shell():
    subprocess.run("exit 0", shell=True, check=True)

def test_unmarked_multiprocessing():
    import multiprocessing
    multiprocessing.get_context("spawn").Process(target=print).start()

def test_unmarked_git():
    subprocess.run(["git", "--version"], check=True, capture_output=True)

@pytest.mark.processes
def test_marked_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_listed_fixture(server, request):
    assert request.node.get_closest_marker("processes") is not None

def test_unlisted_fixture(unlisted):
    pass
"""


@pytest.mark.processes  # its generated tests start Python, marked and through a fixture
def test_a_test_or_fixture_that_starts_a_process_unmarked_fails_saying_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import processes

    monkeypatch.setattr(processes, "PROCESS_FIXTURES", frozenset({"server"}))
    pytester.makepyfile(test_generated=GENERATED)
    result = pytester.inline_run("-p", "tests.processes")
    outcomes = {
        report.nodeid.rsplit("::", 1)[1]: report.outcome
        for report in result.getreports("pytest_runtest_logreport")
        if report.when == "call" or report.outcome != "passed"
    }
    assert outcomes == {
        "test_unmarked_python": "failed",
        "test_unmarked_shell": "failed",
        "test_unmarked_multiprocessing": "failed",
        "test_unmarked_git": "passed",
        "test_marked_python": "passed",
        "test_listed_fixture": "passed",
        "test_unlisted_fixture": "failed",  # at its setup
    }
    failures = {
        report.nodeid.rsplit("::", 1)[1]: report.longrepr.reprcrash.message  # type: ignore[union-attr]
        for report in result.getreports("pytest_runtest_logreport")
        if report.failed
    }
    assert failures["test_unmarked_python"] == "tests.processes.UnmarkedProcess: " + (
        "test_generated.py::test_unmarked_python starts a process (python) but is not marked"
        " @pytest.mark.processes (tests/processes.py says why)"
    )
    assert "starts a process (sh)" in failures["test_unmarked_shell"]
    assert "starts a process (python" in failures["test_unmarked_multiprocessing"]
    assert failures["test_unlisted_fixture"] == "tests.processes.UnmarkedProcess: " + (
        "fixture 'unlisted' starts a process (python) for"
        " test_generated.py::test_unlisted_fixture: add it to PROCESS_FIXTURES in"
        " tests/processes.py, which says why"
    )
