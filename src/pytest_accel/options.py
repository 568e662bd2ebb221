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
from typing import TYPE_CHECKING

import pytest

from pytest_accel.detection import (
    BUILTIN_PLATFORMS,
    PLATFORM_FAMILIES,
    PROBE_TIMEOUT,
    Detection,
    EmulationSpecError,
    parse_emulation,
)

if TYPE_CHECKING:
    from pytest_accel.regression import Rule

PROBE_MODES = ("auto", "none", "jax")
PIN_MODES = ("auto", "off")
SHARD_BY = ("test", "class", "module")
ENV_ACCEL = "PYTEST_ACCEL"


@dataclass(frozen=True)
class OptionSpec:
    flag: str
    help: str
    metavar: str | None = None
    is_flag: bool = False
    env: str | None = None
    default: str = "unset"  # as the README's option table shows it

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
        default="auto",
    ),
    OptionSpec(
        "--accel-allow-missing",
        "With an explicit --accel platform that is not detected: skip its tests instead of"
        " stopping the run.",
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
        "Give JAX N host (CPU) devices: sets JAX_NUM_CPU_DEVICES and XLA_FLAGS for the test"
        " processes, so multi_device tests run on CPU runners.",
        metavar="N",
    ),
    OptionSpec(
        "--accel-pin",
        "With pytest-xdist on a GPU or TPU runner: auto (default) gives each worker its own"
        " devices and makes -n auto the device count; off.",
        metavar="MODE",
        default="auto",
    ),
    OptionSpec(
        "--accel-shard",
        "Run shard K of N (1-based), balanced by the durations in --perf-baseline.",
        metavar="K/N",
    ),
    OptionSpec(
        "--accel-shard-by",
        "What a shard takes whole: test, class (default; class fixtures run once) or module.",
        metavar="UNIT",
        default="class",
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
        default="platform/kind/xN",
    ),
    OptionSpec(
        "--perf-baseline",
        "Compare this run's timings with PATH: a baseline file, a record, or a pytest-split"
        " .test_durations map.",
        metavar="PATH",
    ),
    OptionSpec(
        "--perf-threshold",
        "A regression is slower than median x RATIO (default 1.2).",
        metavar="RATIO",
        default="1.2",
    ),
    OptionSpec(
        "--perf-min-delta",
        "... and slower than the median by at least SECONDS (default 0.05).",
        metavar="SECONDS",
        default="0.05",
    ),
    OptionSpec(
        "--perf-min-duration",
        "... and takes at least SECONDS now (default 0.1).",
        metavar="SECONDS",
        default="0.1",
    ),
    OptionSpec(
        "--perf-min-samples",
        "Samples needed before the noise (MAD) test applies (default 3).",
        metavar="N",
        default="3",
    ),
    OptionSpec(
        "--perf-mad-k",
        "... which requires a robust z-score of log durations above K (default 4.5; 0.6 K"
        " for a change of 1.5x or more).",
        metavar="K",
        default="4.5",
    ),
    OptionSpec(
        "--perf-normalize",
        "on (default): with 20+ tests compared, divide timings by the runner's overall speed"
        " before judging tests, classes and modules; off.",
        metavar="MODE",
        default="on",
    ),
    OptionSpec(
        "--perf-top", "Rows in the terminal section (default 20).", metavar="N", default="20"
    ),
    OptionSpec(
        "--perf-fail",
        "Exit with status 1 when anything regressed.",
        is_flag=True,
        default="off",
    ),
    OptionSpec(
        "--perf-update-baseline",
        "Fold this run's passing timings into the --perf-baseline file (created on first"
        " use), under a file lock.",
        is_flag=True,
        default="off",
    ),
    OptionSpec(
        "--perf-window",
        "Samples kept per test when updating the baseline (default 20).",
        metavar="N",
        default="20",
    ),
)

FLAKY_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--flaky-reruns",
        "Rerun a test whose setup or call failed up to N times (default 0); failed then"
        " passed is flaky and does not fail the session. Defers to pytest-rerunfailures"
        " where that reruns.",
        metavar="N",
        default="0",
    ),
    OptionSpec(
        "--flaky-quarantine",
        "Tests listed in PATH (text: one node id per line; or JSON with platforms and"
        " expiry) still run, but their failures do not fail the session.",
        metavar="PATH",
    ),
    OptionSpec(
        "--flaky-history",
        "Fold this run's outcomes into the history file PATH (per hardware key, under a"
        " file lock) and classify tests as flaky or broken across runs.",
        metavar="PATH",
    ),
    OptionSpec(
        "--flaky-window",
        "Outcomes kept per test in the history (default 50).",
        metavar="N",
        default="50",
    ),
    OptionSpec(
        "--flaky-report",
        "Write the flaky, quarantined and broken tests and flaky_pct (JSON) to PATH.",
        metavar="PATH",
    ),
    OptionSpec(
        "--flaky-max-pct",
        "Exit with status 1 when the share of flaky tests exceeds P percent (e.g. 5).",
        metavar="P",
    ),
)

ALL_OPTIONS = (*ACCEL_OPTIONS, *PERF_OPTIONS, *FLAKY_OPTIONS)

_GROUPS = {
    "accel": "accelerator-aware selection (pytest-accel)",
    "perf": "timing records and baselines (pytest-accel)",
    "flaky": "flaky tests: reruns, quarantine and history (pytest-accel)",
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


def early_setting(early_config: pytest.Config, flag: str) -> str | None:
    """An option's value before options are parsed into ``config.option``."""
    spec = spec_for(flag)
    value = getattr(early_config.known_args_namespace, spec.dest, None)
    if value is None and spec.env:
        value = os.environ.get(spec.env) or None
    if value is None:
        value = early_config.getini(spec.dest) or None
    return None if value is None else str(value)


def spec_for(flag: str) -> OptionSpec:
    return next(s for s in ALL_OPTIONS if s.flag == flag)


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


def parse_non_negative_float(flag: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise pytest.UsageError(f"{flag}: {value!r} is not a non-negative number")
    return number


def parse_positive_float(flag: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise pytest.UsageError(f"{flag}: {value!r} is not a positive number")
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
    pin: str = "auto"
    shard: tuple[int, int] | None = None
    shard_by: str = "class"

    @property
    def shard_label(self) -> str | None:
        return f"{self.shard[0]}/{self.shard[1]}" if self.shard else None


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
        parse_positive_float("--accel-probe-timeout", str(timeout_text))
        if timeout_text
        else (PROBE_TIMEOUT)
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
    pin = str(raw_setting(config, spec_for("--accel-pin")) or "auto").strip().lower()
    if pin not in PIN_MODES:
        raise _choices_error("--accel-pin", pin, PIN_MODES)
    shard_text = raw_setting(config, spec_for("--accel-shard"))
    shard = None
    if shard_text:
        from pytest_accel.sharding import ShardSpecError, parse_shard

        try:
            shard = parse_shard(str(shard_text))
        except ShardSpecError as exc:
            raise pytest.UsageError(f"--accel-shard: {exc}") from None
    shard_by = str(raw_setting(config, spec_for("--accel-shard-by")) or "class").strip().lower()
    if shard_by not in SHARD_BY:
        raise _choices_error("--accel-shard-by", shard_by, SHARD_BY)
    return AccelOptions(
        pin=pin,
        shard=shard,
        shard_by=shard_by,
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
    baseline: str | None
    rule_settings: Mapping[str, float | int | bool]
    top: int
    fail: bool
    update_baseline: bool
    window: int

    @property
    def enabled(self) -> bool:
        return bool(self.record or self.baseline)

    @property
    def rule(self) -> Rule:
        return build_rule(self.rule_settings)


def rule_settings(values: Mapping[str, object]) -> dict[str, float | int | bool]:
    """Validated rule options, keyed by ``Rule`` field; only those that were given.

    Validation needs no numpy and not even the rule's module, so every run can afford it.
    """

    def text(flag: str) -> str | None:
        value = values.get(flag)
        return None if value is None else str(value)

    settings: dict[str, float | int | bool] = {}
    threshold = text("--perf-threshold")
    if threshold is not None:
        settings["threshold"] = parse_positive_float("--perf-threshold", threshold)
        if settings["threshold"] < 1:
            raise pytest.UsageError(
                f"--perf-threshold: {threshold!r} is below 1; a regression is a ratio above 1"
            )
    for flag, field in (
        ("--perf-min-delta", "min_delta"),
        ("--perf-min-duration", "min_duration"),
        ("--perf-mad-k", "mad_k"),
    ):
        given = text(flag)
        if given is not None:
            settings[field] = parse_non_negative_float(flag, given)
    samples = text("--perf-min-samples")
    if samples is not None:
        settings["min_samples"] = parse_positive_int("--perf-min-samples", samples)
    normalize = text("--perf-normalize")
    if normalize is not None:
        mode = normalize.strip().lower()
        if mode not in ("on", "off"):
            raise _choices_error("--perf-normalize", mode, ("on", "off"))
        settings["normalize"] = mode == "on"
    return settings


def build_rule(settings: Mapping[str, float | int | bool]) -> Rule:
    from pytest_accel.regression import Rule

    return Rule(**settings)  # type: ignore[arg-type]


def rule_from(values: Mapping[str, object]) -> Rule:
    """The regression rule from option values keyed by flag (None = default)."""
    return build_rule(rule_settings(values))


def resolve_perf(config: pytest.Config) -> PerfOptions:
    def get(flag: str) -> str | bool | None:
        return raw_setting(config, spec_for(flag))

    record, key, baseline = get("--perf-record"), get("--perf-env-key"), get("--perf-baseline")
    if key is not None and not str(key).strip():
        raise pytest.UsageError("--perf-env-key: the key must not be empty")
    settings = rule_settings({s.flag: get(s.flag) for s in PERF_OPTIONS if not s.is_flag})
    top, window = get("--perf-top"), get("--perf-window")
    update = bool(get("--perf-update-baseline"))
    if update and not baseline:
        raise pytest.UsageError("--perf-update-baseline needs --perf-baseline PATH to update")
    return PerfOptions(
        record=str(record) if record else None,
        env_key=str(key).strip() if key else None,
        baseline=str(baseline) if baseline else None,
        rule_settings=settings,
        top=parse_positive_int("--perf-top", str(top)) if top else 20,
        fail=bool(get("--perf-fail")),
        update_baseline=update,
        window=parse_positive_int("--perf-window", str(window)) if window else 20,
    )


DEFAULT_FLAKY_WINDOW = 50


def parse_non_negative_int(flag: str, value: str) -> int:
    text = value.strip()
    if not text.isdigit():
        raise pytest.UsageError(f"{flag}: {value!r} is not a non-negative integer (e.g. {flag}=2)")
    return int(text)


@dataclass(frozen=True)
class FlakyOptions:
    reruns: int
    quarantine: str | None
    history: str | None
    window: int
    report: str | None
    max_pct: float | None

    @property
    def enabled(self) -> bool:
        return (
            bool(self.reruns or self.quarantine or self.history or self.report)
            or self.max_pct is not None
        )


def resolve_flaky(config: pytest.Config) -> FlakyOptions:
    def get(flag: str) -> str | None:
        value = raw_setting(config, spec_for(flag))
        return None if value in (None, "") else str(value)

    reruns, window, max_pct = get("--flaky-reruns"), get("--flaky-window"), get("--flaky-max-pct")
    pct = None
    if max_pct is not None:
        pct = parse_non_negative_float("--flaky-max-pct", max_pct)
        if pct > 100:
            raise pytest.UsageError(
                f"--flaky-max-pct: {max_pct!r} is above 100; give a percentage such as 5"
            )
    return FlakyOptions(
        reruns=parse_non_negative_int("--flaky-reruns", reruns) if reruns else 0,
        quarantine=get("--flaky-quarantine"),
        history=get("--flaky-history"),
        window=parse_positive_int("--flaky-window", window) if window else DEFAULT_FLAKY_WINDOW,
        report=get("--flaky-report"),
        max_pct=pct,
    )
