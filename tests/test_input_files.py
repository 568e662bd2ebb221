"""Input is validated whole, where it is read: every consumer of a file (the plugin's
file options and every command of ``pytest-accel``) answers a broken file with one line
that names the file (and the field), exit 4 in pytest and 2 in the CLI, and never a
traceback, a hang or a crash; only regular files are read."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from pytest_accel.cli import main
from pytest_accel.perf.formats.record import RECORD_VERSION
from pytest_accel.perf.model.runlength import expanded

BROKEN_CONTENTS: dict[str, bytes] = {
    "truncated": b'{"schema": "pytest-accel/rec',
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "a list": b"[1, 2, 3]",
    "a string": b'"pytest-accel/record"',
    "NaN": b'{"schema": "pytest-accel/record", "version": 1, "tests": {"t": NaN}}',
    "Infinity": b'{"x": Infinity}',
    "deeply nested": b"[" * 2000 + b"]" * 2000,
    "a huge number": b'{"schema": "pytest-accel/record", "version": 1' + b"0" * 5000 + b"}",
    "not UTF-8": b'{"schema": "\xff\xfe"}',
}


def make_special(tmp_path: Path, kind: str) -> Path:
    """A path that is not a regular file, or that cannot be opened."""
    path = tmp_path / f"{kind}.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink loop":
        path.symlink_to(path)
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "nowhere.json")
    elif kind == "missing":
        pass
    return path


SPECIAL = ["fifo", "directory", "symlink loop", "dangling symlink", "missing"]


def valid_record(tmp_path: Path, name: str = "record.json", **changes: Any) -> Path:
    data = synthetic.record(
        {"t.py::TestA::test_one": 0.2, "t.py::test_two": 0.3},
        groups={"t.py::TestA::test_one": ("t.py::TestA", "t.py")},
    )
    data.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# Every consumer in the CLI, called with the broken file in one of its input places.
CLI_CONSUMERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "compare RECORD": lambda bad, good: ["compare", str(bad), "--baseline", str(good)],
    "compare --baseline": lambda bad, good: ["compare", str(good), "--baseline", str(bad)],
    "baseline RECORD": lambda bad, good: ["baseline", str(bad), "--into", str(good) + ".b"],
    "merge RECORD": lambda bad, good: ["merge", str(good), str(bad), "-o", str(good) + ".m"],
    "flaky FILE": lambda bad, good: ["flaky", str(bad)],
    "shard --durations": lambda bad, good: ["shard", "--durations", str(bad), "--splits", "2"],
}
PYTEST_CONSUMERS = ["--perf-baseline", "--flaky-quarantine", "--flaky-history"]


def assert_one_line_naming(err: str, path: Path, prefix: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix), err
    assert str(path) in lines[0] or path.name in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("consumer", list(CLI_CONSUMERS))
@pytest.mark.parametrize("content", list(BROKEN_CONTENTS))
def test_every_command_answers_broken_content_with_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], consumer: str, content: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(BROKEN_CONTENTS[content])
    good = valid_record(tmp_path)
    assert main(CLI_CONSUMERS[consumer](bad, good)) == 2
    assert_one_line_naming(capsys.readouterr().err, bad, "pytest-accel: error: ")


@pytest.mark.parametrize("consumer", list(CLI_CONSUMERS))
@pytest.mark.parametrize("kind", SPECIAL)
def test_every_command_refuses_what_is_not_a_regular_file_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], consumer: str, kind: str
) -> None:
    bad = make_special(tmp_path, kind)
    good = valid_record(tmp_path)
    assert main(CLI_CONSUMERS[consumer](bad, good)) == 2  # a FIFO would hang a reader
    assert_one_line_naming(capsys.readouterr().err, bad, "pytest-accel: error: ")


def test_a_character_device_is_refused_not_read_to_exhaustion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["flaky", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert "/dev/zero: is a character device, not a regular file" in err


@pytest.mark.parametrize("option", PYTEST_CONSUMERS)
@pytest.mark.parametrize("content", list(BROKEN_CONTENTS))
def test_every_file_option_answers_broken_content_with_exit_4_before_any_test(
    pytester: pytest.Pytester, option: str, content: str
) -> None:
    pytester.makepyfile("def test_never_runs(): raise SystemExit('ran')")
    (pytester.path / "bad.json").write_bytes(BROKEN_CONTENTS[content])
    result = pytester.runpytest(f"{option}=bad.json")
    if option == "--flaky-quarantine" and content == "empty":
        result.assert_outcomes(failed=1)  # an empty text list quarantines nothing: tests run
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert line.startswith(f"ERROR: {option}: bad.json: ")
    assert "Traceback" not in result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("option", PYTEST_CONSUMERS)
@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink loop"])
def test_every_file_option_refuses_what_is_not_a_regular_file(
    pytester: pytest.Pytester, option: str, kind: str
) -> None:
    pytester.makepyfile("def test_never_runs(): raise SystemExit('ran')")
    bad = make_special(pytester.path, kind)
    result = pytester.runpytest(f"{option}={bad.name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option}: {bad.name}: *"])


def test_a_symlink_to_a_good_file_is_read_like_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = valid_record(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert main(["compare", str(link), "--baseline", str(link)]) == 0
    assert "2 test(s) compared under cpu/x1" in capsys.readouterr().out


# --- every field of a record, with a wrong type ----------------------------------------

# (section, field) or (section, column, id): a column's entry for that id.
RECORD_FIELDS: list[tuple[str, ...]] = [
    ("run", "started"),
    ("run", "duration"),
    ("run", "commit"),
    ("run", "workers"),
    ("run", "exitstatus"),
    ("env", "key"),
    ("env", "platform"),
    ("env", "device_count"),
    ("env", "frameworks"),
    ("tests", "outcome", "t.py::test_two"),
    ("tests", "call", "t.py::test_two"),
    ("tests", "total", "t.py::test_two"),
    ("tests", "class", "t.py::test_two"),
    ("tests", "worker", "t.py::test_two"),
    ("tests", "attempts"),
    ("tests", "warmup"),
    ("classes", "total", "t.py::TestA"),
    ("classes", "whole", "t.py::TestA"),
    ("modules", "tests", "t.py"),
]
WRONG_VALUES: list[Any] = [["passed"], {"a": 1}, "x", True, -1, 1e300]


def mutated_record(tmp_path: Path, field: tuple[str, ...], value: Any) -> Path:
    data = json.loads(valid_record(tmp_path).read_text())
    if len(field) == 3:  # a column's entry
        section, column, ident = field
        entries = data[section][column]
        if isinstance(entries, dict):  # runs of equal values: as the list they stand for
            entries = data[section][column] = expanded(entries["values"], entries["counts"])
        entries[data[section]["id"].index(ident)] = copy.deepcopy(value)
    else:
        data[field[0]][field[1]] = copy.deepcopy(value)
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def valid_for(field: tuple[str, ...], value: Any) -> bool:
    """The wrong-looking values a record legitimately holds: any string names a
    commit, a class, a worker, a hardware key or a platform; any integer is an exit
    status."""
    name = field[1]
    if name in ("commit", "class", "worker", "key", "platform") and isinstance(value, str):
        return True
    if name == "whole" and isinstance(value, bool):
        return True
    return name == "exitstatus" and isinstance(value, int) and not isinstance(value, bool)


@pytest.mark.parametrize("consumer", ["compare RECORD", "baseline RECORD", "merge RECORD"])
@pytest.mark.parametrize("field", RECORD_FIELDS, ids=".".join)
def test_every_record_field_of_the_wrong_type_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    consumer: str,
    field: tuple[str, ...],
) -> None:
    for value in WRONG_VALUES:
        bad = mutated_record(tmp_path, field, value)
        good = valid_record(tmp_path, "good.json")
        code = main(CLI_CONSUMERS[consumer](bad, good))
        err = capsys.readouterr().err
        if consumer == "merge RECORD" and field[1] == "key" and isinstance(value, str):
            assert code == 2  # merge refuses two hardware keys, naming both files
            assert "different hardware" in err
            continue
        if valid_for(field, value):
            assert code == 0, err
            continue
        assert code == 2, f"{field}={value!r} was accepted"
        assert_one_line_naming(err, bad, "pytest-accel: error: ")
        assert f"{field[0]}.{field[1]}" in err, err


def test_an_outcome_that_is_a_list_is_named_by_every_consumer(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = mutated_record(pytester.path, ("tests", "outcome", "t.py::test_two"), ["passed"])
    expected = "tests.outcome['t.py::test_two']: expected one of crashed, error, failed"
    for args in (
        ["compare", str(bad), "--baseline", str(bad)],
        ["baseline", str(bad), "--into", str(pytester.path / "b.json")],
        ["shard", "--durations", str(bad), "--splits", "2"],
        ["flaky", str(bad)],
    ):
        assert main(args) == 2
        assert expected in capsys.readouterr().err
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(f"--perf-baseline={bad.name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    escaped = expected.replace("[", "[[]")
    result.stderr.fnmatch_lines([f"ERROR: --perf-baseline: mutated.json: {escaped}*"])


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ({"values": ["passed"], "counts": [3]}, "tests.outcome: runs of 3 entries for 2 ids"),
        ({"values": ["passed", "failed"], "counts": [2]}, "tests.outcome: 2 values for 1 counts"),
        (
            {"values": ["passed", "failed"], "counts": [2, 0]},
            "tests.outcome.counts: expected a whole number from 1, got 0",
        ),
        (
            {"values": ["passed", "passed"], "counts": [True, 1]},
            "tests.outcome.counts: expected a whole number from 1, got True",
        ),
        ({"values": ["passed"]}, "tests.outcome: expected a list, or runs as lists values and"),
        (
            {"values": ["passed", "bogus"], "counts": [1, 1]},
            "tests.outcome['t.py::test_two']: expected one of crashed, error, failed",
        ),
    ],
)
def test_a_column_of_runs_that_does_not_add_up_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: dict[str, Any], message: str
) -> None:
    data = json.loads(valid_record(tmp_path).read_text())
    data["tests"]["outcome"] = runs
    bad = tmp_path / "runs.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    assert main(["compare", str(bad), "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert_one_line_naming(err, bad, "pytest-accel: error: ")
    assert f"runs.json: {message}" in err


def test_a_version_2_record_of_lists_is_read_and_upgraded_to_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(valid_record(tmp_path).read_text())
    assert data["version"] == RECORD_VERSION
    assert data["tests"]["outcome"] == {"values": ["passed"], "counts": [2]}
    for name in ("outcome", "class", "module", "worker"):
        column = data["tests"][name]
        if isinstance(column, dict):
            data["tests"][name] = expanded(column["values"], column["counts"])
    data["version"] = 2
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    assert main(["compare", str(old), "--baseline", str(old)]) == 0
    assert "2 test(s) compared under cpu/x1" in capsys.readouterr().out
    assert main(["upgrade", str(old)]) == 0
    assert f"record version 2 -> {RECORD_VERSION}" in capsys.readouterr().out
    upgraded = json.loads(old.read_text())
    assert upgraded["version"] == RECORD_VERSION
    assert upgraded["tests"]["outcome"] == {"values": ["passed"], "counts": [2]}
    assert upgraded["tests"]["worker"] == {"values": [None], "counts": [2]}
    assert upgraded["tests"]["class"] == ["t.py::TestA", None]  # as runs, no shorter


def version_1_record() -> dict[str, Any]:
    """A record as version 1 wrote it: one object per test, class and module."""
    return {
        "schema": "pytest-accel/record",
        "version": 1,
        "run": {"started": "2026-11-01T00:00:00Z", "duration": 0.6, "workers": 0},
        "env": {"key": "cpu/x1", "platform": "cpu", "device_kind": "cpu", "device_count": 1},
        "tests": {
            "t.py::TestA::test_one": {
                "outcome": "passed",
                "setup": 0.01,
                "call": 0.2,
                "teardown": 0.01,
                "total": 0.22,
                "class": "t.py::TestA",
                "module": "t.py",
                "worker": None,
            },
            "t.py::test_two": {
                "outcome": "failed",
                "setup": 0.0,
                "call": 0.3,
                "teardown": 0.0,
                "total": 0.3,
                "class": None,
                "module": "t.py",
                "worker": None,
            },
        },
        "classes": {"t.py::TestA": {"tests": 1, "total": 0.22, "span": 0.22}},
        "modules": {"t.py": {"tests": 2, "total": 0.52, "span": 0.52}},
    }


def test_a_version_1_record_is_read_and_upgraded_to_the_current_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(version_1_record()), encoding="utf-8")
    baseline = tmp_path / "b.json"
    assert main(["baseline", str(old), "--into", str(baseline)]) == 0
    assert main(["compare", str(old), "--baseline", str(baseline)]) == 0
    assert "1 test(s) compared under cpu/x1" in capsys.readouterr().out  # the failed one not
    assert main(["upgrade", str(old)]) == 0
    assert f"record version 1 -> {RECORD_VERSION}" in capsys.readouterr().out
    upgraded = json.loads(old.read_text())
    assert upgraded["version"] == RECORD_VERSION
    tests = upgraded["tests"]
    assert tests["id"] == ["t.py::TestA::test_one", "t.py::test_two"]
    assert tests["call"] == [0.2, 0.3]
    assert tests["total"] == [0.22, 0.3]
    assert tests["outcome"] == ["passed", "failed"]
    assert tests["class"] == ["t.py::TestA", None]
    assert tests["module"] == {"values": ["t.py"], "counts": [2]}
    assert upgraded["classes"]["id"] == ["t.py::TestA"]
    assert upgraded["modules"]["total"] == [0.52]
    assert main(["compare", str(old), "--baseline", str(baseline)]) == 0  # read as before
    assert "1 test(s) compared under cpu/x1" in capsys.readouterr().out


@pytest.mark.parametrize("field", ["workers", "exitstatus", "duration"])
def test_merge_names_a_run_field_that_is_not_a_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    bad = mutated_record(tmp_path, ("run", field), "x")
    good = valid_record(tmp_path, "good.json")
    assert main(["merge", str(good), str(bad), "-o", str(tmp_path / "m.json")]) == 2
    assert f"mutated.json: run.{field}: expected" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_shard_names_a_class_that_is_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = mutated_record(tmp_path, ("tests", "class", "t.py::test_two"), ["t.py::TestA"])
    assert main(["shard", "--durations", str(bad), "--splits", "2"]) == 2
    assert "tests.class['t.py::test_two']: expected a string or null" in capsys.readouterr().err


def test_a_command_writing_where_it_cannot_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = valid_record(tmp_path)
    (tmp_path / "afile").write_text("")
    for args in (
        ["merge", str(good), "-o", str(tmp_path / "afile/m.json")],
        ["baseline", str(good), "--into", str(tmp_path / "afile/b.json")],
        ["flaky", str(good), "--write-quarantine", str(tmp_path / "afile/q.json")],
    ):
        assert main(args) == 2
        assert_one_line_naming(capsys.readouterr().err, tmp_path / "afile", "pytest-accel: error:")


# --- quarantine lists ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("q.txt", "a" * 300 + ".py::test\n", "q.txt: line 1: *is longer than any file name*"),
        ("q.txt", "t/" + "b" * 256 + "/t.py\n", "q.txt: line 1: *is longer than any file name*"),
        ("q.txt", "t.py::" + "x" * 5000 + "\n", "q.txt: line 1: *is 5006 characters long*"),
        ("q.txt", "t.py::test\tb\n", "q.txt: line 1: *contains a control character*"),
        ("q.json", '{"entries": [' * 2000, "q.json: *not valid JSON*"),
        (
            "q.json",
            '{"version": 1' + "0" * 5000 + ', "entries": []}',
            "q.json: is not valid JSON (*",
        ),
        ("q.json", '{"version": NaN, "entries": []}', "q.json: is not valid JSON (NaN*"),
        (
            "q.json",
            '{"version": 1, "entries": [{"test": "t.py::a\\n::error file=x::pwned"}]}',
            "q.json: line 1: entries[[]0]: *contains a control character*",
        ),
        (
            "q.json",
            '{"version": 1, "entries": [{"test": "t.py::a\\u2028b"}]}',
            "q.json: line 1: entries[[]0]: *contains a control character*",
        ),
    ],
)
def test_a_bad_quarantine_entry_is_refused_at_configure_naming_file_and_line(
    pytester: pytest.Pytester, name: str, content: str, message: str
) -> None:
    pytester.makepyfile("def test_never_runs(): raise SystemExit('ran')")
    (pytester.path / name).write_text(content, encoding="utf-8")
    result = pytester.runpytest(f"--flaky-quarantine={name}", "--perf-record=record.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --flaky-quarantine: {message}"])
    assert "Traceback" not in result.stderr.str()


# --- histories ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"started": 5}, "runs[[]0].started: expected str or null, got 5"),
        ({"exitstatus": "x"}, "runs[[]0].exitstatus: expected int, got 'x'"),
        ({"tests": True}, "runs[[]0].tests: expected int, got True"),
        ({"mass_failure": "yes"}, "runs[[]0].mass_failure: expected bool, got 'yes'"),
    ],
)
def test_a_history_run_with_a_wrong_field_is_named(
    pytester: pytest.Pytester, run: dict[str, Any], message: str
) -> None:
    history = {
        "schema": "pytest-accel/flaky-history",
        "version": 1,
        "envs": {"cpu/x1": {"runs": [run], "tests": {}}},
    }
    (pytester.path / "h.json").write_text(json.dumps(history), encoding="utf-8")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--flaky-history=h.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --flaky-history: h.json: envs[[]'cpu/x1'[]].{message}"])
