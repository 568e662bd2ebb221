"""The platforms pytest-accel knows, one row each: what detection probes, what the
visibility variables are (in the order the runtime reads them), what JAX calls it, what
its marker says, and how an xdist worker gets its own share of its devices.

Detection (``builtin``), the markers, the policy, the options and the pinning of xdist
workers (``scaleout``) read this table and nothing else: a built-in platform is a probe
(``sysfs``) and a row here.  A plugin adds its own rows by returning ``Platform``
objects from ``pytest_accel_platforms`` (names alone still work): a row with a
``pinning`` gets a device set per xdist worker like the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_accel.hardware.detection import (
    UUID_MASKS,
    Detection,
    DetectionContext,
    mask_entries,
)
from pytest_accel.hardware.sysfs import probe_cuda, probe_rocm, probe_tpu

Probe = Callable[[DetectionContext], "Detection | None"]


@dataclass(frozen=True)
class Pinning:
    """How an xdist worker gets its own devices (``--accel-pin``).

    ``shareable``: the device entries workers split (an outer mask's entries, which a
    worker's mask indexes into, or physical indexes); ``variables``: what one worker
    sets for its entries (the detection, the environment, its entries, its index);
    ``devices_per_entry``: what a framework counts per entry (a TPU v2/v3 chip: two).
    """

    shareable: Callable[[Detection, Mapping[str, str]], list[str]]
    variables: Callable[[Detection, Mapping[str, str], Sequence[str], int], dict[str, str]]
    devices_per_entry: Callable[[Detection], int] = field(default=lambda detection: 1)


def visible_entries(environ: Mapping[str, str], variable: str, count: int) -> list[str]:
    """The entries ``variable`` leaves visible, or ``0..count-1`` where it is unset."""
    value = environ.get(variable)
    if value is None:
        return [str(i) for i in range(count)]
    return mask_entries(value, uuids=variable in UUID_MASKS)[:count]


def mask_pinning(variable: str) -> Pinning:
    """The pinning of a platform with one visibility variable (``CUDA_VISIBLE_DEVICES``,
    a plugin's ``SPYRE_VISIBLE_DEVICES``): each worker a slice of what it leaves."""

    def shareable(detection: Detection, environ: Mapping[str, str]) -> list[str]:
        return visible_entries(environ, variable, detection.device_count)

    def variables(
        detection: Detection, environ: Mapping[str, str], mine: Sequence[str], index: int
    ) -> dict[str, str]:
        return {variable: ",".join(mine)}

    return Pinning(shareable, variables)


def _rocm_shareable(detection: Detection, environ: Mapping[str, str]) -> list[str]:
    if "HIP_VISIBLE_DEVICES" in environ:  # HIP indexes into what ROCR leaves
        return visible_entries(environ, "HIP_VISIBLE_DEVICES", detection.device_count)
    return visible_entries(environ, "ROCR_VISIBLE_DEVICES", detection.device_count)


def _rocm_variables(
    detection: Detection, environ: Mapping[str, str], mine: Sequence[str], index: int
) -> dict[str, str]:
    if "HIP_VISIBLE_DEVICES" in environ:
        return {"HIP_VISIBLE_DEVICES": ",".join(mine)}
    return {
        "ROCR_VISIBLE_DEVICES": ",".join(mine),
        "HIP_VISIBLE_DEVICES": ",".join(map(str, range(len(mine)))),
    }


TPU_PORT_BASE = 8476  # libtpu's default process port; one per worker from here
# Chips of one process as libtpu's "x,y,z" bounds (single-host slices).
_TPU_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}


def _tpu_devices_per_chip(detection: Detection) -> int:
    return 2 if detection.device_kind in ("TPU v2", "TPU v3") else 1


def _tpu_shareable(detection: Detection, environ: Mapping[str, str]) -> list[str]:
    chips = detection.device_count // _tpu_devices_per_chip(detection)
    return visible_entries(environ, "TPU_VISIBLE_CHIPS", chips)


def _tpu_variables(
    detection: Detection, environ: Mapping[str, str], mine: Sequence[str], index: int
) -> dict[str, str]:
    count = len(mine)
    return {
        "TPU_VISIBLE_CHIPS": ",".join(mine),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": _TPU_BOUNDS.get(count, f"1,{count},1"),
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": str(TPU_PORT_BASE + index),
    }


@dataclass(frozen=True)
class Platform:
    """One platform, everything the features need to know of it."""

    name: str
    family: str | None = None  # a name that matches it and its siblings ("gpu")
    probe: Probe | None = None  # its system probe; None: not probed (cpu, or a plugin's)
    # Its visibility variables, outermost first; the variables of one level are
    # alternatives, the first one set applies (HIP reads HIP_VISIBLE_DEVICES, else
    # CUDA_VISIBLE_DEVICES, within what ROCR_VISIBLE_DEVICES leaves).
    masks: tuple[tuple[str, ...], ...] = ()
    jax_name: str | None = None  # its name in JAX_PLATFORMS; None: JAX does not run it
    marker: str | None = None  # its shorthand marker's help ("tpu(...): ..."); None: none
    aliases: tuple[tuple[str, str], ...] = ()  # other markers meaning it: (name, help)
    pinning: Pinning | None = None  # how an xdist worker gets its own devices


# In the order the probes run (the CPU is what is left when none finds anything).
PLATFORMS: tuple[Platform, ...] = (
    Platform("cpu", jax_name="cpu"),
    Platform(
        "tpu",
        probe=probe_tpu,
        masks=(("TPU_VISIBLE_CHIPS",),),
        jax_name="tpu",
        marker="tpu(min_devices=1, kind=None): run only on TPU; shorthand for accel('tpu').",
        aliases=(("tpu_ci", "tpu_ci(min_devices=1, kind=None): TPU CI tier; alias of tpu."),),
        pinning=Pinning(_tpu_shareable, _tpu_variables, _tpu_devices_per_chip),
    ),
    Platform(
        "cuda",
        family="gpu",
        probe=probe_cuda,
        masks=(("CUDA_VISIBLE_DEVICES",),),
        jax_name="cuda",
        marker="cuda(min_devices=1, kind=None): run only on NVIDIA CUDA GPUs.",
        pinning=mask_pinning("CUDA_VISIBLE_DEVICES"),
    ),
    Platform(
        "rocm",
        family="gpu",
        probe=probe_rocm,
        # HIP indexes into what ROCR leaves (and honours CUDA_VISIBLE_DEVICES).
        masks=(("ROCR_VISIBLE_DEVICES",), ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")),
        jax_name="rocm",
        marker="rocm(min_devices=1, kind=None): run only on AMD ROCm GPUs.",
        pinning=Pinning(_rocm_shareable, _rocm_variables),
    ),
)

# A family's marker help: what its name matches.
FAMILY_MARKERS = {"gpu": "gpu(min_devices=1, kind=None): run only on a GPU (cuda or rocm)."}


def builtin_names() -> tuple[str, ...]:
    return tuple(row.name for row in PLATFORMS)


def families() -> dict[str, frozenset[str]]:
    """Each family and the platforms it matches (``gpu``: cuda and rocm)."""
    found: dict[str, set[str]] = {}
    for row in PLATFORMS:
        if row.family:
            found.setdefault(row.family, set()).add(row.name)
    return {family: frozenset(names) for family, names in found.items()}


def probe_order() -> tuple[Platform, ...]:
    """The rows with a system probe, in the order they are probed."""
    return tuple(row for row in PLATFORMS if row.probe is not None)


def jax_names() -> dict[str, str]:
    """JAX_PLATFORMS (and PJRT_DEVICE) names -> platforms, families included."""
    names = {row.jax_name: row.name for row in PLATFORMS if row.jax_name}
    return {**names, **{family: family for family in families()}}


def shorthand_markers() -> dict[str, tuple[str, str]]:
    """Marker name -> (the platform or family it requires, its help)."""
    found: dict[str, tuple[str, str]] = {}
    for row in PLATFORMS:
        if row.marker:
            found[row.name] = (row.name, row.marker)
        for alias, text in row.aliases:
            found[alias] = (row.name, text)
    for family, text in FAMILY_MARKERS.items():
        found[family] = (family, text)
    return found


def platform_matches(wanted: str, platform: str) -> bool:
    """``gpu`` matches ``cuda`` and ``rocm``; every other name matches itself."""
    if platform == wanted:
        return True
    members = families().get(wanted)
    return members is not None and platform in members


def rows(extra: Iterable[Platform] = ()) -> dict[str, Platform]:
    """Every row by name: the built-in ones, then a plugin's (``pytest_accel_platforms``)."""
    return {row.name: row for row in (*PLATFORMS, *extra)}


def pinning_of(platform: str, extra: Iterable[Platform] = ()) -> Pinning | None:
    row = rows(extra).get(platform)
    return None if row is None else row.pinning


def machine_device(platform: str, local: int, environ: Mapping[str, str]) -> str:
    """``gpu:3``: the device a process knows as ``local`` of ``platform`` (a framework's
    name: ``gpu``, ``cuda``, ``rocm``, ``tpu``), named by its index on the machine
    through the platform's masks, innermost first (an xdist worker pinned to
    ``ROCR_VISIBLE_DEVICES=2,3`` with ``HIP_VISIBLE_DEVICES=0,1`` has ``gpu:2`` as its
    first); a mask entry that is a UUID names it; past a mask's end, ``local`` stays."""
    gpus = families().get("gpu", frozenset())
    kind = "gpu" if platform == "gpu" or platform in gpus else platform
    rows = {row.name: row for row in PLATFORMS}
    if platform == "gpu":  # a framework that does not say (PyTorch's CUDA and ROCm builds)
        own = {name for level in rows["rocm"].masks for name in level} - {
            name for level in rows["cuda"].masks for name in level
        }
        platform = "rocm" if own & set(environ) else "cuda"
    row = rows.get(platform)
    index = str(local)
    for level in reversed(row.masks if row is not None else ()):
        variable = next((name for name in level if name in environ), None)
        if variable is None:
            continue
        entries = mask_entries(environ[variable], uuids=variable in UUID_MASKS)
        if not index.isdigit() or not 0 <= int(index) < len(entries):
            break
        index = entries[int(index)]
    return f"{kind}:{index}"
