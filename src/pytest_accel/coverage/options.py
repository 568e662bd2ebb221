"""The coverage gate's option."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    parse_non_negative_float,
    text_setting,
    usage_error,
)

if TYPE_CHECKING:
    import pytest

OPTIONS = OptionGroup(
    "accel-coverage",
    "Coverage",
    "what accelerator CI covers (pytest-accel)",
    (
        OptionSpec(
            "--accel-min-coverage",
            "Exit with status 1 when fewer than PCT percent of the collected tests passed on"
            " this hardware key (skips, xfails and failures never count as covered).",
            metavar="PCT",
        ),
    ),
)


def resolve(config: pytest.Config) -> float | None:
    """The gate's percentage, or None."""
    text = text_setting(config, OPTIONS.specs[0])
    if text is None:
        return None
    pct = parse_non_negative_float("--accel-min-coverage", text)
    if pct > 100:
        raise usage_error(
            f"--accel-min-coverage: {text!r} is above 100; give a percentage such as 80"
        )
    return pct
