"""One device set per pytest-xdist worker (``--accel-pin=auto``).

Each worker takes a disjoint, equal slice of the devices this process can see, always
indexing into an existing mask: with ``CUDA_VISIBLE_DEVICES=4,5,6,7`` and ``-n 2`` the
workers get ``4,5`` and ``6,7``.  The variables are set in the worker before its
conftest files are imported, so a framework imported there sees only its slice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_accel.hardware.detection import Detection, count_of
from pytest_accel.hardware.platforms import Platform, pinning_of


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


def shareable(
    detection: Detection, environ: Mapping[str, str], extra: Iterable[Platform] = ()
) -> list[str]:
    """The device entries (mask entries or indexes) that workers may split: none where
    the platform's row (``hardware.platforms``) has no pinning."""
    pinning = pinning_of(detection.platform, extra)
    return [] if pinning is None else pinning.shareable(detection, environ)


def pinnable(platform: str, extra: Iterable[Platform] = ()) -> bool:
    return pinning_of(platform, extra) is not None


def worker_index(worker: str) -> int:
    index = count_of(worker.removeprefix("gw"))
    if index is None:
        raise PinError(f"unexpected xdist worker id {worker!r}")
    return index


def plan_pin(
    detection: Detection,
    environ: Mapping[str, str],
    worker: str,
    workers: int,
    extra: Iterable[Platform] = (),
) -> Pin:
    """The variables worker ``worker`` (``gwK``) of ``workers`` sets for its slice, as
    the platform's row says (``hardware.platforms``)."""
    pinning = pinning_of(detection.platform, extra)
    if pinning is None:
        raise PinError(f"{detection.platform} devices are not pinned per worker")
    devices = pinning.shareable(detection, environ)
    per = len(devices) // workers if workers else 0
    if per == 0:
        raise PinError(
            f"-n {workers} workers cannot each hold one of {len(devices)} {detection.platform}"
            f" device(s); use -n {len(devices)} (or -n auto), or --accel-pin=off"
        )
    index = worker_index(worker)
    mine = tuple(devices[index * per : (index + 1) * per])
    env = pinning.variables(detection, environ, mine, index)
    count = len(mine) * pinning.devices_per_entry(detection)
    return Pin(worker, mine, env, count, len(devices))
