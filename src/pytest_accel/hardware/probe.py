"""Confirm detection by asking JAX, in a subprocess with a timeout.

JAX is never imported in the pytest process for this: initialising a backend would
hold the TPU that the tests need, and a hung libtpu must not hang the session.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.options import PROBE_TIMEOUT
from pytest_accel.hardware.platforms import platform_matches

_PROBE_SCRIPT = r"""
import json, sys
try:
    import jax
    devices = jax.devices()
    platform = jax.default_backend()
    if platform == "gpu":  # JAX names both GPU backends "gpu"
        version = str(getattr(devices[0].client, "platform_version", "")).lower()
        platform = "rocm" if "rocm" in version or "hip" in version else "cuda"
    print("PYTEST_ACCEL_PROBE " + json.dumps({
        "platform": platform,
        "device_count": len(devices),
        "device_kind": devices[0].device_kind if devices else None,
        "jax": jax.__version__,
    }), flush=True)
except Exception as exc:
    print("PYTEST_ACCEL_PROBE " + json.dumps({"error": f"{type(exc).__name__}: {exc}"}),
          flush=True)
"""

_IN_USE = re.compile(r"in use by process with pid (\d+)", re.IGNORECASE)
_CAUSES = (
    (re.compile(r"libtpu[^\n]*not found|No module named 'libtpu'", re.I), "libtpu is missing"),
    (re.compile(r"Unable to initialize backend '(\w+)': ([^\n]+)"), None),
    (re.compile(r"CUDA_ERROR_NO_DEVICE|no CUDA-capable device", re.I), "no CUDA device"),
)


class ProbeError(Exception):
    """The probe ran but contradicts the request, failed, or timed out."""


@dataclass(frozen=True)
class ProbeResult:
    platform: str
    device_count: int
    device_kind: str | None
    jax_version: str | None
    stderr: str


def _probe_env(environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    # Keep the probe from grabbing all GPU memory just to list devices.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    return env


def run_jax_probe(
    environ: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT
) -> ProbeResult:
    """Run JAX in a child process; raise ProbeError with the cause on failure."""
    env = _probe_env(os.environ if environ is None else environ)
    process = subprocess.Popen(
        [sys.executable, "-c", _PROBE_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,  # so a timeout kills the whole group, not just python
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise ProbeError(
            f"the JAX probe did not finish within {timeout:g}s and was killed"
            " (a hung device runtime?); raise --accel-probe-timeout or use --accel-probe=none"
        ) from None
    payload = None
    for line in stdout.splitlines():
        if line.startswith("PYTEST_ACCEL_PROBE "):
            payload = json.loads(line.removeprefix("PYTEST_ACCEL_PROBE "))
    if payload is None:
        tail = stderr.strip().splitlines()[-1:] or [f"exit status {process.returncode}"]
        raise ProbeError(f"the JAX probe crashed: {tail[0]}")
    if "error" in payload:
        raise ProbeError(f"JAX failed to start: {payload['error']}{_cause_suffix(stderr)}")
    return ProbeResult(
        platform=str(payload["platform"]),
        device_count=int(payload["device_count"]),
        device_kind=payload.get("device_kind"),
        jax_version=payload.get("jax"),
        stderr=stderr,
    )


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


def diagnose(stderr: str) -> str | None:
    """The most specific cause of a failed or fallen-back backend found in JAX's log."""
    in_use = _IN_USE.search(stderr)
    if in_use:
        return f"TPU in use by pid {in_use.group(1)}"
    for pattern, text in _CAUSES:
        match = pattern.search(stderr)
        if match:
            if text is None:
                return f"backend {match.group(1)!r} failed: {match.group(2).strip()}"
            return text
    return None


def _cause_suffix(stderr: str) -> str:
    cause = diagnose(stderr)
    return f" ({cause})" if cause else ""


def confirm(requested: str, result: ProbeResult) -> Detection:
    """The detection JAX confirms, or ProbeError when it fell back or saw another platform."""
    if not platform_matches(requested, result.platform):
        cause = diagnose(result.stderr)
        if result.platform == "cpu":
            reason = cause or "no cause in JAX's log; is the plugin for it (e.g. libtpu) installed?"
            raise ProbeError(f"JAX silently fell back to CPU instead of {requested}: {reason}")
        raise ProbeError(
            f"JAX initialised {result.platform!r}, not {requested!r}"
            + (f" ({cause})" if cause else "")
        )
    return Detection(
        result.platform,
        result.device_count,
        result.device_kind,
        "probe jax",
        (f"jax {result.jax_version}: {result.platform} x{result.device_count}",),
    )


def confirmed_detection(detection: Detection, confirmed: Detection) -> Detection:
    """``detection`` as JAX confirmed it: JAX's platform and count, both sets of evidence."""
    return Detection(
        confirmed.platform,
        confirmed.device_count,
        confirmed.device_kind or detection.device_kind,
        f"{detection.source}, confirmed by jax",
        (*detection.evidence, *confirmed.evidence),
    )


def probe_and_confirm(requested: str, detection: Detection, timeout: float) -> Detection:
    """Run the probe and return ``detection`` as JAX confirms it (or ProbeError)."""
    result = run_jax_probe(timeout=timeout)
    return confirmed_detection(detection, confirm(requested, result))
