"""An interrupted run (exit status 2: Ctrl-C, SIGTERM) holds a part of the suite: the
commands add nothing of it to a baseline or a history, and say so; a merge that
includes one is marked interrupted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main

PASSING = "import time\ndef test_a(): time.sleep(0.002)\ndef test_b(): time.sleep(0.002)\n"


def records(pytester: pytest.Pytester) -> tuple[Path, Path]:
    pytester.makepyfile(test_run=PASSING)
    pytester.runpytest("--perf-record=done.json").assert_outcomes(passed=2)
    data: dict[str, Any] = json.loads((pytester.path / "done.json").read_text())
    data["run"]["exitstatus"] = 2
    (pytester.path / "cut.json").write_text(json.dumps(data))
    return pytester.path / "done.json", pytester.path / "cut.json"


def test_baseline_adds_only_the_finished_run_and_names_the_interrupted_one(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    done, cut = records(pytester)
    capsys.readouterr()  # the runs that made them
    into = pytester.path / "b.json"
    assert main(["baseline", str(cut), str(done), "--into", str(into)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"pytest-accel: note: {cut}: not added: an interrupted run (exit status 2) adds nothing\n"
    )
    assert captured.out.startswith(f"{into}: added 1 run(s)")
    assert len(json.loads(into.read_text())["envs"]["cpu/x1"]["runs"]) == 1
    # Only an interrupted run: nothing added, no baseline made.
    assert main(["baseline", str(cut), "--into", str(pytester.path / "new.json")]) == 0
    assert "added 0 run(s)" in capsys.readouterr().out
    assert not (pytester.path / "new.json").exists()


def test_merge_marks_the_result_interrupted_so_it_is_never_folded(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    done, cut = records(pytester)
    capsys.readouterr()  # the runs that made them
    merged = pytester.path / "m.json"
    assert main(["merge", "-o", str(merged), str(done), str(cut)]) == 0
    assert f"{cut}: an interrupted run (exit status 2): the merged record is marked" in (
        capsys.readouterr().err
    )
    assert json.loads(merged.read_text())["run"]["exitstatus"] == 2
    assert main(["baseline", str(merged), "--into", str(pytester.path / "b.json")]) == 0
    assert "added 0 run(s)" in capsys.readouterr().out


def test_flaky_reads_no_outcome_of_an_interrupted_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    done, cut = records(pytester)
    capsys.readouterr()  # the runs that made them
    assert main(["flaky", str(done), str(cut), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert f"{cut}: not read: an interrupted run (exit status 2)" in captured.err
    report = json.loads(captured.out)
    assert report["envs"]["cpu/x1"]["runs"] == 1


INTERRUPTED_IN_A_TEST = """
import os, signal

def test_a():
    pass

def test_b():
    # Python ignores Ctrl-C in a process started with SIGINT ignored (a shell's
    # background job): this run's own, whoever started the suite.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while test_b runs

def test_c():
    pass
"""


@pytest.mark.parametrize("runner", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.processes
def test_the_test_running_when_the_run_was_interrupted_is_interrupted_not_passed(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], runner: list[str]
) -> None:
    """It once read as passed (its setup had passed), and ``coverage --min-pct 100`` then
    passed on the partial record with exit status 0."""
    if runner:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_cut=INTERRUPTED_IN_A_TEST)
    result = pytester.runpytest_subprocess(
        "--perf-record=r.json", "--accel-min-coverage=10", "-p", "no:randomly", *runner
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # In the run: the gate is not judged on a part of the suite, and says so.
    result.stdout.fnmatch_lines(
        ["coverage: *; --accel-min-coverage 10: not judged (an interrupted run)"]
    )
    record = json.loads((pytester.path / "r.json").read_text())
    assert record["run"]["exitstatus"] == 2
    outcome = dict(zip(record["tests"]["id"], _expanded(record["tests"]["outcome"]), strict=True))
    # Serial: it was running when Ctrl-C came.  Under xdist the signal took its worker
    # down (crashed).  Never "passed".
    assert outcome["test_cut.py::test_b"] == ("crashed" if runner else "interrupted")
    capsys.readouterr()
    path = str(pytester.path / "r.json")
    # Offline, no gate passes on it either.
    assert main(["coverage", path, "--min-pct", "0"]) == 1
    out = capsys.readouterr().out
    assert "interrupted" in out
    assert "--min-pct 0: below on cpu/x1 (an interrupted run)" in out
    baseline = str(pytester.path / "b.json")
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline", "-k", "test_a")
    assert main(["compare", path, "--baseline", baseline, "--fail"]) == 1
    assert "interrupted: the run was interrupted (exit status 2)" in capsys.readouterr().out


def _expanded(column: Any) -> list[str]:
    """A record's outcome column, run-length encoded where it repeats."""
    if isinstance(column, dict):
        return [
            v for v, n in zip(column["values"], column["counts"], strict=True) for _ in range(n)
        ]
    return list(column)
