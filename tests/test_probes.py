"""Each system probe on its own, against small /sys, /dev and /proc trees built in
tmp_path: what it counts, the kind it names, the masks it applies and the evidence it
leaves.  (Whole machines, through pytest's own detection, are in test_detection.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_accel.hardware.detection import DetectionContext
from pytest_accel.hardware.sysfs import GOOGLE_PCI_VENDOR, probe_cuda, probe_rocm, probe_tpu


def write(root: Path, relative: str, text: str = "") -> None:
    path = root / relative.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def tpu_chip(root: Path, slot: str, device: str, subsystem: str = "0x0000") -> None:
    base = f"/sys/bus/pci/devices/{slot}"
    write(root, f"{base}/vendor", GOOGLE_PCI_VENDOR + "\n")
    write(root, f"{base}/device", device + "\n")
    write(root, f"{base}/subsystem_device", subsystem + "\n")


def ctx(root: Path, environ: dict[str, str] | None = None) -> DetectionContext:
    return DetectionContext(root, environ or {})


def test_nothing_there_detects_nothing(tmp_path: Path) -> None:
    for probe in (probe_tpu, probe_cuda, probe_rocm):
        assert probe(ctx(tmp_path)) is None


@pytest.mark.parametrize(
    ("device", "subsystem", "kind", "per_chip"),
    [
        ("0x006f", "0x0000", "TPU v6 lite", 1),
        ("0x0063", "0x0000", "TPU v5 lite", 1),
        ("0x005e", "0x0000", "TPU v4", 1),
        ("0x0027", "0x0000", "TPU v3", 2),
        ("0x0027", "0x004e", "TPU v2", 2),
    ],
)
def test_tpu_chips_on_the_pci_bus_give_their_kind_and_devices(
    tmp_path: Path, device: str, subsystem: str, kind: str, per_chip: int
) -> None:
    for slot in range(4):
        tpu_chip(tmp_path, f"0000:00:0{slot}.0", device, subsystem)
    found = probe_tpu(ctx(tmp_path))
    assert found is not None
    assert (found.platform, found.device_kind, found.source) == ("tpu", kind, "pci")
    assert found.device_count == 4 * per_chip


def test_other_pci_devices_are_not_tpus(tmp_path: Path) -> None:
    write(tmp_path, "/sys/bus/pci/devices/0000:00:01.0/vendor", "0x8086\n")
    write(tmp_path, "/sys/bus/pci/devices/0000:00:01.0/device", "0x006f\n")
    tpu_chip(tmp_path, "0000:00:02.0", "0x9999")  # Google, but no TPU we know
    context = ctx(tmp_path)
    assert probe_tpu(context) is None
    assert context.evidence[0] == (
        f"/sys/bus/pci/devices: 0 TPU chip(s) (vendor {GOOGLE_PCI_VENDOR}) among 2 PCI device(s)"
    )


def test_tpu_device_nodes_without_pci_data_count_with_no_kind(tmp_path: Path) -> None:
    for n in range(4):
        write(tmp_path, f"/dev/accel{n}")
    write(tmp_path, "/dev/accelerometer")  # not a numbered accel node
    found = probe_tpu(ctx(tmp_path))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (4, None, "dev")


def test_vfio_groups_holding_a_tpu_count_as_chips(tmp_path: Path) -> None:
    for group in ("12", "13"):
        write(tmp_path, f"/dev/vfio/{group}")
        base = f"/sys/kernel/iommu_groups/{group}/devices/0000:00:0{group[-1]}.0"
        write(tmp_path, f"{base}/vendor", GOOGLE_PCI_VENDOR)
        write(tmp_path, f"{base}/device", "0x0062")
    write(tmp_path, "/dev/vfio/vfio")  # the container node, not a group
    context = ctx(tmp_path)
    found = probe_tpu(context)
    assert found is not None
    assert found.device_count == 2
    assert "/dev/vfio: 2 IOMMU group(s) holding a TPU" in context.evidence


def test_tpu_visible_chips_limits_what_is_counted(tmp_path: Path) -> None:
    for slot in range(8):
        tpu_chip(tmp_path, f"0000:00:0{slot}.0", "0x006f")
    found = probe_tpu(ctx(tmp_path, {"TPU_VISIBLE_CHIPS": "0,1"}))
    assert found is not None
    assert found.device_count == 2
    assert "TPU_VISIBLE_CHIPS='0,1' leaves 2 of 8 visible" in found.evidence


def test_a_mask_that_hides_every_tpu_detects_none(tmp_path: Path) -> None:
    tpu_chip(tmp_path, "0000:00:01.0", "0x006f")
    assert probe_tpu(ctx(tmp_path, {"TPU_VISIBLE_CHIPS": ""})) is None


def nvidia(root: Path, count: int, model: str | None = "NVIDIA H100 80GB HBM3") -> None:
    for n in range(count):
        write(root, f"/dev/nvidia{n}")
        if model is not None:
            write(
                root,
                f"/proc/driver/nvidia/gpus/0000:0{n}:00.0/information",
                f"Model: \t {model}\nIRQ:   42\n",
            )
    write(root, "/dev/nvidiactl")
    write(root, "/dev/nvidia-uvm")


def test_nvidia_gpus_are_counted_with_their_model(tmp_path: Path) -> None:
    nvidia(tmp_path, 4)
    found = probe_cuda(ctx(tmp_path))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (
        4,
        "NVIDIA H100 80GB HBM3",
        "procfs",
    )
    assert "/dev/nvidia[0-9]*: 4 node(s)" in found.evidence


def test_nvidia_nodes_alone_count_without_a_model(tmp_path: Path) -> None:
    nvidia(tmp_path, 2, model=None)
    found = probe_cuda(ctx(tmp_path))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (2, None, "dev")


def test_a_gpu_whose_information_has_no_model_line_is_still_a_gpu(tmp_path: Path) -> None:
    write(tmp_path, "/proc/driver/nvidia/gpus/0000:01:00.0/information", "IRQ: 1\n")
    found = probe_cuda(ctx(tmp_path))
    assert found is not None
    assert found.device_kind == "NVIDIA GPU"


def test_cuda_visible_devices_limits_and_hides(tmp_path: Path) -> None:
    nvidia(tmp_path, 4)
    found = probe_cuda(ctx(tmp_path, {"CUDA_VISIBLE_DEVICES": "2"}))
    assert found is not None
    assert found.device_count == 1
    assert probe_cuda(ctx(tmp_path, {"CUDA_VISIBLE_DEVICES": "-1"})) is None


def amd(root: Path, gpus: int, cpus: int = 1, name: str = "gfx942") -> None:
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    for n in range(cpus):
        write(root, f"{nodes}/{n}/properties", "cpu_cores_count 64\nsimd_count 0\n")
        write(root, f"{nodes}/{n}/name", "\n")
    for n in range(cpus, cpus + gpus):
        write(root, f"{nodes}/{n}/properties", "cpu_cores_count 0\nsimd_count 1216\n")
        write(root, f"{nodes}/{n}/name", f"{name}\n")


def test_amd_gpus_are_the_kfd_nodes_with_compute_units(tmp_path: Path) -> None:
    amd(tmp_path, 8, cpus=2)
    found = probe_rocm(ctx(tmp_path))
    assert found is not None
    assert (found.platform, found.device_count, found.device_kind, found.source) == (
        "rocm",
        8,
        "gfx942",
        "kfd",
    )
    assert "KFD topology: 8 GPU node(s) with simd_count > 0" in found.evidence


def test_a_cpu_only_kfd_topology_is_not_rocm(tmp_path: Path) -> None:
    amd(tmp_path, 0, cpus=2)
    assert probe_rocm(ctx(tmp_path)) is None


def test_rocr_then_hip_masks_apply_in_turn(tmp_path: Path) -> None:
    amd(tmp_path, 8)
    found = probe_rocm(
        ctx(tmp_path, {"ROCR_VISIBLE_DEVICES": "0,1,2,3", "HIP_VISIBLE_DEVICES": "1"})
    )
    assert found is not None
    assert found.device_count == 1


def test_hip_honours_cuda_visible_devices_when_it_has_none_of_its_own(tmp_path: Path) -> None:
    amd(tmp_path, 4)
    found = probe_rocm(ctx(tmp_path, {"CUDA_VISIBLE_DEVICES": "0,1"}))
    assert found is not None
    assert found.device_count == 2
