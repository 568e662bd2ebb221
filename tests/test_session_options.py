"""The ``--accel`` options and the scale-out options, validated up front through a real
pytest config, and the hardware key every file is kept under.  (Their effect on real
runs is in test_selection.py, test_detection.py and test_scaling.py.)"""

from __future__ import annotations

import pytest

from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.facts import SessionFacts, hardware_key
from pytest_accel.hardware.options import PROBE_TIMEOUT, resolve_options, valid_accel_choices
from pytest_accel.scaleout.options import ScaleoutOptions
from pytest_accel.scaleout.options import resolve as resolve_scaleout
from tests.configs import parsed, usage_error


def test_the_choices_are_auto_the_builtin_platforms_families_and_registered_ones() -> None:
    choices = valid_accel_choices(["npu", "tpu"])
    assert choices[0] == "auto"
    assert {"cpu", "cuda", "rocm", "tpu", "gpu"} <= set(choices)
    assert choices[-1] == "npu"
    assert choices.count("tpu") == 1


def test_nothing_given_means_auto_with_the_defaults(pytester: pytest.Pytester) -> None:
    options = resolve_options(parsed(pytester), [])
    assert options.requested is None
    assert (options.allow_missing, options.only) == (False, False)
    assert (options.probe, options.probe_timeout) == ("auto", PROBE_TIMEOUT)
    assert options.cpu_devices is None
    assert options.emulate is None
    assert "gpu" in options.known_platforms
    assert "auto" not in options.known_platforms


def test_every_accel_option_is_read(pytester: pytest.Pytester) -> None:
    options = resolve_options(
        parsed(
            pytester,
            "--accel=TPU",
            "--accel-allow-missing",
            "--accel-only",
            "--accel-probe=none",
            "--accel-probe-timeout=2.5",
            "--accel-cpu-devices=8",
            "--accel-emulate=tpu:4:TPU v5 lite",
        ),
        [],
    )
    assert options.requested == "tpu"
    assert (options.allow_missing, options.only) == (True, True)
    assert (options.probe, options.probe_timeout, options.cpu_devices) == ("none", 2.5, 8)
    assert options.emulate == Detection(
        "tpu", 4, "TPU v5 lite", "emulated", ("--accel-emulate=tpu:4:TPU v5 lite",)
    )


def test_a_registered_platform_is_a_valid_choice(pytester: pytest.Pytester) -> None:
    assert resolve_options(parsed(pytester, "--accel=npu"), ["npu"]).requested == "npu"


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("--accel=tpux", "--accel: invalid choice 'tpux' (choose from auto, cpu, cuda, rocm"),
        ("--accel-probe=torch", "--accel-probe: invalid choice 'torch'"),
        ("--accel-probe-timeout=0", "--accel-probe-timeout: '0' is not a positive number"),
        ("--accel-cpu-devices=²", "--accel-cpu-devices: '²' is not a positive integer"),
        (
            "--accel-emulate=tpu:x",
            "--accel-emulate: invalid value 'tpu:x': device count 'x' is not a positive integer;"
            " expected PLATFORM[:COUNT[:KIND]]",
        ),
        ("--accel-emulate=gpu:2", "--accel-emulate: invalid value 'gpu:2': unknown platform"),
    ],
)
def test_a_bad_accel_value_is_a_usage_error_that_quotes_it(
    pytester: pytest.Pytester, arg: str, message: str
) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        resolve_options(parsed(pytester, arg), [])
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("detection", "key"),
    [
        (Detection("cpu", 1, "cpu"), "cpu/x1"),
        (Detection("cpu", 8), "cpu/x8"),
        (Detection("tpu", 8, "TPU v6 lite"), "tpu/TPU v6 lite/x8"),
        (Detection("cuda", 2, "NVIDIA H100 80GB HBM3"), "cuda/NVIDIA H100 80GB HBM3/x2"),
        (Detection("tpu", 4), "tpu/x4"),
    ],
)
def test_the_hardware_key_is_platform_kind_and_count(detection: Detection, key: str) -> None:
    assert hardware_key(detection) == key


def test_an_explicit_key_wins() -> None:
    assert hardware_key(Detection("cpu", 1), override="ci-runner-a") == "ci-runner-a"


def test_an_explicit_accelerator_that_is_missing_still_targets_one(
    pytester: pytest.Pytester,
) -> None:
    options = resolve_options(parsed(pytester, "--accel=tpu", "--accel-allow-missing"), [])
    session = SessionFacts(options, Detection("cpu", 1), "cpu/x1")
    assert session.targets_accelerator
    auto = resolve_options(parsed(pytester), [])
    assert not SessionFacts(auto, Detection("cpu", 1), "cpu/x1").targets_accelerator


def test_scaleout_defaults(pytester: pytest.Pytester) -> None:
    options = resolve_scaleout(parsed(pytester))
    assert options == ScaleoutOptions("auto", None, "class")
    assert options.shard_label is None


def test_scaleout_values(pytester: pytest.Pytester) -> None:
    options = resolve_scaleout(
        parsed(pytester, "--accel-pin=off", "--accel-shard=2/4", "--accel-shard-by=module")
    )
    assert options == ScaleoutOptions("off", (2, 4), "module")
    assert options.shard_label == "2/4"


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("--accel-shard=5/4", "--accel-shard: '5/4': K must be between 1 and N"),
        ("--accel-shard=half", "--accel-shard: 'half' is not K/N (e.g. 2/4)"),
        ("--accel-pin=always", "--accel-pin: invalid choice 'always' (choose from auto, off)"),
        ("--accel-shard-by=file", "--accel-shard-by: invalid choice 'file'"),
    ],
)
def test_a_bad_scaleout_value_is_a_usage_error(
    pytester: pytest.Pytester, arg: str, message: str
) -> None:
    assert usage_error(resolve_scaleout, parsed(pytester, arg)).startswith(message)
