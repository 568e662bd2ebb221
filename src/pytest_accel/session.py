"""The facts every feature needs, resolved once per session: the ``--accel`` options,
what was detected (and how the request was checked against it), and the hardware key.

``setup(config)`` runs whichever hook asks first (pytest-xdist may ask for ``-n auto``
before ``pytest_configure``) and keeps the result in ``config.stash``.  An xdist worker
takes the controller's detection from ``workerinput`` instead of detecting again.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_accel.hardware import PROBE_TIMEOUT
from pytest_accel.hardware.detection import (
    BUILTIN_PLATFORMS,
    PLATFORM_FAMILIES,
    Detection,
    DetectionContext,
    DetectionError,
    EmulationSpecError,
    cpu_detection,
    describe_evidence,
    parse_emulation,
    platform_matches,
    sysroot_from_env,
)
from pytest_accel.settings import (
    ENV_KEY_OPTION,
    OptionGroup,
    OptionSpec,
    parse_choice,
    parse_positive_float,
    parse_positive_int,
    raw_setting,
    spec_in,
    text_setting,
)

PROBE_MODES = ("auto", "none", "jax")
ENV_ACCEL = "PYTEST_ACCEL"
# Platforms JAX itself can confirm; a third-party platform is its detector's word.
JAX_PLATFORMS = frozenset({"tpu", "cuda", "rocm", "gpu"})
WORKERINPUT_DETECTION = "pytest_accel_detection"

OPTIONS = OptionGroup(
    "accel",
    "Selection and detection",
    "accelerator-aware selection (pytest-accel)",
    (
        OptionSpec(
            "--accel",
            "Platform this run targets: auto (default; detect and skip what cannot run), cpu,"
            " gpu, cuda, rocm, tpu or a platform a detector plugin registers. An explicit"
            " accelerator that is not detected stops the run (exit 4). Env: PYTEST_ACCEL.",
            metavar="PLATFORM",
            env=ENV_ACCEL,
            default="auto",
        ),
        OptionSpec(
            "--accel-allow-missing",
            "With an explicit --accel platform that is not detected: skip its tests instead"
            " of stopping the run.",
            is_flag=True,
            default="off",
        ),
        OptionSpec(
            "--accel-only",
            "Deselect (not skip) tests that do not target the selected platform.",
            is_flag=True,
            default="off",
        ),
        OptionSpec(
            "--accel-probe",
            "Confirm detection with JAX in a subprocess: auto (default: only for an explicit"
            " accelerator when jax is importable), none, jax.",
            metavar="MODE",
            default="auto",
        ),
        OptionSpec(
            "--accel-probe-timeout",
            f"Seconds the JAX probe may take before it is killed (default {PROBE_TIMEOUT:g}).",
            metavar="SECONDS",
            default=f"{PROBE_TIMEOUT:g}",
        ),
        OptionSpec(
            "--accel-cpu-devices",
            "Give JAX N host (CPU) devices: sets JAX_NUM_CPU_DEVICES and XLA_FLAGS for the"
            " test processes, so multi_device tests run on CPU runners.",
            metavar="N",
        ),
        OptionSpec(
            "--accel-emulate",
            "Select tests as on PLATFORM[:COUNT[:KIND]] hardware, e.g. 'tpu:8:TPU v5 lite'"
            " (for --collect-only previews of what a runner would run).",
            metavar="SPEC",
        ),
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class AccelOptions:
    requested: str | None  # None = auto
    allow_missing: bool
    only: bool
    probe: str
    probe_timeout: float
    cpu_devices: int | None
    emulate: Detection | None
    known_platforms: frozenset[str]


@dataclass(frozen=True)
class Session:
    options: AccelOptions
    detection: Detection
    key: str  # the hardware key timings and histories are kept under

    @property
    def targets_accelerator(self) -> bool:
        """An explicit ``--accel=tpu`` whose TPU is missing still targets one."""
        return self.detection.is_accelerator or self.options.requested not in (None, "cpu")


session_key = pytest.StashKey[Session]()
_saved_env_key = pytest.StashKey[dict[str, str | None]]()
# Set in an xdist worker by the feature that gives it a share of the devices (scaleout).
worker_view_key = pytest.StashKey[Callable[[Detection], Detection]]()
# "K/N" when this session runs one CI shard (set by the scale-out feature).
shard_key = pytest.StashKey[str]()
# How to learn each test's expected duration (filled by the timing feature when it has a
# baseline; read by sharding): a callable, so that nothing is loaded unless it is asked.
durations_key = pytest.StashKey[Callable[[], Mapping[str, float]]]()
# Set by a feature that needs this run's timings (the HTML report): the timing feature
# then collects them even without --perf-record or --perf-baseline.
timings_wanted_key = pytest.StashKey[bool]()


def valid_accel_choices(extra_platforms: Collection[str]) -> list[str]:
    builtin = ["auto", *BUILTIN_PLATFORMS, *PLATFORM_FAMILIES]
    return builtin + sorted(set(extra_platforms) - set(builtin))


def known_platforms(config: pytest.Config) -> list[str]:
    names: list[str] = []
    for result in config.hook.pytest_accel_platforms():
        names.extend(str(n).lower() for n in result)
    return names


def resolve_options(config: pytest.Config, extra_platforms: Collection[str]) -> AccelOptions:
    """Validate every ``--accel`` option up front."""
    choices = valid_accel_choices(extra_platforms)
    accel = parse_choice("--accel", text_setting(config, option("--accel")), choices, "auto")
    probe = parse_choice(
        "--accel-probe", text_setting(config, option("--accel-probe")), PROBE_MODES, "auto"
    )
    timeout_text = text_setting(config, option("--accel-probe-timeout"))
    timeout = (
        parse_positive_float("--accel-probe-timeout", timeout_text)
        if timeout_text
        else PROBE_TIMEOUT
    )
    cpu_text = text_setting(config, option("--accel-cpu-devices"))
    cpu_devices = parse_positive_int("--accel-cpu-devices", cpu_text) if cpu_text else None
    known = frozenset(c for c in choices if c != "auto")
    emulate_text = text_setting(config, option("--accel-emulate"))
    emulate = None
    if emulate_text:
        try:
            emulate = parse_emulation(emulate_text, known - set(PLATFORM_FAMILIES))
        except EmulationSpecError as exc:
            raise pytest.UsageError(
                f"--accel-emulate: invalid value {emulate_text!r}: {exc};"
                " expected PLATFORM[:COUNT[:KIND]], e.g. 'tpu:8:TPU v5 lite'"
            ) from None
    return AccelOptions(
        requested=None if accel == "auto" else accel,
        allow_missing=bool(raw_setting(config, option("--accel-allow-missing"))),
        only=bool(raw_setting(config, option("--accel-only"))),
        probe=probe,
        probe_timeout=timeout,
        cpu_devices=cpu_devices,
        emulate=emulate,
        known_platforms=known,
    )


def hardware_key(detection: Detection, override: str | None = None) -> str:
    """``platform/device_kind/xN`` (kind omitted when unknown or the platform itself)."""
    if override:
        return override
    parts = [detection.platform]
    if detection.device_kind and detection.device_kind != detection.platform:
        parts.append(detection.device_kind)
    parts.append(f"x{detection.device_count}")
    return "/".join(parts)


def _key_override(config: pytest.Config) -> str | None:
    key = raw_setting(config, ENV_KEY_OPTION)
    if key is not None and not str(key).strip():
        raise pytest.UsageError("--perf-env-key: the key must not be empty")
    return str(key).strip() if key else None


def setup(config: pytest.Config) -> Session:
    """Options and detection, resolved (and probed) once per session."""
    found = config.stash.get(session_key, None)
    if found is not None:
        return found
    options = resolve_options(config, known_platforms(config))
    try:
        detection = _resolve_detection(config, options)
    except DetectionError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = config.stash[session_key] = Session(
        options, detection, hardware_key(detection, _key_override(config))
    )
    return session


def get(config: pytest.Config) -> Session:
    return config.stash[session_key]


def detect(config: pytest.Config, requested: str | None) -> Detection:
    """Ask the detectors in order (built-in, third-party, the CPU fallback)."""
    context = DetectionContext(sysroot_from_env(os.environ), dict(os.environ), requested)
    result: Detection = config.hook.pytest_accel_detect(context=context)
    return result


def _missing_error(requested: str, detection: Detection) -> pytest.UsageError:
    return pytest.UsageError(
        f"--accel={requested}: no {requested} device found (detected {detection.describe()});"
        f" checked: {describe_evidence(detection.evidence)}."
        " Use --accel=auto to skip what cannot run here, or --accel-allow-missing."
    )


def _resolve_detection(config: pytest.Config, options: AccelOptions) -> Detection:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and WORKERINPUT_DETECTION in workerinput:
        # xdist worker: the controller detected (and probed) once for everyone; a pinned
        # worker sees its own share of the devices.
        detection = Detection.from_json(workerinput[WORKERINPUT_DETECTION])
        narrow: Callable[[Detection], Detection] | None = config.stash.get(worker_view_key, None)
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
            raise _missing_error(requested, detection)
        return detection
    jax_installed = importlib.util.find_spec("jax") is not None
    wants_probe = options.probe == "jax" or (
        options.probe == "auto" and requested in JAX_PLATFORMS and jax_installed
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


def configure_node(node: Any) -> None:
    """xdist controller: hand the detection to each worker instead of re-detecting."""
    found = node.config.stash.get(session_key, None)
    if found is not None:
        node.workerinput[WORKERINPUT_DETECTION] = found.detection.to_json()


def set_env(early_config: pytest.Config, values: Mapping[str, str]) -> None:
    """Set variables for this process and its children; ``restore_env`` undoes it."""
    saved = early_config.stash.setdefault(_saved_env_key, {})
    for name, value in values.items():
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value


_saved_sigterm_key = pytest.StashKey[Any]()


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (a CI runner cancelling the job) ends the run as Ctrl-C does: what ran is
    recorded, nothing is added to the baseline or the history.  Only where nobody else
    handles SIGTERM, and only in the main thread (where Python runs signal handlers)."""
    if _saved_sigterm_key in config.stash:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    config.stash[_saved_sigterm_key] = signal.signal(signal.SIGTERM, interrupt)


def restore(config: pytest.Config) -> None:
    """The process as it was before the session: environment variables and SIGTERM."""
    for name, value in config.stash.get(_saved_env_key, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if _saved_sigterm_key in config.stash:
        signal.signal(signal.SIGTERM, config.stash[_saved_sigterm_key])
        del config.stash[_saved_sigterm_key]
