"""The timing feature's options and the switch that registers it.

Rule options are validated here without importing the rule (or numpy), so every run
can afford it; the rule itself is built only when there is something to compare.  The
command line tool shares them, and imports no pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.file_uses import FileUse
from pytest_accel.perf.model import DEFAULT_WINDOW, TIMES  # --perf-window, --perf-time
from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    choices_error,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    parse_size,
    raw_setting,
    spec_in,
    text_setting,
    usage_error,
)

if TYPE_CHECKING:
    import pytest

    from pytest_accel.perf.analysis.rule import Rule

__all__ = ["DEFAULT_WINDOW", "OPTIONS", "PerfOptions", "file_uses", "resolve"]

DEFAULT_TOP = 20

OPTIONS = OptionGroup(
    "perf",
    "Timing records and baselines",
    "timing records and baselines (pytest-accel)",
    (
        OptionSpec(
            "--perf-record",
            "Write this run's timing record (JSON) to PATH when the session ends, also after"
            " failures and Ctrl-C.",
            metavar="PATH",
        ),
        OptionSpec(
            "--perf-baseline",
            "Compare this run's timings with PATH: a baseline file, a record, or a"
            " pytest-split .test_durations map.",
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
            "... which requires a robust z-score of log durations above K (default 4.5; 0.6"
            " K for a change of 1.5x or more).",
            metavar="K",
            default="4.5",
        ),
        OptionSpec(
            "--perf-normalize",
            "on (default): with 20+ tests compared that agree on the runner's speed, a"
            " finding must also hold after dividing by it (it explains findings away,"
            " never makes one); off.",
            metavar="MODE",
            default="on",
        ),
        OptionSpec(
            "--perf-time",
            "What a test's time is: execution (default; where the suite uses JAX, its"
            " compilation is taken out and judged apart) or wall (as measured).",
            metavar="WHAT",
            default="execution",
        ),
        OptionSpec(
            "--perf-memory-threshold",
            "A test's peak device memory (GPU, TPU) grew: at least its most in the"
            " baseline x RATIO (default 1.25)...",
            metavar="RATIO",
            default="1.25",
        ),
        OptionSpec(
            "--perf-memory-min-delta",
            "... and SIZE more (default 64MiB; bytes, or 512MiB, 2GiB, 2G).",
            metavar="SIZE",
            default="64MiB",
        ),
        OptionSpec(
            "--accel-max-device-memory",
            "Fail a test (at teardown) whose peak device memory on a GPU or TPU passed SIZE"
            " (2GiB, 512MiB, 2G; JAX and PyTorch); unset: no limit.",
            metavar="SIZE",
        ),
        OptionSpec(
            "--perf-new-slow",
            "Name a new test (no baseline yet) that took SECONDS or more (default 1.0).",
            metavar="SECONDS",
            default="1.0",
        ),
        OptionSpec(
            "--perf-top", "Rows in the terminal section (default 20).", metavar="N", default="20"
        ),
        OptionSpec(
            "--perf-fail",
            "Exit with status 1 on an alarm: a test, class, module or the suite total that"
            " regressed or changed to slower, or a test that recompiles (RECOMPILED).",
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
            "Runs kept per hardware key when updating the baseline (default 20); a test"
            " keeps the samples of the runs among them it passed in.",
            metavar="N",
            default="20",
        ),
    ),
)
RULE_FLAGS = (
    "--perf-threshold",
    "--perf-min-delta",
    "--perf-min-duration",
    "--perf-min-samples",
    "--perf-mad-k",
    "--perf-normalize",
    "--perf-time",
    "--perf-memory-threshold",
    "--perf-memory-min-delta",
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class PerfOptions:
    record: str | None
    baseline: str | None
    rule_settings: Mapping[str, float | int | bool | str]
    top: int
    fail: bool
    update_baseline: bool
    window: int
    new_slow: float = 1.0
    max_device_memory: int | None = None  # bytes (--accel-max-device-memory)

    @property
    def enabled(self) -> bool:
        return bool(self.record or self.baseline)

    @property
    def rule(self) -> Rule:
        return build_rule(self.rule_settings)


def rule_settings(
    values: Mapping[str, object], shown: Callable[[str], str] = str
) -> dict[str, float | int | bool | str]:
    """Validated rule options keyed by ``Rule`` field, from values keyed by flag; only
    those that were given.  ``shown`` names a flag in errors as the user typed it (the
    command line tool's ``--threshold`` for ``--perf-threshold``)."""

    def text(flag: str) -> str | None:
        value = values.get(flag)
        return None if value is None else str(value)

    settings: dict[str, float | int | bool | str] = {}
    threshold = text("--perf-threshold")
    if threshold is not None:
        ratio = settings["threshold"] = parse_positive_float(shown("--perf-threshold"), threshold)
        if ratio < 1:
            raise usage_error(
                f"{shown('--perf-threshold')}: {threshold!r} is below 1; a regression is a"
                " ratio above 1"
            )
    for flag, field in (
        ("--perf-min-delta", "min_delta"),
        ("--perf-min-duration", "min_duration"),
        ("--perf-mad-k", "mad_k"),
    ):
        given = text(flag)
        if given is not None:
            settings[field] = parse_non_negative_float(shown(flag), given)
    samples = text("--perf-min-samples")
    if samples is not None:
        settings["min_samples"] = parse_positive_int(shown("--perf-min-samples"), samples)
    normalize = text("--perf-normalize")
    if normalize is not None:
        mode = normalize.strip().lower()
        if mode not in ("on", "off"):
            raise choices_error(shown("--perf-normalize"), mode, ("on", "off"))
        settings["normalize"] = mode == "on"
    memory_ratio = text("--perf-memory-threshold")
    if memory_ratio is not None:
        ratio = settings["memory_threshold"] = parse_positive_float(
            shown("--perf-memory-threshold"), memory_ratio
        )
        if ratio < 1:
            raise usage_error(
                f"{shown('--perf-memory-threshold')}: {memory_ratio!r} is below 1; growth is"
                " a ratio above 1"
            )
    memory_delta = text("--perf-memory-min-delta")
    if memory_delta is not None:
        settings["memory_min_delta"] = parse_size(shown("--perf-memory-min-delta"), memory_delta)
    time = text("--perf-time")
    if time is not None:
        what = time.strip().lower()
        if what not in TIMES:
            raise choices_error(shown("--perf-time"), what, TIMES)
        settings["time"] = what
    return settings


def build_rule(settings: Mapping[str, float | int | bool | str]) -> Rule:
    from pytest_accel.perf.analysis.rule import Rule

    return Rule(**settings)  # type: ignore[arg-type]


def rule_from(values: Mapping[str, object], shown: Callable[[str], str] = str) -> Rule:
    """The regression rule from option values keyed by flag (None = default)."""
    return build_rule(rule_settings(values, shown))


def file_uses(config: pytest.Config) -> tuple[FileUse, ...]:
    """The files the options name, and what a run does with them."""
    record = text_setting(config, option("--perf-record"))
    baseline = text_setting(config, option("--perf-baseline"))
    update = bool(raw_setting(config, option("--perf-update-baseline")))
    uses = []
    if record:
        uses.append(FileUse("--perf-record", record, writes=True))
    if baseline:
        uses.append(FileUse("--perf-baseline", baseline, reads=True, writes=update))
    return tuple(uses)


def resolve(config: pytest.Config) -> PerfOptions:
    """The options, validated (once per session: ``register`` asks, and passes them on)."""

    def get(flag: str) -> str | bool | None:
        return raw_setting(config, option(flag))

    record, baseline = get("--perf-record"), get("--perf-baseline")
    settings = rule_settings({flag: get(flag) for flag in RULE_FLAGS})
    top, window, new_slow = get("--perf-top"), get("--perf-window"), get("--perf-new-slow")
    update = bool(get("--perf-update-baseline"))
    limit = get("--accel-max-device-memory")
    if update and not baseline:
        raise usage_error("--perf-update-baseline needs --perf-baseline PATH to update")
    return PerfOptions(
        record=str(record) if record else None,
        baseline=str(baseline) if baseline else None,
        rule_settings=settings,
        top=parse_positive_int("--perf-top", str(top)) if top else DEFAULT_TOP,
        fail=bool(get("--perf-fail")),
        update_baseline=update,
        window=parse_positive_int("--perf-window", str(window)) if window else DEFAULT_WINDOW,
        new_slow=parse_non_negative_float("--perf-new-slow", str(new_slow)) if new_slow else 1.0,
        max_device_memory=parse_size("--accel-max-device-memory", str(limit)) if limit else None,
    )
