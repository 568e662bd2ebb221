"""Each system probe on its own, against small /sys, /dev and /proc trees
(``tests/fakesys.py``): what it counts, the kind it names, the masks it applies and the
evidence it leaves.  (Whole machines through pytest's own detection, and each TPU PCI
id's kind, are in test_detection.py.)"""

from __future__ import annotations

from pathlib import Path

from pytest_accel.hardware.detection import DetectionContext
from pytest_accel.hardware.sysfs import GOOGLE_PCI_VENDOR, probe_cuda, probe_rocm, probe_tpu
from tests.fakesys import FakeSys


def ctx(tree: FakeSys, environ: dict[str, str] | None = None) -> DetectionContext:
    return DetectionContext(tree.root, environ or {})


def test_nothing_there_detects_nothing(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    for probe in (probe_tpu, probe_cuda, probe_rocm):
        assert probe(ctx(tree)) is None


def test_v3_chips_hold_two_devices_each(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    for _ in range(4):
        tree.pci_device(GOOGLE_PCI_VENDOR, "0x0027", "0x0000")
    found = probe_tpu(ctx(tree))
    assert found is not None
    assert (found.device_kind, found.device_count) == ("TPU v3", 8)


def test_other_pci_devices_are_not_tpus(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.pci_device("0x8086", "0x006f")  # a TPU's device id, another vendor
    tree.pci_device(GOOGLE_PCI_VENDOR, "0x9999")  # Google, but no TPU we know
    context = ctx(tree)
    assert probe_tpu(context) is None
    assert context.evidence[0] == (
        f"/sys/bus/pci/devices: 0 TPU chip(s) (vendor {GOOGLE_PCI_VENDOR}) among 2 PCI device(s)"
    )


def test_tpu_device_nodes_without_pci_data_count_with_no_kind(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    for n in range(4):
        (tmp_path / f"dev/accel{n}").write_text("")
    (tmp_path / "dev/accelerometer").write_text("")  # not a numbered accel node
    found = probe_tpu(ctx(tree))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (4, None, "dev")


def test_vfio_groups_holding_a_tpu_count_as_chips(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.add_vfio_group(12, GOOGLE_PCI_VENDOR, "0x0062")
    tree.add_vfio_group(13, GOOGLE_PCI_VENDOR, "0x0062")
    tree.add_vfio_group(14, "0x10de", "0x2330")  # a GPU passed through: not a TPU
    context = ctx(tree)
    found = probe_tpu(context)
    assert found is not None
    assert found.device_count == 2  # the chips on the PCI bus, the vfio groups agreeing
    assert "/dev/vfio: 2 IOMMU group(s) holding a TPU" in context.evidence


def test_tpu_visible_chips_limits_what_is_counted(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.add_tpu(8, "0x006f")
    found = probe_tpu(ctx(tree, {"TPU_VISIBLE_CHIPS": "0,1"}))
    assert found is not None
    assert found.device_count == 2
    assert "TPU_VISIBLE_CHIPS='0,1' leaves 2 of 8 visible" in found.evidence


def test_a_mask_that_hides_every_tpu_detects_none(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.add_tpu(1, "0x006f")
    assert probe_tpu(ctx(tree, {"TPU_VISIBLE_CHIPS": ""})) is None


def test_nvidia_gpus_are_counted_with_their_model(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.add_nvidia(4, "NVIDIA H100 80GB HBM3")
    found = probe_cuda(ctx(tree))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (
        4,
        "NVIDIA H100 80GB HBM3",
        "procfs",
    )
    assert "/dev/nvidia[0-9]*: 4 node(s)" in found.evidence


def test_nvidia_nodes_alone_count_without_a_model(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    for n in range(2):
        (tmp_path / f"dev/nvidia{n}").write_text("")
    (tmp_path / "dev/nvidiactl").write_text("")  # the control node is not a GPU
    found = probe_cuda(ctx(tree))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (2, None, "dev")


def test_a_gpu_whose_information_has_no_model_line_is_still_a_gpu(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    info = tmp_path / "proc/driver/nvidia/gpus/0000:01:00.0/information"
    info.parent.mkdir(parents=True)
    info.write_text("IRQ: 1\n")
    found = probe_cuda(ctx(tree))
    assert found is not None
    assert found.device_kind == "NVIDIA GPU"


def test_cuda_visible_devices_limits_and_hides(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    tree.add_nvidia(4)
    found = probe_cuda(ctx(tree, {"CUDA_VISIBLE_DEVICES": "2"}))
    assert found is not None
    assert found.device_count == 1
    assert probe_cuda(ctx(tree, {"CUDA_VISIBLE_DEVICES": "-1"})) is None


def amd(tree: FakeSys, gpus: int, cpus: int = 1) -> None:
    for _ in range(cpus):
        tree.add_kfd_node(0, "")
    for _ in range(gpus):
        tree.add_kfd_node(1216, "gfx942")


def test_amd_gpus_are_the_kfd_nodes_with_compute_units(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    amd(tree, 8, cpus=2)
    found = probe_rocm(ctx(tree))
    assert found is not None
    assert (found.platform, found.device_count, found.device_kind, found.source) == (
        "rocm",
        8,
        "gfx942",
        "kfd",
    )
    assert "KFD topology: 8 GPU node(s) with simd_count > 0" in found.evidence


def test_a_cpu_only_kfd_topology_is_not_rocm(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    amd(tree, 0, cpus=2)
    assert probe_rocm(ctx(tree)) is None


def test_rocr_then_hip_masks_apply_in_turn(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    amd(tree, 8)
    masks = {"ROCR_VISIBLE_DEVICES": "0,1,2,3", "HIP_VISIBLE_DEVICES": "1"}
    found = probe_rocm(ctx(tree, masks))
    assert found is not None
    assert found.device_count == 1
    assert "ROCR_VISIBLE_DEVICES='0,1,2,3' leaves 4 of 8 visible" in found.evidence
    assert "HIP_VISIBLE_DEVICES='1' leaves 1 of 4 visible" in found.evidence


def test_hip_honours_cuda_visible_devices_when_it_has_none_of_its_own(tmp_path: Path) -> None:
    tree = FakeSys(tmp_path)
    amd(tree, 4)
    found = probe_rocm(ctx(tree, {"CUDA_VISIBLE_DEVICES": "0,1"}))
    assert found is not None
    assert found.device_count == 2


def test_in_a_container_vfio_groups_alone_count_the_tpus(tmp_path: Path) -> None:
    # No PCI bus visible, no /dev/accel nodes: only /dev/vfio and the IOMMU groups.
    tree = FakeSys(tmp_path)
    for group in (3, 4, 5, 6):
        (tmp_path / f"dev/vfio/{group}").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"dev/vfio/{group}").write_text("")
        device = tmp_path / f"sys/kernel/iommu_groups/{group}/devices/0000:00:0{group}.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text(GOOGLE_PCI_VENDOR + "\n")
        (device / "device").write_text("0x0063\n")
    found = probe_tpu(ctx(tree))
    assert found is not None
    assert (found.device_count, found.device_kind, found.source) == (4, None, "dev")
