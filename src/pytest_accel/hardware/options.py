"""The hardware feature's options: which platform a run targets, how detection is
confirmed, and the CPU devices JAX gets.  Validated up front, once per session
(``resolve_options``).  No pytest at import: the command line tool imports the hardware
package."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.settings import (
    HARDWARE_KEY_FACETS_OPTION,
    HARDWARE_KEY_OPTION,
    HOST_OPTION,
    HOSTS_OPTION,
    RUN_NAME_OPTION,
    OptionGroup,
    OptionSpec,
    parse_choice,
    parse_positive_float,
    parse_positive_int,
    raw_setting,
    spec_in,
    text_setting,
    usage_error,
)

if TYPE_CHECKING:  # detection loads when the options are read (not for the commands' help)
    import pytest

    from pytest_accel.hardware.detection import Detection
    from pytest_accel.hardware.platforms import Platform

PROBE_MODES = ("auto", "none", "jax")
PROBE_TIMEOUT = 120.0  # seconds the JAX probe may take by default
ENV_ACCEL = "PYTEST_ACCEL"

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
            "Select tests as on PLATFORM[:COUNT[:KIND]] hardware, e.g. 'tpu:8:TPU v5 lite',"
            " for --collect-only previews of what a runner would run; without --collect-only"
            " the selected tests run here, on this machine's devices.",
            metavar="SPEC",
        ),
        HARDWARE_KEY_OPTION,
        HARDWARE_KEY_FACETS_OPTION,
        HOST_OPTION,
        HOSTS_OPTION,
        RUN_NAME_OPTION,
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


def valid_accel_choices(extra_platforms: Collection[str]) -> list[str]:
    from pytest_accel.hardware.platforms import builtin_names, families

    builtin = ["auto", *sorted(builtin_names()), *families()]
    return builtin + sorted(set(extra_platforms) - set(builtin))


def registered_rows(config: pytest.Config) -> list[Platform]:
    """The rows plugins add to the platform table (``pytest_accel_platforms`` returning
    ``Platform`` objects: a platform with its pinning, say)."""
    from pytest_accel.hardware.platforms import Platform

    return [
        entry
        for result in config.hook.pytest_accel_platforms()
        for entry in result
        if isinstance(entry, Platform)
    ]


def known_platforms(config: pytest.Config) -> list[str]:
    """The platforms plugins register, by name or by row."""
    names: list[str] = []
    for result in config.hook.pytest_accel_platforms():
        names.extend(str(getattr(n, "name", n)).lower() for n in result)
    return names


def resolve_options(config: pytest.Config, extra_platforms: Collection[str]) -> AccelOptions:
    """Validate every ``--accel`` option up front."""
    from pytest_accel.hardware.detection import EmulationSpecError, parse_emulation
    from pytest_accel.hardware.platforms import families

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
            emulate = parse_emulation(emulate_text, known - set(families()))
        except EmulationSpecError as exc:
            raise usage_error(
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
