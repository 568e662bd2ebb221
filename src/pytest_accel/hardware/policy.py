"""What a run's detection is, and the refusal to pretend: an explicit ``--accel``
platform that is not there (or that JAX cannot confirm) stops the run before any test,
unless ``--accel-allow-missing`` asks to skip its tests instead.  An xdist worker takes
the controller's detection (``WORKERINPUT_DETECTION``) instead of detecting again."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from pytest_accel.hardware.detection import (
    Detection,
    DetectionContext,
    cpu_detection,
    describe_evidence,
    module_installed,
    sysroot_from_env,
)
from pytest_accel.hardware.options import AccelOptions
from pytest_accel.hardware.platforms import jax_names, platform_matches


# Platforms JAX itself can confirm; a third-party platform is its detector's word.
def jax_accelerators() -> frozenset[str]:
    """The platforms and families a JAX probe can confirm (``platforms.jax_names``)."""
    return frozenset(name for name in jax_names().values() if name != "cpu")


WORKERINPUT_DETECTION = "pytest_accel_detection"


def detect(config: pytest.Config, requested: str | None) -> Detection:
    """Ask the detectors in order (built-in, third-party, the CPU fallback)."""
    context = DetectionContext(sysroot_from_env(os.environ), dict(os.environ), requested)
    result: Detection = config.hook.pytest_accel_detect(context=context)
    return result


def missing_error(requested: str, detection: Detection) -> pytest.UsageError:
    return pytest.UsageError(
        f"--accel={requested}: no {requested} device found (detected {detection.describe()});"
        f" checked: {describe_evidence(detection.evidence)}."
        " Use --accel=auto to skip what cannot run here, or --accel-allow-missing."
    )


def resolve_detection(
    config: pytest.Config,
    options: AccelOptions,
    narrow: Callable[[Detection], Detection] | None = None,
) -> Detection:
    """The detection this session works with; ``narrow``: an xdist worker's view of its
    share of the devices (the scale-out feature's)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and WORKERINPUT_DETECTION in workerinput:
        # xdist worker: the controller detected (and probed) once for everyone; a pinned
        # worker sees its own share of the devices.
        detection = Detection.from_json(workerinput[WORKERINPUT_DETECTION])
        return narrow(detection) if narrow is not None else detection
    if options.emulate is not None:
        return options.emulate
    requested = options.requested
    if requested == "cpu":
        return cpu_detection(
            DetectionContext(sysroot_from_env(os.environ), os.environ),
            source="option --accel=cpu",
        )
    detection = detect(config, requested)
    if requested and not platform_matches(requested, detection.platform):
        if not options.allow_missing:
            raise missing_error(requested, detection)
        return detection
    jax_installed = module_installed("jax")
    wants_probe = options.probe == "jax" or (
        options.probe == "auto" and requested in jax_accelerators() and jax_installed
    )
    if not wants_probe:
        return detection
    if not jax_installed:
        raise pytest.UsageError("--accel-probe=jax: jax is not importable (pip install jax)")
    from pytest_accel.hardware.probe import ProbeError, probe_and_confirm

    try:
        return probe_and_confirm(requested or detection.platform, detection, options.probe_timeout)
    except ProbeError as exc:
        if requested and options.allow_missing:
            ctx = DetectionContext(sysroot_from_env(os.environ), os.environ)
            ctx.evidence.extend([*detection.evidence, f"jax probe: {exc}"])
            return cpu_detection(ctx, source="probe jax")
        raise pytest.UsageError(f"--accel-probe: {exc}") from None
