from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import synthetic
from pytest_accel.cli import main
from tests.fakesys import FakeSys


def test_detect_json_prints_platform_count_kind_and_evidence(
    fakesys: FakeSys, capsys: pytest.CaptureFixture[str]
) -> None:
    fakesys.add_nvidia(8, "NVIDIA H100 80GB HBM3")
    assert main(["detect", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["platform"] == "cuda"
    assert payload["device_count"] == 8
    assert payload["device_kind"] == "NVIDIA H100 80GB HBM3"
    assert "/dev/nvidia[0-9]*: 8 node(s)" in payload["evidence"]
    assert payload["probe"] is None


def test_detect_text_names_each_check(fakesys: FakeSys, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "accel: cpu x1 via default"
    assert "  checked: /dev/accel*: 0 node(s)" in out


@pytest.mark.requires("jax")
def test_detect_with_the_jax_probe_runs_jax_for_real(fakesys: FakeSys) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_accel", "detect", "--json", "--probe", "jax"],
        capture_output=True,
        text=True,
        check=True,
    )
    payload = json.loads(completed.stdout)
    assert payload["probe"]["ok"] is True
    assert payload["probe"]["platform"] == "cpu"
    assert payload["source"] == "default, confirmed by jax"


@pytest.mark.requires("jax")
def test_detect_probe_failure_exits_1_and_says_why(
    fakesys: FakeSys, capsys: pytest.CaptureFixture[str]
) -> None:
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
    assert "--perf-threshold: '0.5' is below 1" in capsys.readouterr().err
    assert main(["compare", str(record), "--baseline", str(record), "--normalize", "maybe"]) == 2
    assert (
        "--perf-normalize: invalid choice 'maybe' (choose from on, off)" in capsys.readouterr().err
    )
