from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
