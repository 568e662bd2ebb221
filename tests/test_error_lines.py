"""An error is one short line that names what the user gave: a 100 KB value is cut, a
failed write names its target (never our temp file), an absurd setting is a usage error,
not an INTERNALERROR."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import pytest

from pytest_accel.cli import main
from pytest_accel.flaky.quarantine import MAX_QUARANTINE_BYTES

PASSING = "def test_a(): pass\ndef test_b(): pass\n"


def a_record(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(test_lines=PASSING)
    pytester.runpytest("--perf-record=rec.json").assert_outcomes(passed=2)
    return pytester.path / "rec.json"


def test_a_five_thousand_character_sysroot_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(PASSING)
    monkeypatch.setenv("PYTEST_ACCEL_SYSROOT", "/" + "a" * 5000)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: PYTEST_ACCEL_SYSROOT='/aaa*...' is not a directory: File name too long (*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    "option",
    ["--perf-threshold={}", "--perf-record={}/x.json", "--accel={}", "--flaky-quarantine={}"],
)
def test_a_hundred_kilobyte_value_is_cut_in_the_error_line(
    pytester: pytest.Pytester, option: str
) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest(option.format("9" * 100_000))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1
    assert errors[0].startswith("ERROR: ")
    assert len(errors[0]) <= 1100


def test_the_command_cuts_a_long_path_in_its_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / ("d/" * 3000)) + "r.json"
    assert main(["compare", missing, "--baseline", missing]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert len(err) < 1100
    assert "characters cut" in err
    assert err.rstrip().endswith("r.json: File name too long")


def no_space(fd: int) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("command", ["merge", "report", "upgrade"])
def test_a_full_disk_names_the_file_the_command_was_writing(
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    record = a_record(pytester)
    before = record.read_bytes()
    out = pytester.path / "out" / "target.out"
    argv = {
        "merge": ["merge", "-o", str(out), str(record)],
        "report": ["report", str(record), "-o", str(out)],
        "upgrade": ["upgrade", str(record)],
    }[command]
    named = record if command == "upgrade" else out
    monkeypatch.setattr(os, "fsync", no_space)
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"pytest-accel: error: {named}: No space left on device\n")
    assert record.read_bytes() == before
    leftovers = [p.name for p in pytester.path.rglob("*.pytest-accel.tmp")]
    assert leftovers == []


def test_upgrade_on_a_read_only_filesystem_names_the_file_not_a_temp_file(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    record = a_record(pytester)
    data = json.loads(record.read_text())
    data["version"] = 2  # an older record: upgrade rewrites it
    data["tests"] = {
        **data["tests"],
        **{name: ["passed", "passed"] for name in ("outcome",)},
        **{name: [None, None] for name in ("class", "worker")},
        "module": ["test_lines.py", "test_lines.py"],
    }
    record.write_text(json.dumps(data))

    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system", str(record) + ".x.pytest-accel.tmp")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    assert main(["upgrade", str(record)]) == 2
    assert capsys.readouterr().err == f"pytest-accel: error: {record}: Read-only file system\n"


def test_a_quarantine_list_over_sixteen_mebibytes_is_refused_before_it_is_read(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    with (pytester.path / "huge.txt").open("wb") as handle:
        handle.truncate(MAX_QUARANTINE_BYTES + 1)  # sparse: no disk, no memory
    result = pytester.runpytest("--flaky-quarantine=huge.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --flaky-quarantine: huge.txt: is {MAX_QUARANTINE_BYTES + 1} bytes, over the*"]
    )
