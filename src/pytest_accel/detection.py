"""Device detection: which accelerator this process would run on, and why.

Pure logic over an environment mapping and a filesystem root, so it can be tested
against fake ``/sys`` and ``/dev`` trees.  Nothing here imports a framework: detection
must cost milliseconds and never grab a device that a test is about to use.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN_PLATFORMS: tuple[str, ...] = ("cpu", "cuda", "rocm", "tpu")
# `gpu` is a family, not a platform: it matches whatever GPU platform was detected.
PLATFORM_FAMILIES: Mapping[str, frozenset[str]] = {"gpu": frozenset({"cuda", "rocm"})}
ACCELERATOR_PROBE_ORDER: tuple[str, ...] = ("tpu", "cuda", "rocm")

GOOGLE_PCI_VENDOR = "0x1ae0"
PROBE_TIMEOUT = 120.0  # seconds the JAX probe may take by default


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


@dataclass(frozen=True)
class Detection:
    """What a run targets: platform, how many devices, which kind, and the evidence."""

    platform: str
    device_count: int
    device_kind: str | None = None
    source: str = "default"
    evidence: tuple[str, ...] = ()
    # Set in an xdist worker that holds a slice of the devices (--accel-pin).
    pinned: bool = False

    @property
    def is_accelerator(self) -> bool:
        return self.platform != "cpu"

    def describe(self) -> str:
        """``tpu x8 (TPU v6 lite) via pci``."""
        kind = f" ({self.device_kind})" if self.device_kind and self.is_accelerator else ""
        return f"{self.platform} x{self.device_count}{kind} via {self.source}"

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "device_count": self.device_count,
            "device_kind": self.device_kind,
            "source": self.source,
            "evidence": list(self.evidence),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Detection:
        return cls(
            platform=str(data["platform"]),
            device_count=int(data["device_count"]),
            device_kind=data.get("device_kind"),
            source=str(data.get("source", "default")),
            evidence=tuple(str(e) for e in data.get("evidence", ())),
        )


@dataclass
class DetectionContext:
    """Input to every detector; detectors append what they checked to ``evidence``."""

    sysroot: Path
    environ: Mapping[str, str]
    requested: str | None = None
    evidence: list[str] = field(default_factory=list)

    def path(self, absolute: str) -> Path:
        return self.sysroot / absolute.lstrip("/")

    def note(self, line: str) -> None:
        self.evidence.append(line)


def sysroot_from_env(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("PYTEST_ACCEL_SYSROOT") or "/")


def platform_matches(wanted: str, platform: str) -> bool:
    """``gpu`` matches ``cuda`` and ``rocm``; every other name matches itself."""
    return platform == wanted or platform in PLATFORM_FAMILIES.get(wanted, frozenset())


# --- CPU ----------------------------------------------------------------------------

_XLA_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def cpu_device_count(environ: Mapping[str, str]) -> tuple[int, str | None]:
    """JAX host device count and the variable that set it (None: the default of 1)."""
    value = environ.get("JAX_NUM_CPU_DEVICES", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value), f"JAX_NUM_CPU_DEVICES={value}"
    match = _XLA_HOST_COUNT.search(environ.get("XLA_FLAGS", ""))
    if match and int(match.group(1)) > 0:
        return int(match.group(1)), f"XLA_FLAGS={match.group(0)}"
    return 1, None


def cpu_detection(ctx: DetectionContext, source: str = "default") -> Detection:
    count, origin = cpu_device_count(ctx.environ)
    if origin:
        ctx.note(f"cpu devices: {count} from {origin}")
    return Detection("cpu", count, "cpu", source, tuple(ctx.evidence))


# --- visibility masks -----------------------------------------------------------------

_HIDDEN = {"", "-1", "none", "nodevfiles", "void"}


def mask_entries(value: str) -> list[str]:
    """Entries of a ``*_VISIBLE_*`` mask up to the first invalid one (as CUDA reads it)."""
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.lower() in _HIDDEN or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def apply_mask(ctx: DetectionContext, variable: str, physical: int) -> int:
    """How many of ``physical`` devices remain visible through ``variable``."""
    value = ctx.environ.get(variable)
    if value is None:
        return physical
    entries = mask_entries(value)
    visible = 0
    for entry in entries:
        if entry.isdigit() and int(entry) >= physical:
            break  # an index past the end stops the mask, as in the CUDA runtime
        visible += 1
    visible = min(visible, physical)
    ctx.note(f"{variable}={value!r} leaves {visible} of {physical} visible")
    return visible


# --- sysfs and /dev probes ------------------------------------------------------------


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


PROBES = {"tpu": probe_tpu, "cuda": probe_cuda, "rocm": probe_rocm}


# --- framework selectors --------------------------------------------------------------

_SELECTOR_PLATFORMS = {
    "cpu": "cpu",
    "tpu": "tpu",
    "cuda": "cuda",
    "rocm": "rocm",
    "gpu": "gpu",
}


def framework_selection(ctx: DetectionContext) -> tuple[list[str] | None, str | None]:
    """Platforms JAX (``JAX_PLATFORMS``) or torch_xla (``PJRT_DEVICE``) may use, in order.

    Returns ``(None, None)`` when neither is set, else the allowed list and the setting.
    """
    for variable in ("JAX_PLATFORMS", "PJRT_DEVICE"):
        value = ctx.environ.get(variable, "").strip()
        if not value:
            continue
        allowed = [
            _SELECTOR_PLATFORMS[p]
            for p in (part.strip().lower() for part in value.split(","))
            if p in _SELECTOR_PLATFORMS
        ]
        setting = f"{variable}={value}"
        ctx.note(f"env {setting}")
        return allowed, setting
    return None, None


def detect_builtin(ctx: DetectionContext) -> Detection | None:
    """Selectors, then masks and system probes; None when no built-in platform applies.

    Returning None lets third-party detectors and then the CPU fallback answer.
    """
    if ctx.requested and ctx.requested not in (*BUILTIN_PLATFORMS, *PLATFORM_FAMILIES):
        return None  # a third-party platform was asked for: leave it to its detector
    allowed, setting = framework_selection(ctx)
    if allowed is not None and allowed and allowed[0] == "cpu":
        return cpu_detection(ctx, source=f"env {setting}")
    order = list(ACCELERATOR_PROBE_ORDER)
    if ctx.requested and ctx.requested != "cpu":
        wanted = [p for p in order if platform_matches(ctx.requested, p)]
        order = wanted + [p for p in order if p not in wanted]
    if allowed:
        order = [p for p in order if any(platform_matches(a, p) for a in allowed)]
    for platform in order:
        found = PROBES[platform](ctx)
        if found:
            if setting:
                return Detection(
                    found.platform,
                    found.device_count,
                    found.device_kind,
                    f"{found.source} ({setting})",
                    found.evidence,
                )
            return found
    return None


# --- emulation --------------------------------------------------------------------------


class EmulationSpecError(ValueError):
    pass


def parse_emulation(spec: str, known_platforms: Iterable[str]) -> Detection:
    """``tpu:8:TPU v5 lite`` -> a Detection that selection treats as real."""
    parts = spec.split(":", 2)
    platform = parts[0].strip().lower()
    known = sorted(set(known_platforms))
    if platform not in known:
        raise EmulationSpecError(f"unknown platform {platform!r} (choose from {', '.join(known)})")
    count = 1
    if len(parts) > 1:
        text = parts[1].strip()
        if not text.isdigit() or int(text) < 1:
            raise EmulationSpecError(f"device count {text!r} is not a positive integer")
        count = int(text)
    kind = parts[2].strip() if len(parts) > 2 and parts[2].strip() else None
    if platform == "cpu":
        kind = "cpu"
    evidence = (f"--accel-emulate={spec}",)
    return Detection(platform, count, kind, "emulated", evidence)


def describe_evidence(evidence: Sequence[str]) -> str:
    return "; ".join(evidence) if evidence else "nothing checked"


def framework_versions() -> dict[str, str]:
    """Installed framework versions, read from metadata (never by importing them)."""
    versions: dict[str, str] = {}
    for name in ("jax", "jaxlib", "torch", "torch_xla"):
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            try:
                versions[name] = importlib.metadata.version(name.replace("_", "-"))
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions
