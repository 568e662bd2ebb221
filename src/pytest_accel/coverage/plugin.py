"""The coverage gate: at session end, this run's coverage on its hardware key against
``--accel-min-coverage``, in the terminal, the job summary and the exit status."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_accel.coverage.model import Coverage, coverage_of, describe
from pytest_accel.github import Section, escape_cell
from pytest_accel.outcomes import RAN_THROUGH, RunColumns
from pytest_accel.reports import is_xdist_worker, write_section
from pytest_accel.text import Line, Tone


@dataclass(frozen=True)
class CoverageResult:
    """The run's coverage as the session's end reads it (``session_end.RunResult``)."""

    line: str  # ``coverage: ...; --accel-min-coverage 90: below``
    failing: str | None  # why it fails the run (an interrupted run is not judged: exit 2)
    name: str = "coverage"

    def gate(self) -> str | None:
        return self.failing

    def summary_section(self) -> Section:
        return Section(["### pytest-accel coverage", "", escape_cell(self.line), ""])

    def record_section(self) -> None:
        return None


class CoverageGate:
    def __init__(self, minimum: float) -> None:
        self.minimum = minimum
        self.coverage: Coverage | None = None

    @property
    def below(self) -> bool:
        return self.coverage is not None and self.coverage.below(self.minimum)

    def pytest_accel_run_result(
        self, session: pytest.Session, run: RunColumns
    ) -> CoverageResult | None:
        if session.exitstatus not in RAN_THROUGH and not run.interrupted:
            return None  # stopped before its tests: nothing to judge
        self.coverage = coverage = coverage_of(run)
        failing = None
        if self.below and not coverage.interrupted:
            failing = (
                f"coverage {coverage.pct:.2f}% on {coverage.key} is below --accel-min-coverage"
                f" {self.minimum:g}"
            )
        # The record's columns hold it: `pytest-accel coverage` reads them.
        return CoverageResult(self.line(), failing)

    def line(self) -> str:
        assert self.coverage is not None
        verdict = "below" if self.below else "within"
        if self.coverage.interrupted:
            verdict = "not judged (an interrupted run)"
        return (
            f"coverage: {describe(self.coverage)}; --accel-min-coverage {self.minimum:g}: {verdict}"
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.coverage is not None:
            tone = Tone.ALARM if self.below and not self.coverage.interrupted else Tone.OK
            write_section(terminalreporter, "pytest-accel coverage", [Line(tone, self.line())])


def register_feature(config: pytest.Config, minimum: float) -> None:
    if not is_xdist_worker(config):
        config.pluginmanager.register(CoverageGate(minimum), "pytest_accel:coverage")
