"""Marker evaluation as pure functions: each marker's requirement, the verdict for a
test's marks against a detection, and the argument checks with their suggestions.
(The same rules end to end, through pytest's collection, are in test_selection.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.markers import (
    RUN,
    MarkerError,
    Requirement,
    check_arguments,
    closest,
    edit_distance,
    evaluate_marks,
    requirement_from_mark,
)

PLATFORMS = ["cpu", "cuda", "gpu", "rocm", "tpu"]
CPU = Detection("cpu", 1)
CPU8 = Detection("cpu", 8)
TPU8 = Detection("tpu", 8, "TPU v6 lite", "pci")
CUDA2 = Detection("cuda", 2, "NVIDIA H100 80GB HBM3", "nvidia")
ROCM8 = Detection("rocm", 8, "AMD Instinct MI300X", "amdgpu")


def mark(name: str, *args: Any, **kwargs: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    return name, args, kwargs


def verdict(*marks: tuple[str, tuple[Any, ...], dict[str, Any]], on: Detection = CPU) -> Any:
    return evaluate_marks(marks, on, PLATFORMS, is_available=lambda module: False)


def test_a_test_without_selection_marks_simply_runs() -> None:
    assert verdict() is RUN
    assert verdict(mark("entry"), mark("slow")) is RUN


def test_tpu_ci_runs_on_a_tpu_and_is_skipped_on_cpu_with_what_was_detected() -> None:
    assert verdict(mark("tpu_ci"), on=TPU8).skip_reason is None
    reason = verdict(mark("tpu_ci")).skip_reason
    assert reason == "requires tpu x1 (detected: cpu x1 via default)"


def test_gpu_means_cuda_or_rocm() -> None:
    for detection in (CUDA2, ROCM8):
        assert verdict(mark("gpu"), on=detection).skip_reason is None
    assert verdict(mark("cuda"), on=ROCM8).skip_reason is not None


def test_multi_gpu_needs_that_many_gpus() -> None:
    assert verdict(mark("multi_gpu", 2), on=CUDA2).skip_reason is None
    reason = verdict(mark("multi_gpu", 4), on=CUDA2).skip_reason
    assert reason is not None
    assert reason.startswith("requires gpu x4 (detected: cuda x2 (NVIDIA H100 80GB HBM3)")
    assert verdict(mark("multi_gpu"), on=CUDA2).skip_reason is None  # n defaults to 2


def test_multi_device_takes_any_platform_and_names_the_cpu_device_option() -> None:
    reason = verdict(mark("multi_device", 8)).skip_reason
    assert reason == (
        "requires 8 devices (detected: cpu x1 via default); --accel-cpu-devices=8 runs it here"
    )
    assert verdict(mark("multi_device", 8), on=CPU8).skip_reason is None


def test_a_pinned_worker_with_too_few_devices_is_told_to_run_unpinned() -> None:
    pinned = Detection("cuda", 1, "H100", "pinned", pinned=True)
    reason = verdict(mark("multi_gpu", 2), on=pinned).skip_reason
    assert reason is not None
    assert "this xdist worker holds only its share of the devices" in reason


def test_the_kind_is_a_case_insensitive_glob() -> None:
    assert verdict(mark("tpu", kind="tpu v6*"), on=TPU8).skip_reason is None
    reason = verdict(mark("tpu", kind="TPU v5*"), on=TPU8).skip_reason
    assert reason is not None
    assert "of kind 'TPU v5*'" in reason


def test_accel_lists_platforms_and_all_requirements_must_hold() -> None:
    assert verdict(mark("accel", "tpu", "cuda"), on=CUDA2).skip_reason is None
    assert verdict(mark("accel", "tpu", min_devices=4), on=TPU8).skip_reason is None
    reason = verdict(mark("accel", "tpu"), mark("multi_device", 16), on=TPU8).skip_reason
    assert reason is not None
    assert "requires 16 devices" in reason


def test_cpu_only_is_skipped_when_the_run_targets_an_accelerator() -> None:
    assert verdict(mark("cpu_only")).skip_reason is None
    assert verdict(mark("cpu_only"), on=TPU8).skip_reason == (
        "cpu_only: this run targets an accelerator (detected: tpu x8 (TPU v6 lite) via pci)"
    )
    forced = evaluate_marks([mark("cpu_only")], CPU, PLATFORMS, targets_accelerator=True)
    assert forced.skip_reason is not None


def test_ray_runs_only_where_ray_imports() -> None:
    assert verdict(mark("ray")).skip_reason == "requires ray (not importable here: pip install ray)"
    available = evaluate_marks([mark("ray")], CPU, PLATFORMS, is_available=lambda m: True)
    assert available.skip_reason is None


def test_the_verdict_knows_which_platforms_a_test_targets() -> None:
    found = verdict(mark("tpu"), mark("gpu"), on=TPU8)
    assert found.targets == {"tpu", "gpu"}
    assert found.targets_platform("tpu")
    assert found.targets_platform("cuda")  # through gpu
    assert not found.targets_platform("cpu")
    assert verdict(mark("cpu_only")).targets_platform("cpu")


@pytest.mark.parametrize(
    ("name", "args", "kwargs", "message"),
    [
        ("accel", ("tpu",), {"min_devces": 4}, "unknown keyword 'min_devces' (did you mean"),
        ("multi_gpu", (), {"m": 4}, "unknown keyword 'm' (did you mean n=?)"),
        ("slow", (), {"reason": "x"}, "unknown keyword 'reason'; it takes no arguments"),
        ("entry", ("x",), {}, "@pytest.mark.entry takes no positional arguments"),
        ("multi_gpu", (2, 4), {}, "takes at most 1 positional argument(s), got (2, 4)"),
        ("tpu", ("v5",), {}, "@pytest.mark.tpu takes no positional arguments"),
    ],
)
def test_wrong_arguments_name_the_marker_and_the_closest_valid_keyword(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MarkerError) as raised:
        check_arguments(name, args, kwargs)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ([mark("accel", "tpux")], "unknown platform 'tpux' (choose from cpu, cuda, gpu"),
        ([mark("multi_gpu", 0)], "n must be a positive integer, got 0"),
        ([mark("multi_gpu", True)], "n must be a positive integer, got True"),
        ([mark("tpu", min_devices="8")], "min_devices must be a positive integer, got '8'"),
        ([mark("tpu", kind=5)], "kind must be a string glob, got 5"),
    ],
)
def test_bad_values_stop_with_what_was_wrong(
    marks: list[tuple[str, tuple[Any, ...], dict[str, Any]]], message: str
) -> None:
    with pytest.raises(MarkerError) as raised:
        evaluate_marks(marks, CPU, PLATFORMS)
    assert message in str(raised.value)


def test_a_platform_marker_becomes_a_requirement_and_others_none() -> None:
    assert requirement_from_mark("tpu_ci", (), {}, PLATFORMS) == Requirement(
        frozenset({"tpu"}), 1, None, "tpu_ci"
    )
    assert requirement_from_mark("multi_device", (4,), {}, PLATFORMS) == Requirement(
        None, 4, None, "multi_device"
    )
    assert requirement_from_mark("accel", (), {}, PLATFORMS) == Requirement(None, 1, None)
    assert requirement_from_mark("parametrize", ("x", [1]), {}, PLATFORMS) is None


def test_requirements_describe_themselves() -> None:
    assert Requirement(frozenset({"tpu", "cuda"}), 4).describe() == "cuda/tpu x4"
    assert Requirement(None, 8).describe() == "8 devices"
    assert Requirement(frozenset({"tpu"}), 1, "TPU v5*").describe() == "tpu x1 of kind 'TPU v5*'"


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [("tpu", "tpu", 0), ("tpu", "tpux", 1), ("min_devces", "min_devices", 1), ("ab", "ba", 2)],
)
def test_edit_distance_counts_single_edits(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b) == distance


def test_edit_distance_stops_early_beyond_its_bound() -> None:
    assert edit_distance("a", "abcdefgh") == 3
    assert edit_distance("kitten", "sitting", most=5) == 3


def test_the_closest_choice_is_within_two_edits_or_none() -> None:
    assert closest("min_devces", ["min_devices", "kind"]) == "min_devices"
    assert closest("kinds", ["min_devices", "kind"]) == "kind"
    assert closest("colour", ["min_devices", "kind"]) is None
    assert closest("x", []) is None
