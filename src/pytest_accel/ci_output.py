"""What a CI user sees: terminal lines, GitHub workflow annotations, the job summary.

Test ids are user data: a parametrize id can hold ``::warning::``, ``%0A``, newlines or
``|``.  Everything that reaches a workflow command is escaped as GitHub's toolkit does,
and everything in the Markdown table is escaped for a table cell.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from pytest_accel.regression import Comparison, Finding

MAX_ANNOTATIONS = 10
MAX_SUMMARY_BYTES = 900 * 1024


class Location(NamedTuple):
    path: str
    line: int | None


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


_MARKDOWN_PUNCTUATION = "\\`*_[]|#~!"


def escape_cell(text: str) -> str:
    """A Markdown table cell: no line breaks, no column breaks, no markup, no HTML."""
    text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(f"\\{c}" if c in _MARKDOWN_PUNCTUATION else c for c in text)


def describe(finding: Finding) -> str:
    basis = (
        f"over {finding.samples} test(s)"
        if finding.kind == "session"
        else f"{finding.samples} sample(s)"
    )
    return (
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
    return line


def missing_env_line(comparison: Comparison, source: str) -> str:
    keys = ", ".join(comparison.available_envs) or "none"
    return (
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
    lines = []
    for finding in comparison.regressions[:limit]:
        where = locate(finding.id)
        props = [f"title={escape_property(f'perf regression ({finding.kind})')}"]
        if where is not None:
            props.insert(0, f"file={escape_property(where.path)}")
            if where.line is not None:
                props.insert(1, f"line={where.line}")
        lines.append(f"::warning {','.join(props)}::{escape_data(describe(finding))}")
    return lines


def markdown(comparison: Comparison, failing: bool) -> str:
    """The job-summary section, kept under ``MAX_SUMMARY_BYTES``."""
    head = [
        "### pytest-accel performance",
        "",
        escape_cell(summary_line(comparison, failing)),
        "",
    ]
    findings: Sequence[tuple[str, Finding]] = [
        *(("regression", f) for f in comparison.regressions),
        *(("improvement", f) for f in comparison.improvements),
    ]
    if not findings:
        return "\n".join(head) + "\n"
    table = [
        "| | kind | id | baseline (s) | current (s) | ratio | samples |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    size = sum(len(line.encode()) + 1 for line in head + table)
    rows: list[str] = []
    for what, finding in findings:
        row = (
            f"| {what} | {finding.kind} | {escape_cell(finding.id)} | {finding.baseline:.3f} |"
            f" {finding.current:.3f} | {finding.ratio:.2f}x | {finding.samples} |"
        )
        if size + len(row.encode()) + 200 > MAX_SUMMARY_BYTES:
            omitted = len(findings) - len(rows)
            table += rows
            table.append("")
            table.append(f"*{omitted} more row(s) omitted to keep the summary under 900 KiB.*")
            return "\n".join(head + table) + "\n"
        rows.append(row)
        size += len(row.encode()) + 1
    return "\n".join(head + table + rows) + "\n"


def append_step_summary(text: str, environ: Mapping[str, str] | None = None) -> bool:
    """Append to ``$GITHUB_STEP_SUMMARY`` if it is set; True when written."""
    environ = os.environ if environ is None else environ
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
    return True


def in_github_actions(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get("GITHUB_ACTIONS") == "true"
