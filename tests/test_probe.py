from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_accel.hardware.probe import ProbeError, ProbeResult, confirm, diagnose, run_jax_probe
from tests.fakesys import FakeSys, skip_reasons

TPU_SUITE = """
import pytest

@pytest.mark.tpu
def test_on_tpu(): pass

def test_plain(): pass
"""


def fake_jax(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Put a stand-in ``jax`` package first on the probe's PYTHONPATH."""
    package = tmp_path / "fakejax" / "jax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(body))
    monkeypatch.setenv("PYTHONPATH", str(package.parent))


FALLBACK_WITH_TPU_IN_USE = """
    import sys
    sys.stderr.write(
        "WARNING: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by"
        " process with pid 4242. Not attempting to load libtpu.so in this process.\\n"
    )
    __version__ = "0.0.fake"

    class _Device:
        device_kind = "cpu"
        client = None

    def devices():
        return [_Device()]

    def default_backend():
        return "cpu"
"""


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_the_real_jax_probe_reports_cpu_with_the_host_device_count_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One real probe (a fresh JAX process: 1.6 CPU-seconds of import) for both facts."""
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "8")
    result = run_jax_probe(timeout=120)
    assert (result.platform, result.device_kind) == ("cpu", "cpu")
    assert result.device_count == 8
    assert result.jax_version


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_requesting_tpu_where_real_jax_falls_back_to_cpu_is_an_error_naming_the_fallback(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    fakesys.add_tpu(4, "0x0063")  # sysfs says TPU, but this jax has no libtpu
    pytester.makepyfile(TPU_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-probe=jax")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --accel-probe: JAX silently fell back to CPU instead of tpu: *"]
    )


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_auto_probe_runs_for_an_explicit_accelerator_when_jax_is_importable(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    fakesys.add_tpu(4, "0x0063")
    pytester.makepyfile(TPU_SUITE)
    result = pytester.runpytest("--accel=tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-probe: JAX silently fell back to CPU*"])
    # Without the probe, the sysfs evidence alone is believed.
    pytester.runpytest("--accel=tpu", "--accel-probe=none").assert_outcomes(passed=2)


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_a_tpu_held_by_another_process_is_reported_with_its_pid(
    pytester: pytest.Pytester, fakesys: FakeSys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_tpu(4, "0x006f")
    fake_jax(tmp_path, monkeypatch, FALLBACK_WITH_TPU_IN_USE)
    pytester.makepyfile(TPU_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-probe=jax")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --accel-probe: JAX silently fell back to CPU instead of tpu:"
            " TPU in use by pid 4242"
        ]
    )


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_allow_missing_with_a_failed_probe_skips_the_tpu_tests_instead(
    pytester: pytest.Pytester, fakesys: FakeSys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_tpu(4, "0x006f")
    fake_jax(tmp_path, monkeypatch, FALLBACK_WITH_TPU_IN_USE)
    pytester.makepyfile(TPU_SUITE)
    reasons = skip_reasons(pytester, "--accel=tpu", "--accel-probe=jax", "--accel-allow-missing")
    assert reasons == {"test_on_tpu": "requires tpu x1 (detected: cpu x1 via probe jax)"}


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_a_hung_probe_is_killed_at_its_timeout_with_a_clear_message(
    pytester: pytest.Pytester, fakesys: FakeSys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_tpu(4, "0x006f")
    fake_jax(tmp_path, monkeypatch, "import time\ntime.sleep(600)\n")
    pytester.makepyfile(TPU_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-probe=jax", "--accel-probe-timeout=1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --accel-probe: the JAX probe did not finish within 1.5s and was killed*"]
    )


@pytest.mark.processes
def test_a_probe_whose_jax_raises_reports_the_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_jax(tmp_path, monkeypatch, "raise RuntimeError('libtpu.so not found')\n")
    with pytest.raises(ProbeError, match=r"JAX failed to start: RuntimeError: libtpu.so not found"):
        run_jax_probe(timeout=60)


def test_diagnose_names_the_most_specific_cause() -> None:
    assert diagnose("... already in use by process with pid 77 ...") == "TPU in use by pid 77"
    assert diagnose("Unable to initialize backend 'cuda': no devices\n") == (
        "backend 'cuda' failed: no devices"
    )
    assert diagnose("all quiet") is None


def test_confirm_accepts_gpu_for_cuda_and_rejects_a_different_accelerator() -> None:
    cuda = ProbeResult("cuda", 8, "NVIDIA H100", "0.8.0", "")
    assert confirm("gpu", cuda).describe() == "cuda x8 (NVIDIA H100) via probe jax"
    with pytest.raises(ProbeError, match=r"JAX initialised 'cuda', not 'rocm'"):
        confirm("rocm", cuda)
