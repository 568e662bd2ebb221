"""What detection finds and how it is described: ``Detection``, the context detectors
read, visibility masks, the CPU device count and emulated hardware.

Pure logic over an environment mapping and a filesystem root, so it can be tested
against fake ``/sys`` and ``/dev`` trees.  Nothing here imports a framework: detection
must cost milliseconds and never grab a device that a test is about to use.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_accel.text import one_line, shown


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

    @property
    def ignored(self) -> tuple[str, ...]:
        """Settings detection could not use (a malformed count or mask entry)."""
        return tuple(e.removeprefix(IGNORED) for e in self.evidence if e.startswith(IGNORED))

    def describe(self) -> str:
        """``tpu x8 (TPU v6 lite) via pci``, on one line whatever a detector reported."""
        kind = f" ({self.device_kind})" if self.device_kind and self.is_accelerator else ""
        return one_line(f"{self.platform} x{self.device_count}{kind} via {self.source}")

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

    def ignore(self, what: str) -> None:
        """A setting that could not be used: in the evidence, and in the header."""
        self.evidence.append(IGNORED + what)


IGNORED = "ignored: "


class DetectionError(ValueError):
    """A setting of ours that detection cannot work with (a usage error)."""


def sysroot_from_env(environ: Mapping[str, str]) -> Path:
    """The filesystem root the probes read: ``/``, or ``PYTEST_ACCEL_SYSROOT``."""
    value = environ.get("PYTEST_ACCEL_SYSROOT")
    if not value:
        return Path("/")
    root = Path(value)
    try:
        found = root.is_dir()
    except (OSError, ValueError) as exc:  # a name too long, a NUL: not a directory either
        found, why = False, f": {getattr(exc, 'strerror', None) or exc}"
    else:
        why = ""
    if not found:
        raise DetectionError(
            f"PYTEST_ACCEL_SYSROOT={shown(value, 300)} is not a directory{why} (it names the"
            " filesystem root that device detection reads instead of /)"
        )
    return root


_COUNT = re.compile(r"[0-9]{1,7}")  # ASCII digits only (int() also takes "²" and "١٢")


def count_of(text: str) -> int | None:
    stripped = text.strip()
    return int(stripped) if _COUNT.fullmatch(stripped) else None


# --- CPU ----------------------------------------------------------------------------

_XLA_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=(\S*)")


def cpu_device_count(
    environ: Mapping[str, str], ignore: Callable[[str], None] = lambda _: None
) -> tuple[int, str | None]:
    """JAX host device count and the variable that set it (None: the default of 1);
    a value that is not a positive count is passed to ``ignore`` and skipped."""
    value = environ.get("JAX_NUM_CPU_DEVICES", "").strip()
    if value:
        count = count_of(value)
        if count:
            return count, f"JAX_NUM_CPU_DEVICES={value}"
        ignore(f"JAX_NUM_CPU_DEVICES={shown(value)} (not a positive count)")
    match = _XLA_HOST_COUNT.search(environ.get("XLA_FLAGS", ""))
    if match:
        count = count_of(match.group(1))
        if count:
            return count, f"XLA_FLAGS={match.group(0)}"
        ignore(f"XLA_FLAGS {shown(match.group(0))} (not a positive count)")
    return 1, None


def cpu_detection(ctx: DetectionContext, source: str = "default") -> Detection:
    count, origin = cpu_device_count(ctx.environ, ctx.ignore)
    if origin:
        ctx.note(f"cpu devices: {count} from {origin}")
    return Detection("cpu", count, "cpu", source, tuple(ctx.evidence))


# --- visibility masks -----------------------------------------------------------------

_INDEX = re.compile(r"[0-9]{1,4}")
# CUDA and ROCm also take device UUIDs (nvidia-smi -L, rocm-smi --showuniqueid).
_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z-]{1,64}")
UUID_MASKS = frozenset({"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
_HIDE = frozenset({"", "-1", "none", "void", "nodevfiles"})


@dataclass(frozen=True)
class Mask:
    """A ``*_VISIBLE_*`` variable as the runtime reads it."""

    entries: tuple[str, ...]  # the devices it leaves visible, in order
    stop: str | None = None  # why reading stopped early, for the evidence


def read_mask(value: str, physical: int | None = None, *, uuids: bool = True) -> Mask:
    """Comma-separated device indexes (and with ``uuids`` GPU-/MIG- UUIDs), read as the
    CUDA runtime, ROCm and libtpu do: the list ends at the first entry that is not one,
    repeats an earlier one or is past the last device (``-1``, ``NoDevFiles`` or an empty
    value hide every device)."""
    entries: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if _INDEX.fullmatch(entry):
            if physical is not None and int(entry) >= physical:
                return Mask(tuple(entries), f"{shown(entry)} is past the last device")
        elif not (uuids and _UUID.fullmatch(entry)):
            if entry.lower() in _HIDE:  # the documented ways to hide devices: no note
                return Mask(tuple(entries))
            return Mask(tuple(entries), f"{shown(entry)} is not a device index")
        if entry in entries:
            return Mask(tuple(entries), f"{shown(entry)} is repeated")
        entries.append(entry)
    return Mask(tuple(entries))


def mask_entries(value: str, *, uuids: bool = True) -> list[str]:
    """The entries a mask leaves visible (see ``read_mask``)."""
    return list(read_mask(value, uuids=uuids).entries)


def apply_mask(ctx: DetectionContext, variable: str, physical: int) -> int:
    """How many of ``physical`` devices remain visible through ``variable``."""
    value = ctx.environ.get(variable)
    if value is None:
        return physical
    mask = read_mask(value, physical, uuids=variable in UUID_MASKS)
    visible = min(len(mask.entries), physical)
    line = f"{variable}={shown(value)} leaves {visible} of {physical} visible"
    if mask.stop:
        ctx.ignore(f"{line}: the list ends where {mask.stop}, as the runtime reads it")
    else:
        ctx.note(line)
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
        found = count_of(text)
        if not found:
            raise EmulationSpecError(f"device count {shown(text)} is not a positive integer")
        count = found
    kind = parts[2].strip() if len(parts) > 2 and parts[2].strip() else None
    if platform == "cpu":
        kind = "cpu"
    evidence = (f"--accel-emulate={spec}",)
    return Detection(platform, count, kind, "emulated", evidence)


def describe_evidence(evidence: Sequence[str]) -> str:
    return one_line("; ".join(evidence)) if evidence else "nothing checked"


def module_installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported, never importing it.  A module
    already in ``sys.modules`` counts, a conftest's stub or mock included (which has no
    ``__spec__``, so ``find_spec`` would raise)."""
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken package on the path
        return False


# Runtimes installed as wheels beside the frameworks: libtpu (JAX's TPU runtime) and the
# CUDA runtime of JAX's and PyTorch's pip installs, by the distributions that carry them.
RUNTIME_DISTRIBUTIONS = {
    "libtpu": ("libtpu", "libtpu-nightly"),
    "cuda": ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
}
ROCM_VERSION_FILE = "/opt/rocm/.info/version"  # ROCm's own install says its version here


def framework_versions(sysroot: Path | None = None) -> dict[str, str]:
    """Installed framework and runtime versions, never by importing them: from the
    installed distribution's directory name (``jax-0.10.2.dist-info``), which every
    installer writes; ``importlib.metadata`` (a 20 ms import) only if that is not found.
    ROCm's from its install (``/opt/rocm/.info/version``, under ``sysroot``)."""
    versions: dict[str, str] = {}
    wanted = {"jax": "jax", "jaxlib": "jaxlib", "torch": "torch", "torch-xla": "torch_xla"}
    runtimes = {dist for names in RUNTIME_DISTRIBUTIONS.values() for dist in names}
    found = _distributions(set(wanted) | runtimes)
    for name, module in wanted.items():
        if name in found:
            versions[module] = found[name]
        elif module_installed(module):
            from importlib import metadata

            try:
                versions[module] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    for runtime, distributions in RUNTIME_DISTRIBUTIONS.items():
        version = next((found[dist] for dist in distributions if dist in found), None)
        if version is not None:
            versions[runtime] = version
    root = sysroot if sysroot is not None else sysroot_from_env(os.environ)
    try:
        rocm = (root / ROCM_VERSION_FILE.lstrip("/")).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        rocm = ""
    if rocm:
        versions["rocm"] = rocm.split("-", 1)[0]  # 6.2.1-116: the release, not the build
    return versions


def _distributions(names: set[str]) -> dict[str, str]:
    """The versions of ``names`` (normalised project names) installed on ``sys.path``,
    read from their ``NAME-VERSION.dist-info`` directories; the first on the path wins."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for child in listing:
            if not child.endswith(".dist-info") or "-" not in child:
                continue
            project, _, version = child[: -len(".dist-info")].partition("-")
            name = re.sub(r"[-_.]+", "-", project).lower()
            if name in names and name not in found:
                found[name] = version
    return found
