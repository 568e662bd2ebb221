from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_accel.hardware.builtin import detect_builtin
from pytest_accel.hardware.detection import (
    Detection,
    DetectionContext,
    DetectionError,
    EmulationSpecError,
    cpu_detection,
    cpu_device_count,
    mask_entries,
    parse_emulation,
    sysroot_from_env,
)
from tests.fakesys import FakeSys


def detect(fake: FakeSys, **env: str) -> Detection:
    context = DetectionContext(fake.root, env)
    return detect_builtin(context) or cpu_detection(context)


def test_an_empty_machine_is_cpu_with_one_device_and_lists_what_it_checked(
    fakesys: FakeSys,
) -> None:
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.source) == ("cpu", 1, "default")
    assert any("/sys/bus/pci/devices: 0 TPU chip(s)" in e for e in result.evidence)
    assert any("/dev/nvidia[0-9]*: 0 node(s)" in e for e in result.evidence)
    assert any("KFD topology: 0 GPU node(s)" in e for e in result.evidence)


def test_four_tpu_v5e_chips_are_tpu_x4_of_kind_v5_lite_via_pci(fakesys: FakeSys) -> None:
    fakesys.add_tpu(4, "0x0063")
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.device_kind) == ("tpu", 4, "TPU v5 lite")
    assert result.describe() == "tpu x4 (TPU v5 lite) via pci"


@pytest.mark.parametrize(
    ("device_id", "subsystem", "kind", "per_chip"),
    [
        ("0x0027", "0x004e", "TPU v2", 2),
        ("0x0027", "0x004f", "TPU v3", 2),
        ("0x005e", "0x0000", "TPU v4", 1),
        ("0x0062", "0x0000", "TPU v5", 1),
        ("0x006f", "0x0000", "TPU v6 lite", 1),
        ("0x0076", "0x0000", "TPU7x", 1),
    ],
)
def test_each_tpu_pci_device_id_maps_to_the_device_kind_jax_reports(
    fakesys: FakeSys, device_id: str, subsystem: str, kind: str, per_chip: int
) -> None:
    for _ in range(4):
        fakesys.pci_device("0x1ae0", device_id, subsystem)
    result = detect(fakesys)
    assert (result.platform, result.device_kind, result.device_count) == ("tpu", kind, 4 * per_chip)


def test_tpu_visible_chips_narrows_the_count(fakesys: FakeSys) -> None:
    fakesys.add_tpu(8, "0x006f")
    result = detect(fakesys, TPU_VISIBLE_CHIPS="0,1")
    assert (result.platform, result.device_count) == ("tpu", 2)
    assert any("TPU_VISIBLE_CHIPS='0,1' leaves 2 of 8 visible" in e for e in result.evidence)


def test_dev_accel_nodes_without_pci_data_count_as_tpus_of_unknown_kind(fakesys: FakeSys) -> None:
    for index in range(4):
        (fakesys.root / f"dev/accel{index}").write_text("")
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.device_kind, result.source) == (
        "tpu",
        4,
        None,
        "dev",
    )


def test_a_bare_dev_vfio_with_a_non_tpu_group_is_not_a_tpu(fakesys: FakeSys) -> None:
    fakesys.add_vfio_group(7, vendor="0x8086", device="0x1234")  # an Intel NIC
    result = detect(fakesys)
    assert result.platform == "cpu"
    assert any("/dev/vfio: 0 IOMMU group(s) holding a TPU" in e for e in result.evidence)


def test_a_vfio_group_holding_a_tpu_counts_even_without_dev_accel(fakesys: FakeSys) -> None:
    fakesys.add_vfio_group(3, vendor="0x1ae0", device="0x006f")
    fakesys.add_vfio_group(4, vendor="0x1ae0", device="0x006f")
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.device_kind) == ("tpu", 2, "TPU v6 lite")


def test_eight_nvidia_gpus_are_cuda_x8_with_the_model_as_kind(fakesys: FakeSys) -> None:
    fakesys.add_nvidia(8, "NVIDIA H100 80GB HBM3")
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.device_kind) == (
        "cuda",
        8,
        "NVIDIA H100 80GB HBM3",
    )


@pytest.mark.parametrize("mask", ["", "-1", "NoDevFiles"])
def test_an_empty_cuda_visible_devices_hides_gpus_that_are_present(
    fakesys: FakeSys, mask: str
) -> None:
    fakesys.add_nvidia(8)
    result = detect(fakesys, CUDA_VISIBLE_DEVICES=mask)
    assert (result.platform, result.device_count) == ("cpu", 1)
    assert any("CUDA_VISIBLE_DEVICES" in e and "leaves 0 of 8" in e for e in result.evidence)


def test_cuda_visible_devices_counts_up_to_the_first_invalid_index(fakesys: FakeSys) -> None:
    fakesys.add_nvidia(4)
    assert detect(fakesys, CUDA_VISIBLE_DEVICES="2,3").device_count == 2
    assert detect(fakesys, CUDA_VISIBLE_DEVICES="0,9,1").device_count == 1


def test_two_amd_gpus_with_a_cpu_kfd_node_are_rocm_x2(fakesys: FakeSys) -> None:
    fakesys.add_kfd_node(0, "")  # node 0 is the CPU: no SIMDs
    fakesys.add_kfd_node(440, "gfx90a")
    fakesys.add_kfd_node(440, "gfx90a")
    result = detect(fakesys)
    assert (result.platform, result.device_count, result.device_kind) == ("rocm", 2, "gfx90a")


def test_hip_visible_devices_indexes_into_what_rocr_visible_devices_left(
    fakesys: FakeSys,
) -> None:
    for _ in range(8):
        fakesys.add_kfd_node(304, "gfx942")
    result = detect(fakesys, ROCR_VISIBLE_DEVICES="0,1,2,3", HIP_VISIBLE_DEVICES="1")
    assert (result.platform, result.device_count) == ("rocm", 1)


def test_jax_platforms_cpu_wins_over_a_present_tpu(fakesys: FakeSys) -> None:
    fakesys.add_tpu(4)
    result = detect(fakesys, JAX_PLATFORMS="cpu")
    assert result.describe() == "cpu x1 via env JAX_PLATFORMS=cpu"


def test_jax_platforms_restricts_which_accelerators_are_probed(fakesys: FakeSys) -> None:
    fakesys.add_tpu(4)
    fakesys.add_nvidia(2)
    assert detect(fakesys).platform == "tpu"
    result = detect(fakesys, JAX_PLATFORMS="cuda")
    assert (result.platform, result.source) == ("cuda", "procfs (JAX_PLATFORMS=cuda)")


def test_pjrt_device_cpu_selects_cpu(fakesys: FakeSys) -> None:
    fakesys.add_tpu(4)
    assert detect(fakesys, PJRT_DEVICE="CPU").platform == "cpu"


def test_a_requested_platform_is_probed_first_on_a_mixed_machine(fakesys: FakeSys) -> None:
    fakesys.add_nvidia(2)
    fakesys.add_kfd_node(304, "gfx942")
    context = DetectionContext(fakesys.root, {}, requested="rocm")
    result = detect_builtin(context)
    assert result is not None
    assert result.platform == "rocm"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (1, None)),
        ({"JAX_NUM_CPU_DEVICES": "8"}, (8, "JAX_NUM_CPU_DEVICES=8")),
        (
            {"XLA_FLAGS": "--foo --xla_force_host_platform_device_count=4"},
            (4, "XLA_FLAGS=--xla_force_host_platform_device_count=4"),
        ),
        ({"JAX_NUM_CPU_DEVICES": "0"}, (1, None)),
    ],
)
def test_cpu_device_count_honours_jax_num_cpu_devices_and_xla_flags(
    env: dict[str, str], expected: tuple[int, str | None]
) -> None:
    assert cpu_device_count(env) == expected


def test_mask_entries_stop_at_the_first_invalid_entry() -> None:
    assert mask_entries("0, 1,-1,2") == ["0", "1"]
    assert mask_entries("GPU-1a2b,GPU-3c4d") == ["GPU-1a2b", "GPU-3c4d"]
    assert mask_entries("") == []


def test_emulation_specs_parse_platform_count_and_kind() -> None:
    result = parse_emulation("tpu:8:TPU v5 lite", ["cpu", "tpu"])
    assert (result.platform, result.device_count, result.device_kind, result.source) == (
        "tpu",
        8,
        "TPU v5 lite",
        "emulated",
    )
    with pytest.raises(EmulationSpecError, match="device count 'x' is not a positive integer"):
        parse_emulation("tpu:x", ["tpu"])
    with pytest.raises(EmulationSpecError, match="unknown platform 'tpux'"):
        parse_emulation("tpux", ["tpu"])


def test_sysroot_defaults_to_the_real_root_and_must_be_a_directory(tmp_path: Path) -> None:
    assert str(sysroot_from_env({})) == os.sep
    assert sysroot_from_env({"PYTEST_ACCEL_SYSROOT": str(tmp_path)}) == tmp_path
    with pytest.raises(
        DetectionError, match=r"PYTEST_ACCEL_SYSROOT='.*/missing' is not a directory"
    ):
        sysroot_from_env({"PYTEST_ACCEL_SYSROOT": str(tmp_path / "missing")})


@pytest.mark.parametrize(
    ("setup", "header"),
    [
        (lambda f: f.add_tpu(4, "0x0063"), "accel: tpu x4 (TPU v5 lite) via pci*"),
        (lambda f: f.add_nvidia(8), "accel: cuda x8 (NVIDIA A100-SXM4-80GB) via procfs*"),
        (lambda f: None, "accel: cpu x1 via default*"),
    ],
)
def test_the_pytest_header_shows_the_detected_hardware(
    pytester: pytest.Pytester, fakesys: FakeSys, setup: object, header: str
) -> None:
    setup(fakesys)  # type: ignore[operator]
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([header])
    result.assert_outcomes(passed=1)


def test_framework_versions_come_from_the_installed_distributions_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never by importing a framework, and without ``importlib.metadata`` (a 20 ms
    import): the ``NAME-VERSION.dist-info`` directories installers write."""
    from pytest_accel.hardware.detection import framework_versions

    site = tmp_path / "site"
    for name in ("jax-0.9.1.dist-info", "torch_xla-2.5.0+cpu.dist-info", "jaxlib-0.9.1.dist-info"):
        (site / name).mkdir(parents=True)
    shadowed = tmp_path / "later"
    (shadowed / "jax-0.1.0.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(site), str(shadowed)])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    versions = framework_versions()
    assert versions["jax"] == "0.9.1"  # the first on the path wins, as for imports
    assert versions["jaxlib"] == "0.9.1"
    assert versions["torch_xla"] == "2.5.0+cpu"
    assert "torch" not in versions
