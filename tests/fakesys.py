"""Fake /sys, /dev and /proc trees for detection tests (``PYTEST_ACCEL_SYSROOT``), and
shared helpers for the tests."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_accel
from tests.forked import Run, run_forked

ACCEL_ENV = (
    "PYTEST_ACCEL",
    "PYTEST_ACCEL_SYSROOT",
    "JAX_PLATFORMS",
    "PJRT_DEVICE",
    "JAX_NUM_CPU_DEVICES",
    "XLA_FLAGS",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "TPU_VISIBLE_CHIPS",
    "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY",
    # When this suite itself runs under pytest-xdist, an in-process run must not think
    # it is a worker (it would pin devices).
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
)


class FakeSys:
    """Builds the files detection reads, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pci = 0
        (root / "dev").mkdir(parents=True, exist_ok=True)
        (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)

    def _write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def pci_device(self, vendor: str, device: str, subsystem: str = "0x0000") -> str:
        address = f"0000:00:{self._pci:02x}.0"
        self._pci += 1
        base = f"sys/bus/pci/devices/{address}"
        self._write(f"{base}/vendor", f"{vendor}\n")
        self._write(f"{base}/device", f"{device}\n")
        self._write(f"{base}/subsystem_device", f"{subsystem}\n")
        return address

    def add_tpu(self, chips: int, device_id: str = "0x0063", *, accel_nodes: bool = True) -> None:
        for index in range(chips):
            self.pci_device("0x1ae0", device_id)
            if accel_nodes:
                self._write(f"dev/accel{index}", "")

    def add_nvidia(self, gpus: int, model: str = "NVIDIA A100-SXM4-80GB") -> None:
        self._write("dev/nvidiactl", "")
        for index in range(gpus):
            self._write(f"dev/nvidia{index}", "")
            self._write(
                f"proc/driver/nvidia/gpus/0000:{index:02x}:00.0/information",
                f"Model: \t\t {model}\nIRQ:   \t\t 42\n",
            )

    def add_kfd_node(self, simd_count: int, name: str) -> None:
        nodes = self.root / "sys/class/kfd/kfd/topology/nodes"
        index = len(list(nodes.iterdir())) if nodes.is_dir() else 0
        self._write(
            f"sys/class/kfd/kfd/topology/nodes/{index}/properties",
            f"cpu_cores_count 0\nsimd_count {simd_count}\nmem_banks_count 1\n",
        )
        self._write(f"sys/class/kfd/kfd/topology/nodes/{index}/name", f"{name}\n")

    def add_vfio_group(self, group: int, vendor: str, device: str) -> None:
        self._write(f"dev/vfio/{group}", "")
        self._write("dev/vfio/vfio", "")
        address = self.pci_device(vendor, device)
        link_dir = self.root / f"sys/kernel/iommu_groups/{group}/devices"
        link_dir.mkdir(parents=True, exist_ok=True)
        (link_dir / address).symlink_to(self.root / "sys/bus/pci/devices" / address)


def quiet_machine(factory: pytest.TempPathFactory) -> Path:
    """A tree with no accelerator and clocks that say nothing was ever waited: made once
    per session (the tests only read it)."""
    root = factory.getbasetemp() / "quiet-machine"
    if not root.exists():
        for clock in ("proc/thread-self/schedstat", "proc/self/task/1/schedstat"):
            (root / clock).parent.mkdir(parents=True, exist_ok=True)
            (root / clock).write_text("0 0 0")
    return root


# Child processes (pytester's subprocess runs, xdist workers) may cache bytecode, as an
# installed package has it: otherwise each one compiles pytest, numpy and jax anew.
_UNSET = (*ACCEL_ENV, "PYTHONDONTWRITEBYTECODE")


def _hermetic_settings(factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        # Locks go to a cache directory: this one, not the developer's ~/.cache.
        "PYTEST_ACCEL_CACHE_DIR": str(factory.getbasetemp() / "cache"),
        # An empty machine whose run-queue clocks never move: a test that slows a
        # generated test by sleeping judges it as on a quiet runner, whatever load this
        # suite runs under (a busy runner widens the threshold: docs/regressions.md).
        # The tests of detection and of the clocks build their own trees (``fakesys``,
        # ``sleeper``).
        "PYTEST_ACCEL_SYSROOT": str(quiet_machine(factory)),
    }


def hermetic_environ(factory: pytest.TempPathFactory) -> dict[str, str]:
    """This process's environment as ``_hermetic_accel_env`` leaves it for a test, for
    processes a module- or session-scoped fixture starts (before any test's fixtures)."""
    environ = {name: value for name, value in os.environ.items() if name not in _UNSET}
    return {**environ, **_hermetic_settings(factory)}


@pytest.fixture(autouse=True)
def _hermetic_accel_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The developer's or runner's accelerator variables must not leak into tests, and
    in-process runs see the plugin's warnings as a fresh process does: this suite's own
    ``-W error`` would otherwise turn them into errors inside every inner run."""
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in _hermetic_settings(tmp_path_factory).items():
        monkeypatch.setenv(name, value)
    with warnings.catch_warnings():
        for category in (pytest_accel.PerfRegressionWarning, pytest_accel.FlakyQuarantineWarning):
            warnings.filterwarnings("default", category=category)
        yield


@pytest.fixture
def fakesys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSys:
    """An empty machine (no accelerator) that detection reads instead of ``/``."""
    fake = FakeSys(tmp_path / "sysroot")
    monkeypatch.setenv("PYTEST_ACCEL_SYSROOT", str(fake.root))
    return fake


def skip_reasons(pytester: pytest.Pytester, *args: str) -> dict[str, str]:
    """Run in-process and map each skipped test's name to its exact skip reason."""
    reprec = pytester.inline_run(*args)
    reasons: dict[str, str] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        if report.skipped and isinstance(report.longrepr, tuple):
            reasons[report.nodeid.rsplit("::", 1)[-1]] = report.longrepr[2].removeprefix(
                "Skipped: "
            )
    return reasons


# A conftest that holds every process at session end until all have arrived, so that
# their session-end writes (under the plugin's trylast hooks) start together: a few
# processes contend harder than many that happen to finish apart.
BARRIER_CONFTEST = """
import os, time
from pathlib import Path

def pytest_sessionfinish(session):
    barrier = Path(os.environ["ACCEL_TEST_BARRIER"])
    barrier.mkdir(exist_ok=True)
    (barrier / str(os.getpid())).touch()
    expected = int(os.environ["ACCEL_TEST_PROCESSES"])
    deadline = time.monotonic() + 60
    while len(list(barrier.iterdir())) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
"""


def run_concurrently(
    pytester: pytest.Pytester, args: list[str] | list[list[str]], processes: int
) -> None:
    """Start ``processes`` pytest sessions in ``pytester.path`` at once, each a process
    of its own (tests/forked.py), released together into their session-end writes; all
    must pass.  ``args`` is for every run, or one list per run."""
    pytester.makeconftest(BARRIER_CONFTEST)
    command = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    per_run = args if args and isinstance(args[0], list) else [args] * processes
    env = {
        "ACCEL_TEST_BARRIER": str(pytester.path / ".barrier"),
        "ACCEL_TEST_PROCESSES": str(processes),
    }
    runs = [Run("pytest", [*command, *run_args], pytester.path, env) for run_args in per_run]
    finished = run_forked(runs, pytester.path / ".forked")
    assert [run.code for run in finished] == [0] * processes, [run.stderr for run in finished]


def per_test(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A record's test columns, as the plugin reads them (every column a list), seen
    as one object per test (node id)."""
    from pytest_accel.perf.formats.record import check_record

    columns = check_record("record.json", record)["tests"]
    lists = ("id", "warmup", "quarantined")  # of ids, not columns
    names = [n for n in columns if isinstance(columns[n], list) and n not in lists]
    view = {
        nodeid: {name: columns[name][row] for name in names}
        for row, nodeid in enumerate(columns["id"])
    }
    for nodeid, attempts in columns.get("attempts", {}).items():
        view[nodeid]["attempts"] = attempts
    return view


def per_group(record: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    """A version 2 record's classes or modules seen as one object per group."""
    columns = record[section]
    names = [n for n in columns if n != "id"]
    return {
        group: {name: columns[name][row] for name in names}
        for row, group in enumerate(columns["id"])
    }
