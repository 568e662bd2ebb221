"""Command-line options and ini keys, and their validation.

Every option has an ini key of the same name (dashes as underscores, without the
leading ``--``).  Precedence: command line, then environment variable (where one is
documented), then ini, then the default.  Values are validated once, in
``pytest_configure``, into a frozen dataclass; bad values are ``pytest.UsageError``\\ s
that quote the value and list the valid choices.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pytest

from pytest_accel.detection import (
    BUILTIN_PLATFORMS,
    PLATFORM_FAMILIES,
    Detection,
    EmulationSpecError,
    parse_emulation,
)
from pytest_accel.probe import DEFAULT_TIMEOUT

PROBE_MODES = ("auto", "none", "jax")
ENV_ACCEL = "PYTEST_ACCEL"


@dataclass(frozen=True)
class OptionSpec:
    flag: str
    help: str
    metavar: str | None = None
    is_flag: bool = False
    env: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


ACCEL_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--accel",
        "Platform this run targets: auto (default; detect and skip what cannot run), cpu,"
        " gpu, cuda, rocm, tpu or a platform a detector plugin registers. An explicit"
        " accelerator that is not detected stops the run (exit 4). Env: PYTEST_ACCEL.",
        metavar="PLATFORM",
        env=ENV_ACCEL,
    ),
    OptionSpec(
        "--accel-allow-missing",
        "With an explicit --accel platform that is not detected: skip its tests instead of"
        " stopping the run.",
        is_flag=True,
    ),
    OptionSpec(
        "--accel-only",
        "Deselect (not skip) tests that do not target the selected platform.",
        is_flag=True,
    ),
    OptionSpec(
        "--accel-probe",
        "Confirm detection with JAX in a subprocess: auto (default: only for an explicit"
        " accelerator when jax is importable), none, jax.",
        metavar="MODE",
    ),
    OptionSpec(
        "--accel-probe-timeout",
        f"Seconds the JAX probe may take before it is killed (default {DEFAULT_TIMEOUT:g}).",
        metavar="SECONDS",
    ),
    OptionSpec(
        "--accel-cpu-devices",
        "Give JAX N host (CPU) devices: sets JAX_NUM_CPU_DEVICES and XLA_FLAGS for the test"
        " processes, so multi_device tests run on CPU runners.",
        metavar="N",
    ),
    OptionSpec(
        "--accel-emulate",
        "Select tests as on PLATFORM[:COUNT[:KIND]] hardware, e.g. 'tpu:8:TPU v5 lite'"
        " (for --collect-only previews of what a runner would run).",
        metavar="SPEC",
    ),
)


PERF_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--perf-record",
        "Write this run's timing record (JSON) to PATH when the session ends, also after"
        " failures and Ctrl-C.",
        metavar="PATH",
    ),
    OptionSpec(
        "--perf-env-key",
        "Name the hardware the timings belong to (default: platform/device_kind/xN), e.g. a"
        " runner label.",
        metavar="KEY",
    ),
)

_GROUPS = {
    "accel": "accelerator-aware selection (pytest-accel)",
    "perf": "timing records and baselines (pytest-accel)",
}


def add_options(
    parser: pytest.Parser, specs: tuple[OptionSpec, ...] = ACCEL_OPTIONS, group: str = "accel"
) -> None:
    group_ = parser.getgroup(group, _GROUPS[group])
    for spec in specs:
        if spec.is_flag:
            group_.addoption(spec.flag, action="store_true", default=None, help=spec.help)
            parser.addini(spec.dest, spec.help, type="bool", default=False)
        else:
            group_.addoption(spec.flag, default=None, metavar=spec.metavar, help=spec.help)
            parser.addini(spec.dest, spec.help, default=None)


def raw_setting(
    config: pytest.Config, spec: OptionSpec, environ: Mapping[str, str] | None = None
) -> str | bool | None:
    """The option's value by precedence: command line, env, ini."""
    value = config.getoption(spec.dest)
    if value is not None:
        return value  # type: ignore[no-any-return]
    environ = os.environ if environ is None else environ
    if spec.env and environ.get(spec.env):
        return environ[spec.env]
    ini = config.getini(spec.dest)
    if spec.is_flag:
        return bool(ini)
    return str(ini) if ini not in (None, "") else None


def spec_for(flag: str) -> OptionSpec:
    return next(s for s in (*ACCEL_OPTIONS, *PERF_OPTIONS) if s.flag == flag)


def _choices_error(flag: str, value: str, choices: Collection[str]) -> pytest.UsageError:
    return pytest.UsageError(f"{flag}: invalid choice {value!r} (choose from {', '.join(choices)})")


def valid_accel_choices(extra_platforms: Collection[str]) -> list[str]:
    builtin = ["auto", *BUILTIN_PLATFORMS, *PLATFORM_FAMILIES]
    return builtin + sorted(set(extra_platforms) - set(builtin))


def parse_positive_int(flag: str, value: str) -> int:
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        raise pytest.UsageError(f"{flag}: {value!r} is not a positive integer (e.g. {flag}=8)")
    return int(text)


def parse_timeout(flag: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise pytest.UsageError(f"{flag}: {value!r} is not a positive number of seconds")
    return seconds


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


def resolve(config: pytest.Config, extra_platforms: Collection[str]) -> AccelOptions:
    """Validate every accelerator option up front."""
    choices = valid_accel_choices(extra_platforms)
    accel = str(raw_setting(config, spec_for("--accel")) or "auto").strip().lower()
    if accel not in choices:
        raise _choices_error("--accel", accel, choices)
    probe = str(raw_setting(config, spec_for("--accel-probe")) or "auto").strip().lower()
    if probe not in PROBE_MODES:
        raise _choices_error("--accel-probe", probe, PROBE_MODES)
    timeout_text = raw_setting(config, spec_for("--accel-probe-timeout"))
    timeout = (
        parse_timeout("--accel-probe-timeout", str(timeout_text))
        if timeout_text
        else (DEFAULT_TIMEOUT)
    )
    cpu_text = raw_setting(config, spec_for("--accel-cpu-devices"))
    cpu_devices = parse_positive_int("--accel-cpu-devices", str(cpu_text)) if cpu_text else None
    known = frozenset(c for c in choices if c != "auto")
    emulate_text = raw_setting(config, spec_for("--accel-emulate"))
    emulate = None
    if emulate_text:
        try:
            emulate = parse_emulation(str(emulate_text), known - set(PLATFORM_FAMILIES))
        except EmulationSpecError as exc:
            raise pytest.UsageError(
                f"--accel-emulate: invalid value {emulate_text!r}: {exc};"
                " expected PLATFORM[:COUNT[:KIND]], e.g. 'tpu:8:TPU v5 lite'"
            ) from None
    return AccelOptions(
        requested=None if accel == "auto" else accel,
        allow_missing=bool(raw_setting(config, spec_for("--accel-allow-missing"))),
        only=bool(raw_setting(config, spec_for("--accel-only"))),
        probe=probe,
        probe_timeout=timeout,
        cpu_devices=cpu_devices,
        emulate=emulate,
        known_platforms=known,
    )


@dataclass(frozen=True)
class PerfOptions:
    record: str | None
    env_key: str | None


def resolve_perf(config: pytest.Config) -> PerfOptions:
    record = raw_setting(config, spec_for("--perf-record"))
    key = raw_setting(config, spec_for("--perf-env-key"))
    if key is not None and not str(key).strip():
        raise pytest.UsageError("--perf-env-key: the key must not be empty")
    return PerfOptions(
        record=str(record) if record else None,
        env_key=str(key).strip() if key else None,
    )
