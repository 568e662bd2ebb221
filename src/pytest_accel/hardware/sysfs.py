"""Cheap system probes for TPU, NVIDIA and AMD devices: files under ``/sys``, ``/dev``
and ``/proc`` (below ``PYTEST_ACCEL_SYSROOT`` when it is set), never a framework."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_accel.hardware.detection import Detection, DetectionContext, apply_mask

GOOGLE_PCI_VENDOR = "0x1ae0"


@dataclass(frozen=True)
class TpuChip:
    device_kind: str
    devices_per_chip: int


# PCI device id -> chip; the device kinds are the strings JAX reports.
TPU_PCI_DEVICES: Mapping[str, TpuChip] = {
    "0x0027": TpuChip("TPU v3", 2),  # v2 and v3 share the id; see _tpu_chip()
    "0x005e": TpuChip("TPU v4", 1),
    "0x0062": TpuChip("TPU v5", 1),
    "0x0063": TpuChip("TPU v5 lite", 1),
    "0x006f": TpuChip("TPU v6 lite", 1),
    "0x0076": TpuChip("TPU7x", 1),
}
_TPU_V2_SUBSYSTEM = "0x004e"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _tpu_chip(device_dir: Path) -> TpuChip | None:
    if _read(device_dir / "vendor") != GOOGLE_PCI_VENDOR:
        return None
    device_id = _read(device_dir / "device") or ""
    chip = TPU_PCI_DEVICES.get(device_id)
    if (
        chip
        and device_id == "0x0027"
        and _read(device_dir / "subsystem_device") == (_TPU_V2_SUBSYSTEM)
    ):
        return TpuChip("TPU v2", 2)
    return chip


def _numbered(directory: Path, prefix: str) -> list[Path]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    pattern = re.compile(rf"{re.escape(prefix)}\d+")
    return sorted(directory / n for n in names if pattern.fullmatch(n))


def _vfio_tpu_groups(ctx: DetectionContext) -> list[str]:
    """Numbered ``/dev/vfio/N`` whose IOMMU group holds a Google TPU."""
    groups: list[str] = []
    for node in _numbered(ctx.path("/dev/vfio"), ""):
        group_devices = ctx.path(f"/sys/kernel/iommu_groups/{node.name}/devices")
        try:
            members = sorted(os.listdir(group_devices))
        except OSError:
            members = []
        if any(_tpu_chip(group_devices / m) for m in members):
            groups.append(node.name)
    return groups


def probe_tpu(ctx: DetectionContext) -> Detection | None:
    chips: list[TpuChip] = []
    pci_root = ctx.path("/sys/bus/pci/devices")
    try:
        pci_names = sorted(os.listdir(pci_root))
    except OSError:
        pci_names = []
    for name in pci_names:
        chip = _tpu_chip(pci_root / name)
        if chip:
            chips.append(chip)
    ctx.note(
        f"/sys/bus/pci/devices: {len(chips)} TPU chip(s) (vendor {GOOGLE_PCI_VENDOR})"
        f" among {len(pci_names)} PCI device(s)"
    )
    accel_nodes = _numbered(ctx.path("/dev"), "accel")
    ctx.note(f"/dev/accel*: {len(accel_nodes)} node(s)")
    vfio_groups = _vfio_tpu_groups(ctx)
    if ctx.path("/dev/vfio").is_dir():
        ctx.note(f"/dev/vfio: {len(vfio_groups)} IOMMU group(s) holding a TPU")

    if chips:
        kind, per_chip, source = chips[0].device_kind, chips[0].devices_per_chip, "pci"
        physical = len(chips)
    elif accel_nodes or vfio_groups:
        # Device nodes without readable PCI data (a container): count nodes, kind unknown.
        kind, per_chip, source = None, 1, "dev"
        physical = len(accel_nodes) or len(vfio_groups)
    else:
        return None
    visible = apply_mask(ctx, "TPU_VISIBLE_CHIPS", physical)
    if visible == 0:
        return None
    return Detection("tpu", visible * per_chip, kind, source, tuple(ctx.evidence))


def _nvidia_models(ctx: DetectionContext) -> list[str]:
    models: list[str] = []
    gpus = ctx.path("/proc/driver/nvidia/gpus")
    try:
        entries = sorted(os.listdir(gpus))
    except OSError:
        return models
    for entry in entries:
        info = _read(gpus / entry / "information") or ""
        match = re.search(r"^Model:\s*(.+)$", info, re.MULTILINE)
        models.append(match.group(1).strip() if match else "NVIDIA GPU")
    return models


def probe_cuda(ctx: DetectionContext) -> Detection | None:
    nodes = _numbered(ctx.path("/dev"), "nvidia")
    models = _nvidia_models(ctx)
    ctx.note(f"/dev/nvidia[0-9]*: {len(nodes)} node(s)")
    ctx.note(f"/proc/driver/nvidia/gpus: {len(models)} GPU(s)")
    physical = max(len(nodes), len(models))
    if physical == 0:
        return None
    visible = apply_mask(ctx, "CUDA_VISIBLE_DEVICES", physical)
    if visible == 0:
        return None
    source = "procfs" if models else "dev"
    kind = models[0] if models else None
    return Detection("cuda", visible, kind, source, tuple(ctx.evidence))


def probe_rocm(ctx: DetectionContext) -> Detection | None:
    nodes_dir = ctx.path("/sys/class/kfd/kfd/topology/nodes")
    kinds: list[str] = []
    for node in _numbered(nodes_dir, ""):
        properties = _read(node / "properties") or ""
        match = re.search(r"^simd_count\s+(\d+)", properties, re.MULTILINE)
        if match and int(match.group(1)) > 0:
            kinds.append(_read(node / "name") or "AMD GPU")
    ctx.note(f"KFD topology: {len(kinds)} GPU node(s) with simd_count > 0")
    if not kinds:
        return None
    visible = apply_mask(ctx, "ROCR_VISIBLE_DEVICES", len(kinds))
    # HIP indexes into what ROCR left; it also honours CUDA_VISIBLE_DEVICES.
    hip_mask = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in ctx.environ else None
    if hip_mask is None and "CUDA_VISIBLE_DEVICES" in ctx.environ:
        hip_mask = "CUDA_VISIBLE_DEVICES"
    if hip_mask:
        visible = apply_mask(ctx, hip_mask, visible)
    if visible == 0:
        return None
    return Detection("rocm", visible, kinds[0], "kfd", tuple(ctx.evidence))
