"""One file, one purpose: two options (or arguments) naming one file, one of them
writing it, are refused before anything runs; every writer of a shared file takes the
same lock, beside the file, whatever its environment; `merge --by-env` never writes two
keys to one file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import locking
from pytest_accel.cli import main
from pytest_accel.file_uses import FileUse, refuse_shared_files
from pytest_accel.files import InputError
from pytest_accel.locking import cache_subdir, exclusive_lock, lock_path
from tests.forked import Run, run_forked

PASSING = "def test_a(): pass\ndef test_b(): pass\n"


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def a_record(pytester: pytest.Pytester, name: str = "rec.json") -> Path:
    pytester.makepyfile(test_shared=PASSING)
    pytester.runpytest(f"--perf-record={name}").assert_outcomes(passed=2)
    return pytester.path / name


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["--perf-baseline=b.json", "--perf-update-baseline", "--accel-report=b.json"],
            "b.json: named by both --perf-baseline (read and rewritten) and --accel-report"
            " (written)*",
        ),
        (
            ["--flaky-history=h.json", "--flaky-report=h.json"],
            "h.json: named by both --flaky-history (read and rewritten) and --flaky-report*",
        ),
        (
            ["--perf-record=b.json", "--perf-baseline=b.json"],
            "b.json: named by both --perf-record (written) and --perf-baseline (read)*",
        ),
        (
            ["--perf-record=h.json", "--flaky-history=h.json"],
            "h.json: named by both --perf-record (written) and --flaky-history*",
        ),
        (
            ["--perf-baseline=b.json", "--junitxml=b.json"],
            "b.json: named by both --perf-baseline (read) and --junitxml (written)*",
        ),
        (
            ["--flaky-quarantine=q.txt", "--flaky-report=./q.txt"],
            "./q.txt: named by both --flaky-quarantine (read) and --flaky-report (written)*",
        ),
        # A trailing separator or '.' once slipped past the check, and the write landed
        # on the file itself (resolving drops them).
        (
            ["--flaky-history=h.json", "--accel-report=h.json/"],
            "h.json/: named by both --flaky-history (read and rewritten) and --accel-report*",
        ),
        (
            ["--flaky-history=h.json", "--accel-report=h.json/."],
            "h.json/.: named by both --flaky-history (read and rewritten) and --accel-report*",
        ),
        # pytest's own outputs: --log-file once emptied the baseline, --debug overwrote it.
        (
            ["--perf-baseline=b.json", "--log-file=b.json"],
            "b.json: named by both --perf-baseline (read) and --log-file (written)*",
        ),
        (
            ["--perf-baseline=b.json", "--debug=b.json"],
            "b.json: named by both --perf-baseline (read) and --debug (written)*",
        ),
        (
            ["--flaky-history=h.json", "-o", "log_file=h.json"],
            "h.json: named by both --flaky-history (read and rewritten) and --log-file*",
        ),
        (
            ["--perf-record=b.json//", "--perf-baseline=b.json"],
            "b.json: named by both --perf-record (written) and --perf-baseline (read)*",
        ),
    ],
)
def test_two_options_naming_one_file_stop_the_run_before_any_test_and_leave_it_alone(
    pytester: pytest.Pytester, args: list[str], named: str
) -> None:
    pytester.makepyfile(PASSING)
    for name in ("b.json", "h.json", "q.txt"):
        (pytester.path / name).write_text("precious\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {named}give each its own file"])
    result.stdout.no_fnmatch_line("*passed*")
    for name in ("b.json", "h.json", "q.txt"):
        assert (pytester.path / name).read_text() == "precious\n"


def test_a_symlink_and_a_hard_link_to_an_input_are_the_same_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    (pytester.path / "h.json").write_text("precious\n")
    (pytester.path / "soft.json").symlink_to("h.json")
    os.link(pytester.path / "h.json", pytester.path / "hard.json")
    for other in ("soft.json", "hard.json"):
        result = pytester.runpytest("--flaky-history=h.json", f"--flaky-report={other}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {other}: named by both --flaky-history*"])
    assert (pytester.path / "h.json").read_text() == "precious\n"


def test_a_baseline_updated_in_place_and_distinct_outputs_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest(
        "--perf-baseline=b.json",
        "--perf-update-baseline",
        "--perf-record=r.json",
        "--flaky-history=h.json",
        "--flaky-report=f.json",
        "--accel-report=page.html",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(passed=2)
    assert load(pytester.path / "b.json")["schema"] == "pytest-accel/baseline"


def test_the_check_is_pure_and_ignores_two_reads_of_one_file(tmp_path: Path) -> None:
    same = str(tmp_path / "x.json")
    refuse_shared_files([FileUse("RECORD", same, reads=True), FileUse("--baseline", same, True)])
    refuse_shared_files([FileUse("--into", same, reads=True, writes=True)] * 2)
    with pytest.raises(InputError, match=r"named by both RECORD \(read\) and -o \(written\)"):
        refuse_shared_files([FileUse("RECORD", same, reads=True), FileUse("-o", same, writes=True)])
    long_name = str(tmp_path / ("x" * 5000))  # too long for the OS: the path decides
    refuse_shared_files([FileUse("-o", long_name, writes=True)])


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{rec}", "-o", "{rec}"],
        ["report", "{rec}", "-o", "{rec}/"],
        ["report", "{rec}", "-o", "{rec}/."],
        ["merge", "-o", "{rec}/", "{rec}"],
        ["report", "--baseline", "{rec}", "-o", "{rec}"],
        ["flaky", "{rec}", "--write-quarantine", "{rec}"],
        ["baseline", "{rec}", "--into", "{rec}"],
        ["merge", "-o", "{rec}", "{rec}", "{rec}"],
    ],
)
def test_a_command_never_overwrites_its_own_input(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    record = a_record(pytester)
    before = record.read_bytes()
    assert main([part.format(rec=record) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "named by both" in err
    assert "give each its own file" in err
    assert record.read_bytes() == before


def test_merge_by_env_refuses_keys_that_come_to_one_file_and_writes_nothing(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    record = a_record(pytester)
    paths: list[str] = []
    for key in ("cpu/x1", "cpu_x1", "cpu:x1"):
        data = load(record)
        data["env"]["key"] = key
        path = pytester.path / f"r-{len(paths)}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    out = pytester.path / "out" / "merged.json"
    assert main(["merge", "--by-env", "-o", str(out), *paths]) == 2
    err = capsys.readouterr().err
    assert "hardware keys 'cpu/x1' and 'cpu_x1' both come to this file name" in err
    assert not [p for p in out.parent.glob("*") if not p.name.startswith(".")]
    # Distinct keys still write one file each.
    assert main(["merge", "--by-env", "-o", str(out), paths[0], *paths[2:]]) == 2
    data = load(record)
    data["env"]["key"] = "tpu/v5e/x8"
    Path(paths[1]).write_text(json.dumps(data))
    assert main(["merge", "--by-env", "-o", str(out), paths[0], paths[1]]) == 0
    written = sorted(p.name for p in out.parent.glob("merged.*.json"))
    assert written == ["merged.cpu_x1.json", "merged.tpu_v5e_x8.json"]


@pytest.mark.processes
def test_twenty_concurrent_writers_in_two_cache_directories_lose_no_run(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    record = load(a_record(pytester))
    records = []
    for index in range(20):
        record["run"]["started"] = f"2026-11-01T00:00:{index:02d}Z"
        record["run"]["id"] = f"{index:016x}"  # twenty runs, not one record twenty times
        path = tmp_path / f"r{index}.json"
        path.write_text(json.dumps(record))
        records.append(path)
    baseline = tmp_path / "state" / "baseline.json"
    commands = [  # twenty processes at once (tests/forked.py), each its own command
        Run(
            "cli",
            ["baseline", str(path), "--into", str(baseline)],
            tmp_path,
            {"PYTEST_ACCEL_CACHE_DIR": str(tmp_path / f"cache{index % 2}")},
        )
        for index, path in enumerate(records)
    ]
    finished = run_forked(commands, tmp_path / "forked")
    assert [command.code for command in finished] == [0] * 20, finished
    assert len(load(baseline)["envs"]["cpu/x1"]["runs"]) == 20
    # One lock, beside the file; no temp file left.
    assert sorted(p.name for p in baseline.parent.iterdir()) == [
        ".baseline.json.lock",
        "baseline.json",
    ]


def test_a_wait_for_the_lock_says_what_it_waits_for_and_gives_up_with_the_file_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "baseline.json"
    monkeypatch.setattr(locking, "WAIT_NOTICE_AFTER", 0.05)
    monkeypatch.setenv("PYTEST_ACCEL_LOCK_TIMEOUT", "0.4")
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with exclusive_lock(target):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(InputError) as caught, exclusive_lock(target):
            pass
        assert time.monotonic() - started >= 0.4
    finally:
        release.set()
        thread.join()
    assert str(caught.value).startswith(f"{target}: cannot be locked: another job held")
    assert "PYTEST_ACCEL_LOCK_TIMEOUT" in str(caught.value)
    assert f"waiting for {lock_path(target)}" in capsys.readouterr().err
    with exclusive_lock(target):  # free again once the holder is gone
        pass


@pytest.mark.processes
def test_a_command_waiting_on_a_held_lock_fails_in_one_line(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    record = a_record(pytester)
    baseline = tmp_path / "baseline.json"
    with exclusive_lock(baseline):
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest_accel",
                "baseline",
                str(record),
                "--into",
                str(baseline),
            ],
            env={**os.environ, "PYTEST_ACCEL_LOCK_TIMEOUT": "0.5"},
            capture_output=True,
            text=True,
            check=False,
        )
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"pytest-accel: error: {baseline}: cannot be locked: another job held"
        f" {lock_path(baseline)} for 0.5 seconds; if no job is running, another process has"
        " it open (or raise PYTEST_ACCEL_LOCK_TIMEOUT)"
    ]
    assert not baseline.exists()


def test_a_lock_file_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    elsewhere = tmp_path / "elsewhere"
    lock_path(target).symlink_to(elsewhere)
    with (
        pytest.raises(InputError, match=r"cannot be locked: .*: it is a link"),
        exclusive_lock(target),
    ):
        pass
    assert not elsewhere.exists()


def test_updates_leave_one_lock_per_file_however_often_they_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    state = pytester.mkdir("state")
    for _ in range(3):
        pytester.runpytest(
            "--perf-baseline=state/b.json",
            "--perf-update-baseline",
            "--flaky-history=state/h.json",
        ).assert_outcomes(passed=2)
    assert sorted(p.name for p in state.iterdir()) == [
        ".b.json.lock",
        ".h.json.lock",
        "b.json",
        "h.json",
    ]


def test_a_cache_directory_others_can_write_or_a_link_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    for directory in (shared, shared / "pytest-accel", shared / f"pytest-accel-{os.getuid()}"):
        directory.mkdir()
        directory.chmod(0o777)  # as a pre-created /tmp/pytest-accel-0 could be
    monkeypatch.setenv("PYTEST_ACCEL_CACHE_DIR", str(shared))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    private = cache_subdir("budgets")
    assert private == tmp_path / "xdg" / "pytest-accel" / "budgets"
    assert stat.S_IMODE(private.stat().st_mode) & 0o077 == 0
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path / "xdg" / "pytest-accel")
    monkeypatch.setenv("PYTEST_ACCEL_CACHE_DIR", str(linked))
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(shared))
    assert cache_subdir("budgets") is None


@pytest.mark.parametrize("path", ["out/", "out/.", "out/..", "new.json/"])
def test_an_output_path_that_ends_like_a_directory_is_refused_before_any_test(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    record = a_record(pytester)
    for option in ("--perf-record", "--accel-report", "--flaky-report", "--junitxml"):
        result = pytester.runpytest(f"{option}={path}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, option
        result.stderr.fnmatch_lines([f"ERROR: *{path}: ends like a directory*"])
        result.stdout.no_fnmatch_line("*passed*")
    assert main(["report", str(record), "-o", f"{pytester.path}/{path}"]) == 2
    assert "ends like a directory" in capsys.readouterr().err


def test_a_directory_given_for_an_output_is_answered_with_a_name_of_its_kind(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    record = a_record(pytester)
    (pytester.path / "out").mkdir()
    for args, example in (
        (["--perf-record=out"], "record.json"),
        (["--perf-baseline=out", "--perf-update-baseline"], "baseline.json"),
        (["--accel-report=out"], "report.html"),
        (["--flaky-report=out"], "flaky.json"),
    ):
        option = args[0].partition("=")[0]
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, option
        result.stderr.fnmatch_lines(
            [f"ERROR: {option}: out: is a directory; give a file path such as {example}"]
        )
    for command, example in (
        (["report", str(record), "-o"], "report.html"),
        (["baseline", str(record), "--into"], "baseline.json"),
        (["merge", str(record), "-o"], "record.json"),
        (["flaky", str(record), "--write-quarantine"], "quarantine.json"),
    ):
        assert main([*command, str(pytester.path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.endswith(f"out: is a directory; give a file path such as {example}\n"), err


@pytest.mark.parametrize("variable", ["GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"])
def test_a_file_github_appends_to_is_not_one_of_ours(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A job summary naming the baseline once got Markdown appended to it."""
    pytester.makepyfile(PASSING)
    (pytester.path / "b.json").write_text("precious\n")
    monkeypatch.setenv(variable, str(pytester.path / "b.json"))
    result = pytester.runpytest("--perf-baseline=b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: *b.json: named by both --perf-baseline (read) and {variable} (written)*"]
    )
    assert (pytester.path / "b.json").read_text() == "precious\n"


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "inf", "1_0"])
def test_a_bad_lock_timeout_is_refused_before_anything_runs(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str,
) -> None:
    """``abc``, ``-5`` and ``nan`` once meant 300 seconds without a word."""
    monkeypatch.setenv("PYTEST_ACCEL_LOCK_TIMEOUT", value)
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--flaky-history=h.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: PYTEST_ACCEL_LOCK_TIMEOUT: {value!r} is not a number of seconds*"]
    )
    assert not (pytester.path / "h.json").exists()
    assert main(["baseline", str(a_record_file(pytester)), "--into", "b.json"]) == 2
    assert "PYTEST_ACCEL_LOCK_TIMEOUT" in capsys.readouterr().err
    monkeypatch.setenv("PYTEST_ACCEL_LOCK_TIMEOUT", "0.5")
    pytester.runpytest("--flaky-history=h.json").assert_outcomes(passed=2)


def a_record_file(pytester: pytest.Pytester) -> Path:
    """A record written by hand (the plugin refuses to run with a bad lock timeout)."""
    from bench import synthetic

    path = pytester.path / "made.json"
    path.write_text(json.dumps(synthetic.record({"t.py::test_a": 0.1})))
    return path
