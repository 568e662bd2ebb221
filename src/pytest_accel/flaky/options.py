"""The flaky feature's options and the switch that registers it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    parse_non_negative_float,
    parse_non_negative_int,
    parse_positive_int,
    spec_in,
    text_setting,
)

DEFAULT_WINDOW = 50

OPTIONS = OptionGroup(
    "flaky",
    "Flaky tests",
    "flaky tests: reruns, quarantine and history (pytest-accel)",
    (
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
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


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


options_key = pytest.StashKey[FlakyOptions]()


def resolve(config: pytest.Config) -> FlakyOptions:
    """The options, validated once per session."""
    found = config.stash.get(options_key, None)
    if found is not None:
        return found

    def get(flag: str) -> str | None:
        return text_setting(config, option(flag))

    reruns, window, max_pct = get("--flaky-reruns"), get("--flaky-window"), get("--flaky-max-pct")
    pct = None
    if max_pct is not None:
        pct = parse_non_negative_float("--flaky-max-pct", max_pct)
        if pct > 100:
            raise pytest.UsageError(
                f"--flaky-max-pct: {max_pct!r} is above 100; give a percentage such as 5"
            )
    resolved = config.stash[options_key] = FlakyOptions(
        reruns=parse_non_negative_int("--flaky-reruns", reruns) if reruns else 0,
        quarantine=get("--flaky-quarantine"),
        history=get("--flaky-history"),
        window=parse_positive_int("--flaky-window", window) if window else DEFAULT_WINDOW,
        report=get("--flaky-report"),
        max_pct=pct,
    )
    return resolved
