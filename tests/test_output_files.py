"""Output is never lost or silently failed: every output path is checked before the
first test, a write that fails at session end says so in one line and fails the run
(the old file stays as it was, the other files are still written), links stay links,
locks and temp files stay out of the user's directories, and SIGTERM and kill -9
leave valid files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.files import STALE_TEMP_SECONDS, TEMP_SUFFIX, write_atomic
from pytest_accel.locking import lock_path
from pytest_accel.perf.formats.record import check_record
from pytest_accel.perf.model.columns import decode

PASSING = "def test_a(): pass\ndef test_b(): pass\n"


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def files_beside(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


@pytest.mark.processes
def test_a_test_file_whose_name_is_not_utf8_is_written_as_python_shows_it(
    pytester: pytest.Pytester,
) -> None:
    name = os.fsencode(pytester.path) + b"/test_\xff.py"
    with open(name, "w", encoding="utf-8") as handle:
        handle.write(PASSING)
    # A process of its own: pytest writes the name's raw byte 0xff to its stdout.
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--perf-record=record.json",
            "--perf-baseline=baseline.json",
            "--perf-update-baseline",
            "--flaky-history=history.json",
            "--flaky-report=report.json",
        ],
        cwd=pytester.path,
        capture_output=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert b"2 passed" in completed.stdout
    escaped = "test_\\xff.py::test_b"
    assert escaped in load(pytester.path / "record.json")["tests"]["id"]
    assert escaped in load(pytester.path / "baseline.json")["envs"]["cpu/x1"]["tests"]
    assert escaped in load(pytester.path / "history.json")["envs"]["cpu/x1"]["tests"]
    assert load(pytester.path / "report.json")["run"]["tests"] == 2


FAILING_FSYNC = """
import errno, os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # The disk fills up just before the plugin writes: every fsync below FULL fails.
    full = os.path.realpath(os.environ["FULL"])
    real_fsync = os.fsync

    def fsync(fd):
        if os.path.realpath(f"/proc/self/fd/{fd}").startswith(full):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    os.fsync = fsync
"""


@pytest.mark.processes
def test_a_full_disk_at_session_end_fails_the_run_in_one_line_and_keeps_the_old_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(PASSING)
    full = pytester.mkdir("full")
    (full / "baseline.json").write_text(
        '{"schema": "pytest-accel/baseline", "version": 1, "envs": {}}', encoding="utf-8"
    )
    before = (full / "baseline.json").read_bytes()
    pytester.makeconftest(FAILING_FSYNC)
    monkeypatch.setenv("FULL", str(full))
    result = pytester.runpytest_subprocess(
        "--perf-record=full/record.json",
        "--perf-baseline=full/baseline.json",
        "--perf-update-baseline",
        "--flaky-history=history.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2)
    out = result.stdout.lines
    assert out[-2:] == [
        "pytest-accel: exit status 1: could not write the timing record full/record.json:"
        " No space left on device",
        "pytest-accel: exit status 1: could not update the baseline full/baseline.json:"
        " No space left on device",
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (full / "baseline.json").read_bytes() == before  # the old file, untouched
    assert not (full / "record.json").exists()
    # No temp file left behind; the baseline's lock stays beside it, for the next writer.
    assert files_beside(full) == {"baseline.json", ".baseline.json.lock"}
    assert load(pytester.path / "history.json")["envs"]["cpu/x1"]["tests"]  # still written
    assert "timing record of" not in result.stdout.str()  # it does not claim it wrote


@pytest.mark.parametrize(
    ("flag", "extra"),
    [
        ("--perf-record", []),
        ("--perf-baseline", ["--perf-update-baseline"]),
        ("--flaky-history", []),
        ("--flaky-report", []),
    ],
)
def test_every_output_path_is_checked_before_the_first_test(
    pytester: pytest.Pytester, flag: str, extra: list[str]
) -> None:
    pytester.makepyfile("def test_never_runs(): raise SystemExit('ran')")
    (pytester.path / "afile").write_text("")
    result = pytester.runpytest(f"{flag}=afile/out.json", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {flag}: afile/out.json: cannot be written: afile is not a directory"]
    )
    assert "collected" not in result.stdout.str()


def test_a_fifo_as_an_output_path_is_refused_before_the_first_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    os.mkfifo(pytester.path / "pipe.json")
    result = pytester.runpytest("--perf-record=pipe.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-record: pipe.json: is a FIFO, not a regular file*"])


def test_an_unwritable_job_summary_is_refused_before_the_first_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(PASSING)
    (pytester.path / "afile").write_text("")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "afile/summary.md"))
    result = pytester.runpytest("--flaky-report=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: GITHUB_STEP_SUMMARY: *cannot be written*"])


def test_a_symlinked_baseline_and_history_update_their_targets_and_stay_links(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    shared = pytester.mkdir("shared")
    (pytester.path / "link.json").symlink_to(shared / "base.json")  # dangling: created
    (pytester.path / "hist-link.json").symlink_to(Path("shared") / "hist.json")
    for _ in range(2):
        pytester.runpytest(
            "--perf-baseline=link.json",
            "--perf-update-baseline",
            "--flaky-history=hist-link.json",
        ).assert_outcomes(passed=2)
    assert (pytester.path / "link.json").is_symlink()
    assert (pytester.path / "hist-link.json").is_symlink()
    runs = load(shared / "base.json")["envs"]["cpu/x1"]["runs"]
    counts = [(len(decode(r["tests"])), len(decode(r["warmup"]))) for r in runs]
    assert counts == [(8, 8), (8, 8)]  # one 8-byte sample of each
    assert len(load(shared / "hist.json")["envs"]["cpu/x1"]["runs"]) == 2
    # One hidden lock beside each target, none beside the links, no temp file left.
    assert files_beside(shared) == {"base.json", "hist.json", ".base.json.lock", ".hist.json.lock"}
    assert not [n for n in files_beside(pytester.path) if n.endswith((".lock", ".tmp"))]


def test_a_link_and_its_target_share_one_lock_beside_the_target(tmp_path: Path) -> None:
    target = tmp_path / "base.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    lock = lock_path(Path(os.path.realpath(link)))
    assert lock == lock_path(target.resolve())
    assert lock == tmp_path / ".base.json.lock"


def test_stale_temp_files_of_ours_are_removed_and_fresh_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    stale = tmp_path / f".record.json.abc123{TEMP_SUFFIX}"
    fresh = tmp_path / f".record.json.def456{TEMP_SUFFIX}"
    someone_elses = tmp_path / ".record.json.ghi789.tmp"
    for path in (stale, fresh, someone_elses):
        path.write_text("partial")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(someone_elses, (old, old))
    write_atomic(target, [b"{}\n"])
    assert not stale.exists()
    assert fresh.exists()  # a writer may still be working on it
    assert someone_elses.exists()  # not ours
    assert target.read_text() == "{}\n"


KILLED_WRITER = """
import sys, time
from pytest_accel.files import write_atomic

def chunks():
    yield b'{"half": '
    print("writing", flush=True)
    time.sleep(60)
    yield b'"done"}'

write_atomic(sys.argv[1], chunks())
"""


@pytest.mark.processes
def test_kill_9_in_the_middle_of_a_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text('{"old": true}\n')
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True
    ) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "writing\n"
        writer.kill()
        writer.wait(timeout=30)
    assert json.loads(target.read_text()) == {"old": True}
    (leftover,) = [p for p in tmp_path.iterdir() if p.name.endswith(TEMP_SUFFIX)]
    assert f"-{writer.pid}." in leftover.name  # its writer, named
    # The next writer cleans up at once: the writer on this host is gone (it once
    # waited for the leftover to be an hour old).
    write_atomic(target, [b'{"new": true}\n'])
    assert files_beside(tmp_path) == {"record.json"}
    assert json.loads(target.read_text()) == {"new": True}


SLOW_SUITE = """
import pathlib, time

def test_quick():
    pass

def test_slow():
    pathlib.Path("started").write_text("")
    time.sleep(60)
"""


@pytest.mark.processes
def test_sigterm_ends_the_run_like_ctrl_c_records_what_ran_and_adds_nothing_to_history(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(SLOW_SUITE)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--perf-record=record.json",
            "--flaky-history=history.json",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (pytester.path / "started").exists():
        assert time.monotonic() < deadline, "the slow test never started"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == pytest.ExitCode.INTERRUPTED
    assert "KeyboardInterrupt" in out
    record = load(pytester.path / "record.json")
    assert record["run"]["exitstatus"] == pytest.ExitCode.INTERRUPTED
    tests = check_record("record.json", record)["tests"]  # a valid record, as it is read
    outcomes = {
        nodeid.rsplit("::", 1)[1]: outcome
        for nodeid, outcome in zip(tests["id"], tests["outcome"], strict=True)
    }
    assert outcomes["test_quick"] == "passed"
    assert not (pytester.path / "history.json").exists()  # an interrupted run adds nothing


def test_a_dangling_link_as_an_output_makes_no_directory_where_it_points(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """It once created the link target's missing parent directories, wherever they were."""
    pytester.makepyfile("def test_a(): pass\n")
    far = tmp_path / "elsewhere" / "deep" / "r.json"
    (pytester.path / "link.json").symlink_to(far)
    result = pytester.runpytest("--perf-record=link.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --perf-record: link.json: is a link to *r.json, whose directory does not exist*"]
    )
    assert not (tmp_path / "elsewhere").exists()
    # A dangling link into a directory that exists is written through, as before.
    far.parent.mkdir(parents=True)
    pytester.runpytest("--perf-record=link.json").assert_outcomes(passed=1)
    assert (pytester.path / "link.json").is_symlink()
    assert json.loads(far.read_text())["schema"] == "pytest-accel/record"
