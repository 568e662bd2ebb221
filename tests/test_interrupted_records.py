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
