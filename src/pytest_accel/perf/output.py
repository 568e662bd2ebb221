"""What a comparison looks like to a CI user: terminal lines, warnings text, GitHub
annotations and the job-summary section (escaping is ``pytest_accel.github``'s)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_accel.github import (
    MAX_ANNOTATIONS,
    MAX_SUMMARY_BYTES,
    Location,
    Section,
    annotation,
    escape_cell,
    fit,
)
from pytest_accel.perf.regression import Comparison, Finding
from pytest_accel.text import one_line


def describe(finding: Finding) -> str:
    basis = (
        f"over {finding.samples} test(s)"
        if finding.kind == "session"
        else f"{finding.samples} sample(s)"
    )
    return one_line(
        f"{finding.kind} {finding.id}: {finding.current:.3f}s vs baseline"
        f" {finding.baseline:.3f}s ({finding.ratio:.2f}x, {basis})"
    )


def summary_line(comparison: Comparison, failing: bool) -> str:
    parts = [
        f"{len(comparison.regressions)} regression(s)",
        f"{len(comparison.improvements)} improvement(s)",
        f"{len(comparison.new)} new",
        f"{len(comparison.missing)} missing",
        f"{comparison.compared} test(s) compared under {comparison.env}",
    ]
    line = "perf: " + ", ".join(parts)
    if comparison.speed != 1.0:
        line += f"; this run was {comparison.speed:.2f}x the baseline overall"
    if failing:
        line += " -- failing the run (--perf-fail)"
    return one_line(line)


def missing_env_line(comparison: Comparison, source: str) -> str:
    keys = ", ".join(comparison.available_envs) or "none"
    return one_line(
        f"perf: {source} has no timings for {comparison.env!r}; nothing compared"
        f" (it has: {keys}). Use --perf-env-key to pick one."
    )


def terminal_rows(comparison: Comparison, top: int) -> list[str]:
    rows = [f"REGRESSION {describe(f)}" for f in comparison.regressions[:top]]
    if len(comparison.regressions) > top:
        rows.append(f"... and {len(comparison.regressions) - top} more regression(s)")
    rows += [
        f"improved   {describe(f)}" for f in comparison.improvements[: max(0, top - len(rows))]
    ]
    return rows


def workflow_commands(
    comparison: Comparison,
    locate: Callable[[str], Location | None],
    limit: int = MAX_ANNOTATIONS,
) -> list[str]:
    """``::warning`` workflow commands for the worst regressions, at most ``limit``."""
    return [
        annotation(
            "warning", describe(finding), locate(finding.id), f"perf regression ({finding.kind})"
        )
        for finding in comparison.regressions[:limit]
    ]


def summary_section(comparison: Comparison, failing: bool) -> Section:
    """The job-summary section: the summary line, then one table row per finding."""
    head = ["### pytest-accel performance", "", escape_cell(summary_line(comparison, failing)), ""]
    findings: Sequence[tuple[str, Finding]] = [
        *(("regression", f) for f in comparison.regressions),
        *(("improvement", f) for f in comparison.improvements),
    ]
    if not findings:
        return Section(head)
    head += [
        "| | kind | id | baseline (s) | current (s) | ratio | samples |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    rows = [
        f"| {what} | {f.kind} | {escape_cell(f.id)} | {f.baseline:.3f} |"
        f" {f.current:.3f} | {f.ratio:.2f}x | {f.samples} |"
        for what, f in findings
    ]
    return Section(head, rows)


def markdown(comparison: Comparison, failing: bool) -> str:
    """The section alone, within the job summary's budget (``compare --format markdown``)."""
    return fit([summary_section(comparison, failing)], MAX_SUMMARY_BYTES)
