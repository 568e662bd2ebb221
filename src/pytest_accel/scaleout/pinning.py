"""One device set per pytest-xdist worker (``--accel-pin=auto``).

Each worker takes a disjoint, equal slice of the devices this process can see, always
indexing into an existing mask: with ``CUDA_VISIBLE_DEVICES=4,5,6,7`` and ``-n 2`` the
workers get ``4,5`` and ``6,7``.  The variables are set in the worker before its
conftest files are imported, so a framework imported there sees only its slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_accel.hardware.detection import UUID_MASKS, Detection, count_of, mask_entries

PINNED_PLATFORMS = ("cuda", "rocm", "tpu")
TPU_PORT_BASE = 8476  # libtpu's default process port; one per worker from here
# Chips of one process as libtpu's "x,y,z" bounds (single-host slices).
_TPU_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}


class PinError(ValueError):
    pass


@dataclass(frozen=True)
class Pin:
    worker: str
    devices: tuple[str, ...]  # entries of the outer mask (or physical indexes) this worker holds
    env: dict[str, str]
    device_count: int  # devices a framework will see in this worker
    of: int  # devices there were to share

    def describe(self) -> str:
        return f"xdist worker {self.worker} holds {','.join(self.devices)} of {self.of}"


def _visible(environ: Mapping[str, str], variable: str, count: int) -> list[str]:
    value = environ.get(variable)
    if value is None:
        return [str(i) for i in range(count)]
    return mask_entries(value, uuids=variable in UUID_MASKS)[:count]


def _devices_per_chip(detection: Detection) -> int:
    return 2 if detection.device_kind in ("TPU v2", "TPU v3") else 1


def shareable(detection: Detection, environ: Mapping[str, str]) -> list[str]:
    """The device entries (mask entries or indexes) that workers may split."""
    if detection.platform == "cuda":
        return _visible(environ, "CUDA_VISIBLE_DEVICES", detection.device_count)
    if detection.platform == "rocm":
        if "HIP_VISIBLE_DEVICES" in environ:  # HIP indexes into what ROCR leaves
            return _visible(environ, "HIP_VISIBLE_DEVICES", detection.device_count)
        return _visible(environ, "ROCR_VISIBLE_DEVICES", detection.device_count)
    if detection.platform == "tpu":
        chips = detection.device_count // _devices_per_chip(detection)
        return _visible(environ, "TPU_VISIBLE_CHIPS", chips)
    return []


def worker_index(worker: str) -> int:
    index = count_of(worker.removeprefix("gw"))
    if index is None:
        raise PinError(f"unexpected xdist worker id {worker!r}")
    return index


def plan_pin(detection: Detection, environ: Mapping[str, str], worker: str, workers: int) -> Pin:
    """The variables worker ``worker`` (``gwK``) of ``workers`` sets for its slice."""
    devices = shareable(detection, environ)
    per = len(devices) // workers if workers else 0
    if per == 0:
        raise PinError(
            f"-n {workers} workers cannot each hold one of {len(devices)} {detection.platform}"
            f" device(s); use -n {len(devices)} (or -n auto), or --accel-pin=off"
        )
    index = worker_index(worker)
    mine = tuple(devices[index * per : (index + 1) * per])
    joined = ",".join(mine)
    env: dict[str, str]
    count = len(mine)
    if detection.platform == "cuda":
        env = {"CUDA_VISIBLE_DEVICES": joined}
    elif detection.platform == "rocm":
        if "HIP_VISIBLE_DEVICES" in environ:
            env = {"HIP_VISIBLE_DEVICES": joined}
        else:
            env = {
                "ROCR_VISIBLE_DEVICES": joined,
                "HIP_VISIBLE_DEVICES": ",".join(map(str, range(count))),
            }
    else:  # tpu
        env = {
            "TPU_VISIBLE_CHIPS": joined,
            "TPU_CHIPS_PER_PROCESS_BOUNDS": _TPU_BOUNDS.get(count, f"1,{count},1"),
            "TPU_PROCESS_BOUNDS": "1,1,1",
            "TPU_PROCESS_PORT": str(TPU_PORT_BASE + index),
        }
        count *= _devices_per_chip(detection)
    return Pin(worker, mine, env, count, len(devices))
