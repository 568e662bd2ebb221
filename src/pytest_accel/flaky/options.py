"""The flaky feature's options and the switch that registers it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.file_uses import FileUse
from pytest_accel.settings import (
    STORE_OPTION,
    OptionGroup,
    OptionSpec,
    list_setting,
    parse_non_negative_float,
    parse_non_negative_int,
    parse_positive_int,
    raw_setting,
    spec_in,
    text_setting,
    usage_error,
)

if TYPE_CHECKING:
    import pytest

DEFAULT_WINDOW = 50  # runs kept per hardware key in the history (--flaky-window)

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
        OptionSpec(
            "--flaky-rerun-budget",
            "At most N reruns in the whole session, all xdist workers together (default: no"
            " limit); the summary says when the budget ran out.",
            metavar="N",
        ),
        OptionSpec(
            "--flaky-mass-failure",
            "Once more than PCT% of at least 20 executed tests have failed, stop rerunning"
            " (a lost accelerator is not flakiness); the history marks the run and infers"
            " nothing from it (default 30; 100: never).",
            metavar="PCT",
            default="30",
        ),
        OptionSpec(
            "--flaky-only-rerun",
            "Rerun only failures whose 'ExceptionType: message' matches REGEX (repeatable).",
            metavar="REGEX",
            repeatable=True,
        ),
        OptionSpec(
            "--flaky-rerun-except",
            "Never rerun failures whose 'ExceptionType: message' matches REGEX (repeatable).",
            metavar="REGEX",
            repeatable=True,
        ),
        OptionSpec(
            "--flaky-rerun-delay",
            "Wait SECONDS before each rerun (default 0).",
            metavar="SECONDS",
            default="0",
        ),
        OptionSpec(
            "--flaky-new-runs",
            "With --flaky-history: run each test the history has never seen N times; mixed"
            " outcomes make it flaky before anyone trusts it (default 1).",
            metavar="N",
            default="1",
        ),
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class RerunPolicy:
    """When a failure is tried again."""

    reruns: int = 0
    budget: int | None = None  # reruns in the whole session, all workers together
    mass_failure: float = 30.0  # percent of executed tests failed: stop rerunning
    only: tuple[re.Pattern[str], ...] = ()  # on "ExceptionType: message"
    never: tuple[re.Pattern[str], ...] = ()
    delay: float = 0.0

    def allows(self, failure: str) -> bool:
        """Whether the filters let a failure described as ``ExceptionType: message``
        be rerun."""
        if self.only and not any(p.search(failure) for p in self.only):
            return False
        return not any(p.search(failure) for p in self.never)


@dataclass(frozen=True)
class FlakyOptions:
    reruns: int
    quarantine: str | None
    history: str | None
    window: int
    report: str | None
    max_pct: float | None
    policy: RerunPolicy = RerunPolicy()
    new_runs: int = 1

    @property
    def enabled(self) -> bool:
        return (
            bool(self.reruns or self.quarantine or self.history or self.report)
            or self.max_pct is not None
        )


def file_uses(config: pytest.Config) -> tuple[FileUse, ...]:
    """The files the options name, and what a run does with them."""
    uses = []
    for flag, reads, writes in (
        ("--flaky-quarantine", True, False),
        ("--flaky-history", True, True),
        ("--flaky-report", False, True),
    ):
        path = text_setting(config, option(flag))
        if path:
            uses.append(FileUse(flag, path, reads=reads, writes=writes))
    return tuple(uses)


def resolve(config: pytest.Config) -> FlakyOptions:
    """The options, validated (once per session: ``register`` asks, and passes them on)."""

    def get(flag: str) -> str | None:
        return text_setting(config, option(flag))

    reruns, window, max_pct = get("--flaky-reruns"), get("--flaky-window"), get("--flaky-max-pct")
    pct = None
    if max_pct is not None:
        pct = parse_non_negative_float("--flaky-max-pct", max_pct)
        if pct > 100:
            raise usage_error(
                f"--flaky-max-pct: {max_pct!r} is above 100; give a percentage such as 5"
            )
    history = get("--flaky-history")
    new_runs_text = get("--flaky-new-runs")
    new_runs = parse_positive_int("--flaky-new-runs", new_runs_text) if new_runs_text else 1
    if new_runs > 1 and not history and not raw_setting(config, STORE_OPTION):
        raise usage_error(
            "--flaky-new-runs needs --flaky-history PATH (or --accel-store URL): a test is"
            " new when the history has never seen it"
        )
    count = parse_non_negative_int("--flaky-reruns", reruns) if reruns else 0
    return FlakyOptions(
        reruns=count,
        quarantine=get("--flaky-quarantine"),
        history=history,
        window=parse_positive_int("--flaky-window", window) if window else DEFAULT_WINDOW,
        report=get("--flaky-report"),
        max_pct=pct,
        policy=_policy(config, count, get),
        new_runs=new_runs,
    )


def _policy(config: pytest.Config, reruns: int, get: Callable[[str], str | None]) -> RerunPolicy:
    budget, mass, delay = (
        get("--flaky-rerun-budget"),
        get("--flaky-mass-failure"),
        get("--flaky-rerun-delay"),
    )
    mass_failure = parse_non_negative_float("--flaky-mass-failure", mass) if mass else 30.0
    if mass_failure > 100:
        raise usage_error(
            f"--flaky-mass-failure: {mass!r} is above 100; give a percentage such as 30"
        )
    return RerunPolicy(
        reruns=reruns,
        budget=parse_non_negative_int("--flaky-rerun-budget", budget) if budget else None,
        mass_failure=mass_failure,
        only=_patterns(config, "--flaky-only-rerun"),
        never=_patterns(config, "--flaky-rerun-except"),
        delay=parse_non_negative_float("--flaky-rerun-delay", delay) if delay else 0.0,
    )


def _patterns(config: pytest.Config, flag: str) -> tuple[re.Pattern[str], ...]:
    patterns = []
    for text in list_setting(config, option(flag)):
        try:
            patterns.append(re.compile(text))
        except re.error as exc:
            raise usage_error(f"{flag}: {text!r} is not a regular expression ({exc})") from None
    return tuple(patterns)
