"""The ``pytest-accel`` command: every subcommand end to end, its help and its errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import synthetic
from pytest_accel.cli import build_parser, main
from tests.fakesys import FakeSys


def test_detect_json_prints_platform_count_kind_and_evidence(
    fakesys: FakeSys, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(fakesys.root)
    fakesys.add_nvidia(8, "NVIDIA H100 80GB HBM3")
    assert main(["detect", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["platform"] == "cuda"
    assert payload["device_count"] == 8
    assert payload["device_kind"] == "NVIDIA H100 80GB HBM3"
    assert "/dev/nvidia[0-9]*: 8 node(s)" in payload["evidence"]
    assert payload["probe"] is None


def test_detect_text_names_each_check(
    fakesys: FakeSys,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["detect"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("accel: cpu x1 via default")
    assert f"  rootdir: {tmp_path}" in out
    assert "  checked: /dev/accel*: 0 node(s)" in out


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_detect_with_the_jax_probe_runs_jax_for_real(fakesys: FakeSys) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_accel", "detect", "--json", "--probe", "jax"],
        capture_output=True,
        text=True,
        check=True,
        cwd=fakesys.root,
    )
    payload = json.loads(completed.stdout)
    assert payload["probe"]["ok"] is True
    assert payload["probe"]["platform"] == "cpu"
    assert payload["source"] == "default, confirmed by jax"


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_detect_probe_failure_exits_1_and_says_why(
    fakesys: FakeSys, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(fakesys.root)
    fakesys.add_tpu(4)
    assert main(["detect", "--probe", "jax"]) == 1
    out = capsys.readouterr().out
    assert "accel: tpu x4 (TPU v5 lite) via pci" in out
    assert "probe failed: JAX silently fell back to CPU instead of tpu" in out


def test_unknown_commands_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["frobnicate"])
    assert excinfo.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def write_record(path: Path, key: str, calls: dict[str, float], outcome: str = "passed") -> Path:
    path.write_text(json.dumps(synthetic.record(calls, key=key, outcome=outcome)))
    return path


def test_the_baselines_line_counts_every_test_its_first_of_the_process_too(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run's first test is sampled apart (its process's warm-up); it is still one of
    the tests the baseline holds, and the line says so."""
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass\ndef test_c(): pass\n")
    pytester.runpytest("--perf-record=r.json", "-p", "no:randomly").assert_outcomes(passed=3)
    into = pytester.path / "b.json"
    capsys.readouterr()  # the run's own output
    assert main(["baseline", "--into", str(into), str(pytester.path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert out == f"{into}: added 1 run(s); 3 test(s) under cpu/x1\n"
    env = json.loads(into.read_text())["envs"]["cpu/x1"]
    assert [test.partition("::")[2] for test in env["warmup"]] == ["test_a"]
    assert [test.partition("::")[2] for test in env["tests"]] == ["test_b", "test_c"]


def test_baseline_folds_records_and_compare_finds_the_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        write_record(
            tmp_path / f"r{i}.json",
            "cpu/x1",
            {"t.py::test_a": 0.20 + i * 0.002, "t.py::test_b": 0.5},
        )
        for i in range(5)
    ]
    assert main(["baseline", "--into", str(tmp_path / "b.json"), *map(str, records)]) == 0
    assert "added 5 run(s); 2 test(s) under cpu/x1" in capsys.readouterr().out
    slow = write_record(tmp_path / "now.json", "cpu/x1", {"t.py::test_a": 0.4, "t.py::test_b": 0.5})
    assert (
        main(["compare", str(slow), "--baseline", str(tmp_path / "b.json"), "--format", "json"])
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    # One cause, one alarm: the test doubled; its module and the suite grew by the same
    # 0.2 s, which the test explains, so they are not reported again.
    assert [(r["kind"], r["id"], r["samples"]) for r in payload["regressions"]] == [
        ("test", "t.py::test_a", 5)
    ]
    assert payload["changes"] == []
    assert payload["compared"] == 2
    assert main(["compare", str(slow), "--baseline", str(tmp_path / "b.json"), "--fail"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION test t.py::test_a: 0.400s vs baseline 0.204s" in out
    assert out.rstrip().endswith("-- failing the run (--fail)")  # its own option's name
    assert "--perf-fail" not in out
    assert (
        main(
            [
                "compare",
                str(slow),
                "--baseline",
                str(tmp_path / "b.json"),
                "--format",
                "markdown",
                "--threshold",
                "5",
            ]
        )
        == 0
    )
    assert "0 regression(s)" in capsys.readouterr().out


@pytest.mark.processes
def test_the_command_as_a_process_writes_all_its_output_and_keeps_its_status(
    tmp_path: Path,
) -> None:
    """``python -m pytest_accel`` (and the script) leaves without the interpreter's
    teardown (``cli.console_main``): its output must be out first, and its status kept."""
    tests = [f"t.py::test_{n}" for n in range(2_000)]
    records = [
        write_record(tmp_path / f"r{i}.json", "cpu/x1", dict.fromkeys(tests, 0.2 + i * 0.002))
        for i in range(3)
    ]
    assert main(["baseline", "--into", str(tmp_path / "b.json"), *map(str, records)]) == 0
    # Half of them 3x slower: not a slower runner, which would explain all of them.
    slowed = {test: 0.6 if n % 2 else 0.2 for n, test in enumerate(tests)}
    slow = write_record(tmp_path / "now.json", "cpu/x1", slowed)
    argv = [sys.executable, "-m", "pytest_accel", "compare", str(slow)]
    argv += ["--baseline", str(tmp_path / "b.json"), "--format", "json", "--fail"]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert completed.returncode == 1, completed.stderr
    assert len(completed.stdout) > 100_000  # far past a pipe's buffer and Python's
    found = json.loads(completed.stdout)["regressions"]
    assert len([f for f in found if f["kind"] == "test"]) == len(tests) // 2
    # A reader that went away before the output was written: one line, as for a full disk.
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as gone:
        detect = [sys.executable, "-m", "pytest_accel", "detect", "--json"]
        closed = subprocess.run(detect, stdout=gone, stderr=subprocess.PIPE, text=True, check=False)
    assert closed.returncode == 2
    assert closed.stderr == "pytest-accel: error: Broken pipe\n"


@pytest.mark.parametrize("set_by_the_user", [None, "4"])
def test_main_leaves_its_callers_environment_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, set_by_the_user: str | None
) -> None:
    """The command asks OpenBLAS for one thread while it runs, unless the user set a
    number (test_cli_imports reads it in the command's process), and a program that
    calls ``main`` gets its environment back as it was."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    if set_by_the_user is not None:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", set_by_the_user)
    record = write_record(tmp_path / "r.json", "cpu/x1", {"t.py::test_a": 0.2})
    assert main(["baseline", "--into", str(tmp_path / "b.json"), str(record)]) == 0
    assert os.environ.get("OPENBLAS_NUM_THREADS") == set_by_the_user


def test_compare_against_another_hardware_key_names_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tpu = write_record(tmp_path / "tpu.json", "tpu/TPU v4/x8", {"t.py::test_a": 0.2})
    assert main(["baseline", "--into", str(tmp_path / "b.json"), str(tpu)]) == 0
    cpu = write_record(tmp_path / "cpu.json", "cpu/x1", {"t.py::test_a": 0.9})
    capsys.readouterr()
    assert main(["compare", str(cpu), "--baseline", str(tmp_path / "b.json"), "--fail"]) == 0
    assert "has no timings for 'cpu/x1'; nothing compared (it has: tpu/TPU v4/x8)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("flag", ["--accel-key", "--env-key"])
def test_compare_under_another_key_takes_the_key_by_its_name_or_its_older_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    tpu = write_record(tmp_path / "tpu.json", "tpu/TPU v4/x8", {"t.py::test_a": 0.2})
    assert main(["baseline", "--into", str(tmp_path / "b.json"), str(tpu)]) == 0
    cpu = write_record(tmp_path / "cpu.json", "cpu/x1", {"t.py::test_a": 0.9})
    capsys.readouterr()
    args = ["compare", str(cpu), "--baseline", str(tmp_path / "b.json"), "--format=json"]
    assert main([*args, f"{flag}=tpu/TPU v4/x8"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["env"] == "tpu/TPU v4/x8"
    assert found["compared"] == 1  # the tpu key has the test: compared, not missing


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema": "pytest-accel/rec', "is not valid JSON"),
        ('{"schema": "other"}', "is not a pytest-accel record (schema 'other', expected"),
    ],
)
def test_bad_input_files_are_one_line_errors_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["compare", str(bad), "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-accel: error: {bad}: ")
    assert message in err
    assert err.count("\n") == 1
    assert main(["baseline", "--into", str(tmp_path / "b.json"), str(bad)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_bad_rule_options_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = write_record(tmp_path / "r.json", "cpu/x1", {"t.py::test_a": 0.2})
    assert main(["compare", str(record), "--baseline", str(record), "--threshold", "0.5"]) == 2
    assert "error: --threshold: '0.5' is below 1" in capsys.readouterr().err  # as typed
    with pytest.raises(SystemExit) as excinfo:
        main(["compare", str(record), "--baseline", str(record), "--normalize", "maybe"])
    assert excinfo.value.code == 2
    assert "argument --normalize: invalid choice: 'maybe'" in capsys.readouterr().err


@pytest.mark.processes
def test_detect_reads_the_rootdir_ini_and_says_what_the_pytest_header_says(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\naddopts = --accel-cpu-devices=8\n")
    pytester.makepyfile("def test_ok(): pass")
    header = next(
        line for line in pytester.runpytest_subprocess().outlines if line.startswith("accel:")
    )
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()  # pytester's own lines
    assert main(["detect"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == header
    assert header.startswith("accel: cpu x8 via")
    assert out[1] == f"  rootdir: {pytester.path}, configfile: tox.ini"
    # Options after -- go to pytest, as on its command line.
    assert main(["detect", "--", "--accel-cpu-devices=4"]) == 0
    assert capsys.readouterr().out.startswith("accel: cpu x4 via")


def test_detect_reports_an_ini_that_stops_pytest_in_one_line(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\naddopts = --accel-cpu-devices=lots\n")
    monkeypatch.chdir(pytester.path)
    assert main(["detect"]) == 2
    err = capsys.readouterr().err
    assert "--accel-cpu-devices" in err
    assert "pytest-accel: error: pytest stopped before detecting anything (exit status 4)" in err
    assert "Traceback" not in err


def test_the_tool_alone_prints_its_help_with_one_line_per_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands.choices:
        assert re.search(rf"^    {name} +\S.+$", out, re.MULTILINE), name
    assert "examples:" in out


def test_every_option_of_every_command_says_what_it_does_its_default_and_its_choices() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        assert parser.description, name
        assert (parser.epilog or "").startswith("example"), f"{name}: no example"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where}: no help"
            assert action.help != argparse.SUPPRESS, f"{where}: hidden"
            for choice in action.choices or ():
                assert str(choice) in action.help, f"{where}: choice {choice!r} not described"
            shown = action.default not in (None, False, [], argparse.SUPPRESS)
            if shown and action.option_strings:
                assert "default" in action.help, f"{where}: default {action.default!r} not given"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["shard", "--durations", "d.json", "--splits", "0"], "argument --splits"),
        (["flaky", "h.json", "--max-pct", "200"], "argument --max-pct"),
        (["compare", "r.json", "--baseline", "b.json", "--top", "x"], "argument --top"),
        (["merge", "r.json"], "-o/--output"),
    ],
)
def test_an_argument_error_names_the_flag_as_typed(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(argv)
    assert excinfo.value.code == 2
    assert named in capsys.readouterr().err
