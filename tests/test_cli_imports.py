"""The command line tool imports no pytest: a tenth of a second, often more, of every
command's time (docs/architecture.md says how the shared modules keep it out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Modules that only some commands need, each a few milliseconds to import.
WATCHED = (
    "pytest_accel.hardware.detection",
    "pytest_accel.perf.formats.merge",
    "pytest_accel.flaky.history",
    "subprocess",
    "tempfile",
)
# Runs one command in a fresh interpreter, then says whether pytest got imported.
PROBE = f"""
import json, os, sys
WATCHED = {WATCHED!r}
from pytest_accel.cli import main
code = main(sys.argv[1:])
tasks = "/proc/self/task"
print(json.dumps({{
    "code": code,
    "pytest": "pytest" in sys.modules,
    "numpy": "numpy" in sys.modules,
    "loaded": sorted(m for m in WATCHED if m in sys.modules),
    "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    "threads": len(os.listdir(tasks)) if os.path.isdir(tasks) else None,
}}))
"""


def probe(args: list[str], cwd: Path) -> dict[str, Any]:
    """The command run in a fresh interpreter, without a BLAS setting of its own; what
    the process held after it, and its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
        env=env,
    )
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    outcome["stderr"] = done.stderr
    return outcome


def run_fresh(args: list[str], cwd: Path) -> tuple[int, bool, str]:
    outcome = probe(args, cwd)
    return outcome["code"], outcome["pytest"], outcome["stderr"]


@pytest.fixture
def files(pytester: pytest.Pytester) -> Path:
    """A record, a baseline of it and a flaky history, from a real run."""
    pytester.makepyfile(
        test_a="""
        class TestGroup:
            def test_one(self): pass
            def test_two(self): pass
        def test_three(): pass
        """
    )
    common = ["-p", "no:xdist", "--flaky-history=history.json", "--perf-baseline=baseline.json"]
    pytester.runpytest(*common, "--perf-update-baseline").assert_outcomes(passed=3)
    pytester.runpytest(*common, "--perf-record=record.json").assert_outcomes(passed=3)
    return pytester.path


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "record.json", "--baseline", "baseline.json", "--format", "json"],
        ["baseline", "record.json", "--into", "folded.json"],
        ["upgrade", "baseline.json"],
        ["merge", "record.json", "-o", "merged.json"],
        ["flaky", "history.json", "--format", "json"],
        ["shard", "--durations", "baseline.json", "--splits", "2", "--without-collecting"],
        ["report", "record.json", "--baseline", "baseline.json", "-o", "report.html"],
    ],
    ids=lambda args: args[0],
)
@pytest.mark.processes
def test_a_command_that_reads_files_runs_without_importing_pytest(
    files: Path, args: list[str]
) -> None:
    code, imported, stderr = run_fresh(args, files)
    assert (code, stderr) == (0, "")
    assert imported is False


@pytest.mark.processes
def test_a_bad_option_value_is_still_one_line_and_exit_2_in_a_fresh_process(files: Path) -> None:
    """The shared parsers raise pytest's UsageError, importing pytest only then: the
    tool must still catch it as bad input, not show a traceback."""
    code, _, stderr = run_fresh(
        ["compare", "record.json", "--baseline", "baseline.json", "--threshold", "0.5"], files
    )
    assert code == 2
    assert stderr == (
        "pytest-accel: error: --threshold: '0.5' is below 1; a regression is a ratio above 1\n"
    )


@pytest.mark.processes
def test_a_command_that_loads_numpy_starts_no_blas_threads(files: Path) -> None:
    """No command multiplies matrices: OpenBLAS's pool would only spin on the other
    cores, so the tool asks for one thread while it runs, unless the user set a number,
    and gives the caller of ``main`` its environment back."""
    outcome = probe(["baseline", "record.json", "--into", "folded.json"], files)
    assert (outcome["code"], outcome["stderr"]) == (0, "")
    assert outcome["numpy"] is True  # the fold summarises the samples with numpy
    assert outcome["blas_threads"] is None
    if outcome["threads"] is not None:  # Linux: the process's threads, all of them
        assert outcome["threads"] == 1  # OpenBLAS would start one per core past the first


@pytest.mark.processes
def test_compare_imports_neither_detection_nor_the_other_commands_modules(files: Path) -> None:
    """`compare` reads two files and prints: detection, merging, the flaky history, a
    subprocess or a temp file are other commands' (a few milliseconds each, every time)."""
    outcome = probe(["compare", "record.json", "--baseline", "baseline.json"], files)
    assert (outcome["code"], outcome["stderr"]) == (0, "")
    assert outcome["loaded"] == []
    merged = probe(["merge", "record.json", "-o", "merged.json"], files)
    assert "pytest_accel.perf.formats.merge" in merged["loaded"]  # the probe sees what is loaded
