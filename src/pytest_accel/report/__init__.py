"""Something to look at: a self-contained HTML report of timings, trends and the flaky
history (``--accel-report``, ``pytest-accel report``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.file_uses import FileUse
from pytest_accel.settings import OptionGroup, OptionSpec, text_setting

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "pytest_accel_wants_timings", "register"]

OPTIONS = OptionGroup(
    "accel-report",
    "Report",
    "the HTML report (pytest-accel)",
    (
        OptionSpec(
            "--accel-report",
            "Write an HTML report of this run (timings, regressions and changes with their"
            " trends, the flaky history) to PATH at session end: one file, works offline.",
            metavar="PATH",
        ),
    ),
)


def _path(config: pytest.Config) -> str | None:
    return text_setting(config, OPTIONS.specs[0])


def file_uses(config: pytest.Config) -> tuple[FileUse, ...]:
    path = _path(config)
    return (FileUse("--accel-report", path, writes=True),) if path else ()


def pytest_accel_wants_timings(config: pytest.Config) -> bool:
    """With --accel-report, the page shows this run's timings."""
    return bool(_path(config))


def register(config: pytest.Config) -> None:
    """With --accel-report: write the page at session end."""
    path = _path(config)
    if path and not config.option.collectonly:  # nothing ran: nothing to report
        from pytest_accel.report.plugin import register_feature

        register_feature(config, path)
