"""What detection finds and how it is described: ``Detection``, the context detectors
read, visibility masks, the CPU device count and emulated hardware.

Pure logic over an environment mapping and a filesystem root, so it can be tested
against fake ``/sys`` and ``/dev`` trees.  Nothing here imports a framework: detection
must cost milliseconds and never grab a device that a test is about to use.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
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

PROBE_TIMEOUT = 120.0  # seconds the JAX probe may take by default


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
