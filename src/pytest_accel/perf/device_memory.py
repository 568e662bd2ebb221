"""Each test's peak device memory, where its process has a GPU or TPU in use.

Nothing here imports a framework: the meter measures once the suite has imported JAX
or PyTorch (before its per-test hooks are registered, a suite without them pays
nothing per test), and reads only devices they have set up already:

- **JAX**: ``Device.memory_stats()`` (None on the CPU: such a device is never asked
  again).  Its ``peak_bytes_in_use`` is the process's since it started and cannot be
  reset, so a test's peak is exact only where the test raised it; where it did not,
  the larger of the bytes in use at its start and end is kept as a lower bound;
- **PyTorch**: ``torch.cuda.reset_peak_memory_stats`` before each test and
  ``max_memory_allocated`` after it (CUDA and ROCm builds alike): exact.

A device is named by the platform and its index on the machine (``gpu:3``): under
xdist with pinned devices a worker's ``CUDA_VISIBLE_DEVICES=3`` makes its only device
``gpu:3``, so each worker reports its own.  Two frameworks on one device add up (an
upper bound of their joint peak).  The figures ride on the teardown report
(``device_memory`` of ``outcomes.MEASURES_ATTR``), which pytest-xdist carries to the
controller; with
``--accel-max-device-memory`` a test whose peak passes the size fails at teardown.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Generator, Iterable, Mapping
from typing import Any, NamedTuple

import pytest

from pytest_accel.hardware.platforms import machine_device
from pytest_accel.imports import AfterImport, after_import
from pytest_accel.perf.meters import Span, add_meter
from pytest_accel.text import size

WORKEROUTPUT_MEMORY_PROBLEM = "pytest_accel_memory_problem"


class Peak(NamedTuple):
    device: str
    bytes: int
    exact: bool  # False: a lower bound (JAX, where the test did not raise the process's peak)


def device_name(platform: str, local: int, environ: Mapping[str, str] = os.environ) -> str:
    """``gpu:3``: the process's device ``local`` by its index on the machine, through
    the masks of the hardware's one platform table (``platforms.machine_device``)."""
    return machine_device(platform, local, environ)


class JaxMemory:
    """A JAX process's devices that report memory (GPU, TPU), read once set up."""

    def __init__(self) -> None:
        self.devices: list[Any] | None = None  # None: its backends are not set up yet
        self.before: dict[str, tuple[int, int]] = {}  # device -> (in use, peak) at the start

    def _devices(self) -> list[Any]:
        if self.devices is None:
            bridge = sys.modules.get("jax._src.xla_bridge")
            jax = sys.modules.get("jax")
            ready = getattr(bridge, "backends_are_initialized", None)
            if jax is None or ready is None or not ready():
                return []  # asking for devices now would set a backend up: not ours to do
            self.devices = [d for d in jax.local_devices() if d.memory_stats() is not None]
        return self.devices

    def begin(self) -> None:
        self.before = {}
        for device in self._devices():
            stats = device.memory_stats() or {}
            self.before[self._name(device)] = (
                int(stats.get("bytes_in_use", 0)),
                int(stats.get("peak_bytes_in_use", 0)),
            )

    def end(self) -> list[Peak]:
        found = []
        for device in self._devices():
            stats = device.memory_stats() or {}
            name = self._name(device)
            peak, in_use = int(stats.get("peak_bytes_in_use", 0)), int(stats.get("bytes_in_use", 0))
            if name not in self.before:  # set up during this test: its peak is the test's
                found.append(Peak(name, peak, True))
                continue
            started_with, peak_before = self.before[name]
            if peak > peak_before:
                found.append(Peak(name, peak, True))
            else:
                found.append(Peak(name, max(started_with, in_use), False))
        return found

    @staticmethod
    def _name(device: Any) -> str:
        index = getattr(device, "local_hardware_id", None)
        if not isinstance(index, int):
            index = int(getattr(device, "id", 0))
        return device_name(str(device.platform), index)


class TorchMemory:
    """PyTorch's CUDA (or ROCm) devices, once it has set CUDA up."""

    def _cuda(self) -> Any:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_initialized():
            return None
        return cuda

    def begin(self) -> None:
        cuda = self._cuda()
        if cuda is not None:
            for index in range(cuda.device_count()):
                cuda.reset_peak_memory_stats(index)

    def end(self) -> list[Peak]:
        cuda = self._cuda()
        if cuda is None:
            return []
        return [
            Peak(device_name("gpu", index), int(cuda.max_memory_allocated(index)), True)
            for index in range(cuda.device_count())
        ]


def combined(peaks: Iterable[Peak]) -> list[Peak]:
    """One peak per device: two frameworks' on one device added up, exact where both
    are; devices in order of name."""
    joined: dict[str, Peak] = {}
    for peak in peaks:
        kept = joined.get(peak.device)
        joined[peak.device] = (
            peak
            if kept is None
            else Peak(peak.device, kept.bytes + peak.bytes, kept.exact and peak.exact)
        )
    return [joined[name] for name in sorted(joined)]


def over_limit(peaks: list[Peak], limit: int) -> Peak | None:
    """The device whose peak passed ``limit`` bytes, the highest; None if none did."""
    over = [peak for peak in peaks if peak.bytes > limit]
    return max(over, key=lambda peak: peak.bytes) if over else None


FRAMEWORKS = ("jax", "torch")


class DeviceMemoryMeter:
    """Registered wherever tests run, with the timing feature or a memory limit.  It
    measures from the moment the suite has JAX or PyTorch (imported before collection
    ends, or later, in a test): only then are its per-test hooks registered, so a suite
    without them pays nothing per test."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.sources: dict[str, JaxMemory | TorchMemory] = {}
        self.problem: str | None = None  # why memory is not measured, if it is not
        self.config: pytest.Config | None = None
        self.watchers: list[AfterImport] = []
        self.measured = False  # its meter added (perf.meters)

    def start(self, config: pytest.Config) -> None:
        self.config = config
        self._look()
        self.watchers = [
            after_import(name, self._look) for name in FRAMEWORKS if name not in sys.modules
        ]

    def pytest_collection_finish(self) -> None:
        self._look()  # a conftest or a test module imported one (or put it in sys.modules)

    def _look(self) -> None:
        """Measure with the frameworks the suite has now."""
        arrived = [name for name in FRAMEWORKS if name in sys.modules and name not in self.sources]
        if not arrived or self.config is None:
            return
        for name in arrived:
            self.sources[name] = JaxMemory() if name == "jax" else TorchMemory()
        if not self.measured:
            self.measured = True
            add_meter(self.config, _MeasuredTests(self))

    def measuring(self) -> list[JaxMemory | TorchMemory]:
        return [] if self.problem is not None else list(self.sources.values())

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.problem is not None:
            workeroutput[WORKEROUTPUT_MEMORY_PROBLEM] = self.problem

    def pytest_unconfigure(self) -> None:
        for watcher in self.watchers:
            watcher.stop()
        self.watchers = []

    @contextlib.contextmanager
    def guarded(self) -> Generator[None]:
        """A framework that fails to answer stops the measuring, not the run: one note."""
        try:
            yield
        except Exception as exc:
            self.problem = f"device memory: {type(exc).__name__}: {exc}"
            self.sources = {}


class _MeasuredTests:
    """The meter (``perf.meters``) of each test's peak, from its start to the end of its
    teardown: ``device_memory``; over ``--accel-max-device-memory`` the test fails."""

    span: Span = "test"
    read_at_end = False  # its check may fail the test as its teardown is reported

    def __init__(self, meter: DeviceMemoryMeter) -> None:
        self.meter = meter
        self.running: pytest.Item | None = None

    def begin(self, item: pytest.Item) -> None:
        self.running = item
        with self.meter.guarded():
            for source in self.meter.measuring():
                source.begin()

    def end(self, item: pytest.Item) -> dict[str, Any]:
        if item is not self.running:
            return {}  # added after this test began
        peaks: list[Peak] = []
        with self.meter.guarded():
            peaks = combined(p for source in self.meter.measuring() for p in source.end())
        if not peaks:
            return {}
        return {"device_memory": [[p.device, p.bytes, int(p.exact)] for p in peaks]}

    def check(self, report: pytest.TestReport, measured: Mapping[str, Any]) -> None:
        limit = self.meter.limit
        peaks = [Peak(d, b, bool(e)) for d, b, e in measured.get("device_memory", ())]
        passed = limit is not None and over_limit(peaks, limit)
        if passed and report.outcome == "passed":
            report.outcome = "failed"
            report.longrepr = (
                f"device memory: peak {size(passed.bytes)} on {passed.device}"
                f"{'' if passed.exact else ' at least'} is over --accel-max-device-memory"
                f" {size(limit or 0)}"
            )
