"""Each test's peak device memory (``perf.device_memory``): read from JAX's and
PyTorch's allocators, recorded per device, judged against the baseline as MEMORY, and
a limit that fails a test; against fakes of the frameworks (no GPU here: on the CPU
``memory_stats()`` is None, which is a case of its own)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main
from pytest_accel.perf.device_memory import (
    JaxMemory,
    Peak,
    TorchMemory,
    combined,
    device_name,
    over_limit,
)
from pytest_accel.settings import size_value
from tests.fakedevices import FAKE_DEVICES_CONFTEST
from tests.fakesys import FakeSys

GIB = 2**30

SUITE = """
import os

def test_big(device):
    device.allocate(int(os.environ.get("BIG", str(2**30))))

def test_small(device):
    device.allocate(100)

def test_keeps(device):
    device.keep(10 * 2**20)
"""


@pytest.fixture
def gpu_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(FAKE_DEVICES_CONFTEST)
    pytester.makepyfile(test_gpu=SUITE)
    return pytester


def record_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_sizes_read_as_people_write_them() -> None:
    assert size_value("2GiB") == size_value("2g") == size_value("2 G") == 2 * GIB
    assert size_value("2GB") == 2_000_000_000
    assert size_value("512MiB") == 512 * 2**20
    assert size_value("1048576") == 2**20
    assert [size_value(bad) for bad in ("2i", "lots", "-1G", "")] == [None] * 4


def test_a_device_is_named_by_its_index_on_the_machine() -> None:
    assert device_name("gpu", 0, {}) == "gpu:0"
    assert device_name("cuda", 0, {"CUDA_VISIBLE_DEVICES": "3"}) == "gpu:3"
    assert device_name("gpu", 1, {"CUDA_VISIBLE_DEVICES": "4,5"}) == "gpu:5"
    assert device_name("gpu", 0, {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"}) == "gpu:GPU-aaaa"
    assert device_name("tpu", 1, {"TPU_VISIBLE_CHIPS": "2,3"}) == "tpu:3"
    assert device_name("gpu", 2, {"CUDA_VISIBLE_DEVICES": "0"}) == "gpu:2"  # beyond the mask


@pytest.mark.parametrize("framework", ["rocm", "gpu"])  # JAX says rocm; PyTorch's ROCm build, gpu
def test_a_pinned_rocm_workers_devices_are_named_through_both_masks(framework: str) -> None:
    """The ROCm pinning gives a worker ROCR_VISIBLE_DEVICES=2,3 and HIP_VISIBLE_DEVICES
    =0,1 (HIP indexes into what ROCR leaves): its devices are the machine's 2 and 3, not
    0 and 1 (which every worker would report alike)."""
    pinned = {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,1"}
    assert [device_name(framework, local, pinned) for local in (0, 1)] == ["gpu:2", "gpu:3"]
    swapped = {"ROCR_VISIBLE_DEVICES": "4,5,6", "HIP_VISIBLE_DEVICES": "2,0"}
    assert device_name(framework, 0, swapped) == "gpu:6"
    # HIP reads HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES, within ROCR's.
    assert device_name("rocm", 0, {"ROCR_VISIBLE_DEVICES": "1,2", "CUDA_VISIBLE_DEVICES": "1"}) == (
        "gpu:2"
    )
    assert device_name("rocm", 0, {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0"}) == (
        "gpu:1"
    )


def test_two_frameworks_on_one_device_add_up_and_the_highest_over_a_limit_is_named() -> None:
    peaks = combined(
        [Peak("gpu:0", 3 * GIB, True), Peak("gpu:1", GIB, True), Peak("gpu:0", GIB, False)]
    )
    assert peaks == [Peak("gpu:0", 4 * GIB, False), Peak("gpu:1", GIB, True)]
    assert over_limit(peaks, 2 * GIB) == Peak("gpu:0", 4 * GIB, False)
    assert over_limit(peaks, 8 * GIB) is None


class FakeJaxDevice:
    def __init__(self, platform: str, stats: dict[str, int] | None) -> None:
        self.platform, self.id, self.local_hardware_id, self.stats = platform, 0, 0, stats

    def memory_stats(self) -> dict[str, int] | None:
        return self.stats


def fake_jax(monkeypatch: pytest.MonkeyPatch, devices: list[FakeJaxDevice], ready: bool) -> None:
    jax = types.SimpleNamespace(local_devices=lambda: devices)
    bridge = types.SimpleNamespace(backends_are_initialized=lambda: ready)
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", bridge)


def test_jax_peaks_are_exact_where_the_test_raised_the_process_peak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu = FakeJaxDevice("gpu", {"bytes_in_use": 100, "peak_bytes_in_use": 500})
    fake_jax(monkeypatch, [gpu], ready=True)
    source = JaxMemory()
    source.begin()
    gpu.stats = {"bytes_in_use": 100, "peak_bytes_in_use": 900}
    assert source.end() == [Peak("gpu:0", 900, True)]
    source.begin()
    gpu.stats = {"bytes_in_use": 300, "peak_bytes_in_use": 900}  # under the old peak
    assert source.end() == [Peak("gpu:0", 300, False)]  # a lower bound: in use at its end


def test_jax_is_not_asked_before_its_backend_is_up_nor_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def devices() -> list[FakeJaxDevice]:
        asked.append("local_devices")
        return [FakeJaxDevice("cpu", None)]

    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(local_devices=devices))
    ready = types.SimpleNamespace(backends_are_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", ready)
    source = JaxMemory()
    source.begin()
    assert source.end() == []
    assert asked == []
    ready.backends_are_initialized = lambda: True
    source.begin()
    source.begin()
    assert source.end() == []
    assert asked == ["local_devices"]


def test_torch_peaks_are_reset_before_each_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    peaks = {0: 7, 1: 9}
    resets: list[int] = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 2,
        reset_peak_memory_stats=resets.append,
        max_memory_allocated=peaks.__getitem__,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    source = TorchMemory()
    source.begin()
    assert resets == [0, 1]
    assert source.end() == [Peak("gpu:2", 7, True), Peak("gpu:3", 9, True)]
    cuda.is_initialized = lambda: False  # CUDA not set up: nothing is asked, nothing read
    source.begin()
    assert resets == [0, 1]
    assert source.end() == []


def test_the_record_holds_each_tests_peak_per_device(gpu_suite: pytest.Pytester) -> None:
    result = gpu_suite.runpytest("--perf-record=r.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["device memory: highest peak 1.00 GiB (test_gpu.py::test_big on gpu:0), 3 test(s)*"]
    )
    tests = record_of(gpu_suite.path / "r.json")["tests"]
    assert tests["device_memory"] == {
        "test_gpu.py::test_big": {"gpu:0": GIB + 1_000},
        "test_gpu.py::test_small": {"gpu:0": 1_000},
        "test_gpu.py::test_keeps": {"gpu:0": 10 * 2**20 + 1_000},
    }
    # JAX's peak is the process's: the tests after test_big did not raise it, so theirs
    # are the bytes in use at their start or end, lower bounds, and said to be.
    assert tests["device_memory_bounded"] == ["test_gpu.py::test_small", "test_gpu.py::test_keeps"]


def test_jax_on_the_cpu_records_no_device_memory(
    gpu_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GPU", "cpu")
    result = gpu_suite.runpytest("--perf-record=r.json")
    result.assert_outcomes(passed=3)
    assert "device memory" not in result.stdout.str()
    tests = record_of(gpu_suite.path / "r.json")["tests"]
    assert "device_memory" not in tests
    assert "device_memory_bounded" not in tests


def baseline_of(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, runs: int) -> None:
    monkeypatch.setenv("BIG", str(GIB))
    for _ in range(runs):
        suite.runpytest("--perf-baseline=b.json", "--perf-update-baseline").assert_outcomes(
            passed=3
        )
    monkeypatch.delenv("BIG")


def test_a_test_whose_peak_grew_is_a_memory_alarm_in_every_output(
    gpu_suite: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    baseline_of(gpu_suite, monkeypatch, 3)
    kept = json.loads((gpu_suite.path / "b.json").read_text())
    (env,) = kept["envs"].values()
    # Exact peaks only: test_small's and test_keeps' were lower bounds.
    assert [run["device_memory"] for run in env["runs"]] == [
        {"test_gpu.py::test_big": GIB + 1_000}
    ] * 3
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("BIG", str(3 * GIB))
    result = gpu_suite.runpytest(
        "--perf-baseline=b.json", "--perf-record=r.json", "--perf-fail", "--accel-report=r.html"
    )
    assert result.ret == 1
    line = (
        "test test_gpu.py::test_big: peak device memory 3.00 GiB vs at most 1.00 GiB"
        " (3.00x) in 3 baseline run(s)"
    )
    result.stdout.fnmatch_lines(
        [
            f"*PerfRegressionWarning: {line}",
            f"MEMORY {line}",
            "device memory: highest peak 3.00 GiB (test_gpu.py::test_big);"
            " judged against 3 baseline run(s)",
            "perf: 0 regression(s), 0 change(s), 1 memory growth(s), *failing the run*",
            f"::warning file=test_gpu.py,line=3,title=device memory (test)::{line}",
            "*exit status 1: 0 regression(s) and 1 device memory growth(s) with --perf-fail",
        ]
    )
    assert "| memory | test | test\\_gpu.py::test\\_big | 1.00 GiB | 3.00 GiB | 3.00x |" in (
        summary.read_text()
    )
    comparison = record_of(gpu_suite.path / "r.json")["comparison"]
    assert comparison["memory"] == [
        {
            "kind": "test",
            "id": "test_gpu.py::test_big",
            "current": 3 * GIB + 1_000,
            "baseline": GIB + 1_000,
            "ratio": pytest.approx(3.0, rel=1e-3),
            "samples": 3,
        }
    ]
    assert comparison["memory_judged"] is True
    page = (gpu_suite.path / "r.html").read_text()
    assert f"MEMORY {line}" in page
    assert "1 memory growth(s)" in page
    # The command judges the record as the session did, and fails on it alike.
    monkeypatch.chdir(gpu_suite.path)
    assert main(["compare", "--baseline=b.json", "--fail", "r.json"]) == 1
    assert f"MEMORY {line}" in capsys.readouterr().out
    assert (
        main(["compare", "--baseline=b.json", "--memory-min-delta=4GiB", "--fail", "r.json"]) == 0
    )


@pytest.mark.parametrize(
    ("now", "args"),
    [
        (str(GIB + 32 * 2**20), ()),  # 3% more: under the ratio
        (str(GIB + 512 * 2**20), ("--perf-memory-threshold=2",)),  # 1.5x: under a ratio of 2
        (str(GIB + 512 * 2**20), ("--perf-memory-min-delta=1GiB",)),  # under 1.00 GiB more
    ],
)
def test_growth_under_either_line_is_no_alarm(
    gpu_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, now: str, args: tuple[str, ...]
) -> None:
    baseline_of(gpu_suite, monkeypatch, 3)
    monkeypatch.setenv("BIG", now)
    result = gpu_suite.runpytest("--perf-baseline=b.json", "--perf-fail", *args)
    assert result.ret == 0
    assert "MEMORY" not in result.stdout.str()


def test_too_few_baseline_runs_judge_no_memory(
    gpu_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline_of(gpu_suite, monkeypatch, 2)
    monkeypatch.setenv("BIG", str(3 * GIB))
    result = gpu_suite.runpytest("--perf-baseline=b.json", "--perf-fail")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["device memory: highest peak 3.00 GiB *not judged: 2 baseline run(s) measured it*"]
    )


def test_a_peak_over_the_limit_fails_its_test_at_teardown(gpu_suite: pytest.Pytester) -> None:
    # The limit alone, without any timing option.
    result = gpu_suite.runpytest("--accel-max-device-memory=512MiB")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_big*",
            "device memory: peak 1.00 GiB on gpu:0 is over --accel-max-device-memory 512 MiB",
        ]
    )
    gpu_suite.runpytest("--accel-max-device-memory=2G").assert_outcomes(passed=3)


def test_a_limit_that_is_not_a_size_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass")
    result = pytester.runpytest("--accel-max-device-memory=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--accel-max-device-memory: 'lots' is not a size (bytes, or with a unit: *"]
    )
    assert "Traceback" not in result.stderr.str()


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_each_pinned_worker_reports_its_own_device(
    gpu_suite: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_nvidia(2)
    monkeypatch.setenv("FAKE_GPU", "torch")
    result = gpu_suite.runpytest_subprocess("-n", "2", "--perf-record=r.json")
    result.assert_outcomes(passed=3)
    tests = record_of(gpu_suite.path / "r.json")["tests"]
    workers = dict(zip(tests["id"], expand(tests["worker"]), strict=True))
    for test, peaks in tests["device_memory"].items():
        # gw0 holds CUDA_VISIBLE_DEVICES=0, gw1 =1: torch's device 0 is each one's own.
        assert list(peaks) == [f"gpu:{workers[test][2:]}"]
    # PyTorch's peak is reset before each test: exact, test_small's too.
    assert tests["device_memory"]["test_gpu.py::test_small"] in ({"gpu:0": 1_100}, {"gpu:1": 1_100})
    assert "device_memory_bounded" not in tests or tests["device_memory_bounded"] == []


def expand(column: Any) -> list[Any]:
    if isinstance(column, list):
        return column
    return [v for v, n in zip(column["values"], column["counts"], strict=True) for _ in range(n)]


@pytest.mark.processes
def test_the_gpu_check_parses_and_names_options_the_plugin_has() -> None:
    """bench/gpu_check.sh runs where no test here can (a lent GPU machine): it must at
    least parse, and every option it passes must be one the plugin declares."""
    import re
    import subprocess

    from pytest_accel.plugin import OPTION_GROUPS

    script = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    declared = {spec.flag for group in OPTION_GROUPS for spec in group.specs}
    used = set(re.findall(r"(--(?:accel|perf|flaky)-[a-z-]+)", script.read_text()))
    assert used
    assert used <= declared, used - declared


def test_merged_shards_keep_each_tests_device_memory(
    gpu_suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    for shard in ("1", "2"):
        gpu_suite.runpytest(f"--accel-shard={shard}/2", f"--perf-record={shard}.json")
    shards = [record_of(gpu_suite.path / f"{s}.json")["tests"] for s in ("1", "2")]
    assert (
        main(
            [
                "merge",
                str(gpu_suite.path / "1.json"),
                str(gpu_suite.path / "2.json"),
                "-o",
                str(gpu_suite.path / "m.json"),
            ]
        )
        == 0
    )
    merged = record_of(gpu_suite.path / "m.json")["tests"]
    assert merged["device_memory"] == {
        test: peaks for tests in shards for test, peaks in tests["device_memory"].items()
    }
    assert len(merged["device_memory"]) == 3
    assert sorted(merged["device_memory_bounded"]) == sorted(
        test for tests in shards for test in tests["device_memory_bounded"]
    )
