"""One device set per xdist worker, as a pure function of the detection, the
environment and the worker: disjoint equal slices, always indexing into an existing
mask, for CUDA, ROCm and TPU.  (Workers started by pytest-xdist for real are in
test_scaling.py.)"""

from __future__ import annotations

import pytest

from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.platforms import TPU_PORT_BASE
from pytest_accel.scaleout.pinning import (
    PinError,
    plan_pin,
    shareable,
    worker_index,
)

CUDA8 = Detection("cuda", 8, "NVIDIA H100 80GB HBM3", "nvidia")
ROCM4 = Detection("rocm", 4, "AMD Instinct MI300X", "amdgpu")
TPU8 = Detection("tpu", 8, "TPU v6 lite", "pci")
TPU_V3 = Detection("tpu", 8, "TPU v3", "pci")  # two devices a chip


def slices(detection: Detection, environ: dict[str, str], workers: int) -> list[tuple[str, ...]]:
    return [plan_pin(detection, environ, f"gw{i}", workers).devices for i in range(workers)]


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_workers_get_disjoint_equal_slices_that_cover_the_devices(workers: int) -> None:
    found = slices(CUDA8, {}, workers)
    assert all(len(s) == 8 // workers for s in found)
    flat = [d for s in found for d in s]
    assert sorted(flat, key=int) == [str(i) for i in range(8)]


def test_three_workers_on_eight_devices_leave_the_remainder_unused() -> None:
    found = slices(CUDA8, {}, 3)
    assert found == [("0", "1"), ("2", "3"), ("4", "5")]


def test_an_outer_mask_is_indexed_into_never_widened() -> None:
    detection = Detection("cuda", 4, "H100", "nvidia")
    environ = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    pins = [plan_pin(detection, environ, f"gw{i}", 2) for i in range(2)]
    assert [p.env for p in pins] == [
        {"CUDA_VISIBLE_DEVICES": "4,5"},
        {"CUDA_VISIBLE_DEVICES": "6,7"},
    ]
    assert [p.device_count for p in pins] == [2, 2]
    assert pins[1].describe() == "xdist worker gw1 holds 6,7 of 4"


def test_gpu_uuids_in_a_mask_are_kept_as_they_are() -> None:
    detection = Detection("cuda", 2, "H100", "nvidia")
    environ = {"CUDA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb"}
    assert slices(detection, environ, 2) == [("GPU-aaaa",), ("GPU-bbbb",)]


def test_amd_workers_set_rocr_and_renumber_hip_from_zero() -> None:
    pin = plan_pin(ROCM4, {}, "gw1", 2)
    assert pin.env == {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,1"}


def test_an_existing_hip_mask_is_the_one_split() -> None:
    pin = plan_pin(ROCM4, {"HIP_VISIBLE_DEVICES": "0,1,2,3"}, "gw0", 2)
    assert pin.env == {"HIP_VISIBLE_DEVICES": "0,1"}


def test_tpu_workers_get_chips_bounds_and_their_own_port() -> None:
    pins = [plan_pin(TPU8, {}, f"gw{i}", 2) for i in range(2)]
    assert pins[0].env == {
        "TPU_VISIBLE_CHIPS": "0,1,2,3",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "2,2,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": str(TPU_PORT_BASE),
    }
    assert pins[1].env["TPU_PROCESS_PORT"] == str(TPU_PORT_BASE + 1)
    assert pins[1].env["TPU_VISIBLE_CHIPS"] == "4,5,6,7"


@pytest.mark.parametrize(("workers", "bounds"), [(8, "1,1,1"), (4, "1,2,1"), (1, "2,4,1")])
def test_tpu_chip_bounds_follow_the_chips_a_worker_holds(workers: int, bounds: str) -> None:
    assert plan_pin(TPU8, {}, "gw0", workers).env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == bounds


def test_v3_chips_hold_two_devices_each() -> None:
    assert shareable(TPU_V3, {}) == ["0", "1", "2", "3"]  # four chips
    pin = plan_pin(TPU_V3, {}, "gw0", 2)
    assert pin.devices == ("0", "1")
    assert pin.device_count == 4  # what JAX will see in that worker


def test_more_workers_than_devices_say_what_to_do() -> None:
    with pytest.raises(PinError) as raised:
        plan_pin(Detection("cuda", 2, "H100", "nvidia"), {}, "gw0", 4)
    assert str(raised.value) == (
        "-n 4 workers cannot each hold one of 2 cuda device(s); use -n 2 (or -n auto),"
        " or --accel-pin=off"
    )


def test_the_cpu_has_nothing_to_share() -> None:
    assert shareable(Detection("cpu", 8), {}) == []
    with pytest.raises(PinError):
        plan_pin(Detection("cpu", 8), {}, "gw0", 2)


def test_a_mask_shorter_than_the_count_limits_what_is_shared() -> None:
    assert shareable(CUDA8, {"CUDA_VISIBLE_DEVICES": "1,3"}) == ["1", "3"]


@pytest.mark.parametrize(("worker", "index"), [("gw0", 0), ("gw12", 12)])
def test_a_worker_id_gives_its_index(worker: str, index: int) -> None:
    assert worker_index(worker) == index


@pytest.mark.parametrize("worker", ["master", "gw", "gw²", "gwx"])
def test_an_unexpected_worker_id_is_an_error(worker: str) -> None:
    with pytest.raises(PinError, match="unexpected xdist worker id"):
        worker_index(worker)
