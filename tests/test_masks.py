"""Visibility masks and device counts read as the runtimes read them, as pure
functions: where a ``*_VISIBLE_*`` list ends, what the evidence says, and the CPU
device count from JAX's variables.  (Detection against fake /sys and /dev trees is in
test_detection.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_accel.hardware.detection import (
    Detection,
    DetectionContext,
    apply_mask,
    count_of,
    cpu_detection,
    cpu_device_count,
    describe_evidence,
    mask_entries,
    read_mask,
)
from pytest_accel.hardware.platforms import platform_matches


@pytest.mark.parametrize(
    ("value", "entries", "stop"),
    [
        ("0,1,2", ("0", "1", "2"), None),
        (" 3 , 1 ", ("3", "1"), None),
        ("0,1,x,2", ("0", "1"), "'x' is not a device index"),
        ("0,1,0", ("0", "1"), "'0' is repeated"),
        ("0,9", ("0",), "'9' is past the last device"),
        ("", (), None),
        ("-1", (), None),
        ("NoDevFiles", (), None),
        ("1,-1,2", ("1",), None),
        ("GPU-8a3b,1", ("GPU-8a3b", "1"), None),
        ("MIG-12ab-cd,GPU-x", ("MIG-12ab-cd", "GPU-x"), None),
        ("²", (), "'²' is not a device index"),
    ],
)
def test_a_mask_ends_where_the_runtime_stops_reading_it(
    value: str, entries: tuple[str, ...], stop: str | None
) -> None:
    mask = read_mask(value, physical=4)
    assert mask.entries == entries
    assert mask.stop == stop


def test_uuids_are_not_device_entries_for_masks_that_take_only_indexes() -> None:
    assert read_mask("GPU-8a3b,1", uuids=False).entries == ()
    assert mask_entries("2,3", uuids=False) == ["2", "3"]


def test_without_a_device_count_any_index_is_read() -> None:
    assert read_mask("0,17").entries == ("0", "17")


def context(environ: dict[str, str]) -> DetectionContext:
    return DetectionContext(Path("/"), environ)


def test_applying_a_mask_counts_what_stays_visible_and_notes_it() -> None:
    ctx = context({"CUDA_VISIBLE_DEVICES": "0,2"})
    assert apply_mask(ctx, "CUDA_VISIBLE_DEVICES", 8) == 2
    assert ctx.evidence == ["CUDA_VISIBLE_DEVICES='0,2' leaves 2 of 8 visible"]


def test_a_mask_that_stops_early_is_noted_as_ignored_with_why() -> None:
    ctx = context({"CUDA_VISIBLE_DEVICES": "0,1,7"})
    assert apply_mask(ctx, "CUDA_VISIBLE_DEVICES", 4) == 2
    detection = Detection("cuda", 2, evidence=tuple(ctx.evidence))
    assert detection.ignored == (
        "CUDA_VISIBLE_DEVICES='0,1,7' leaves 2 of 4 visible: the list ends where '7' is past"
        " the last device, as the runtime reads it",
    )


def test_no_mask_leaves_every_device_and_says_nothing() -> None:
    ctx = context({})
    assert apply_mask(ctx, "ROCR_VISIBLE_DEVICES", 4) == 4
    assert ctx.evidence == []


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, (1, None)),
        ({"JAX_NUM_CPU_DEVICES": "8"}, (8, "JAX_NUM_CPU_DEVICES=8")),
        (
            {"XLA_FLAGS": "--xla_cpu_x=1 --xla_force_host_platform_device_count=4"},
            (4, "XLA_FLAGS=--xla_force_host_platform_device_count=4"),
        ),
        (
            {"JAX_NUM_CPU_DEVICES": "2", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"},
            (2, "JAX_NUM_CPU_DEVICES=2"),
        ),
    ],
)
def test_the_cpu_device_count_comes_from_jaxs_own_variables(
    environ: dict[str, str], expected: tuple[int, str | None]
) -> None:
    assert cpu_device_count(environ) == expected


@pytest.mark.parametrize("value", ["0", "²", "-3", "8 devices", "9" * 5000])
def test_a_bad_cpu_device_count_is_ignored_and_reported(value: str) -> None:
    ignored: list[str] = []
    assert cpu_device_count({"JAX_NUM_CPU_DEVICES": value}, ignored.append) == (1, None)
    assert len(ignored) == 1
    assert ignored[0].startswith("JAX_NUM_CPU_DEVICES=")
    assert ignored[0].endswith("(not a positive count)")
    assert len(ignored[0]) < 120


def test_cpu_detection_notes_where_its_count_came_from() -> None:
    detection = cpu_detection(context({"JAX_NUM_CPU_DEVICES": "8"}))
    assert detection == Detection(
        "cpu", 8, "cpu", "default", ("cpu devices: 8 from JAX_NUM_CPU_DEVICES=8",)
    )
    assert detection.describe() == "cpu x8 via default"
    assert not detection.is_accelerator


@pytest.mark.parametrize(
    ("text", "count"),
    [("8", 8), (" 12 ", 12), ("0", 0), ("²", None), ("1e3", None), ("-1", None), ("9" * 8, None)],
)
def test_a_count_is_ascii_digits_only(text: str, count: int | None) -> None:
    assert count_of(text) == count


def test_gpu_matches_its_two_families_and_nothing_else() -> None:
    assert platform_matches("gpu", "cuda")
    assert platform_matches("gpu", "rocm")
    assert platform_matches("tpu", "tpu")
    assert not platform_matches("gpu", "tpu")
    assert not platform_matches("cuda", "rocm")


def test_an_accelerators_description_has_its_kind_on_one_line() -> None:
    detection = Detection("tpu", 8, "TPU v6\nlite", "pci")
    assert detection.describe() == "tpu x8 (TPU v6\\nlite) via pci"
    assert describe_evidence([]) == "nothing checked"
    assert describe_evidence(["a", "b\nc"]) == "a; b\\nc"


def test_a_detection_as_json_keeps_its_evidence() -> None:
    data = Detection("cuda", 2, "H100", "nvidia", ("nvidia: 2 GPUs",)).to_json()
    assert data["platform"] == "cuda"
    assert data["device_count"] == 2
    assert data["device_kind"] == "H100"
    assert data["source"] == "nvidia"
