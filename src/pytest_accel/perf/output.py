"""What a comparison looks like to a CI user: terminal lines, warnings text, GitHub
annotations and the job-summary section (escaping is ``pytest_accel.github``'s)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_accel.github import (
    MAX_ANNOTATIONS,
    MAX_SUMMARY_BYTES,
    Location,
    Section,
    annotation,
    escape_cell,
    fit,
    mermaid_line_chart,
)
from pytest_accel.perf.findings import Change, Comparison, Finding
from pytest_accel.text import one_line


def seconds(value: float) -> str:
    """``0.213s``, ``1.52s``, ``12.3s``: three significant digits."""
    return f"{value:.3g}s"


def describe(finding: Finding) -> str:
    """``test t.py::a: 0.430s vs baseline 0.210s (2.05x, 20 sample(s))``; with a runner-
    speed correction, both ratios."""
    basis = (
        f"over {finding.samples} test(s)"
        if finding.kind == "session"
        else f"{finding.samples} sample(s)"
    )
    ratio = f"{finding.ratio:.2f}x"
    if finding.corrected is not None:
        ratio += f" as measured, {finding.corrected:.2f}x for this runner's speed"
    if finding.warmup:
        basis += ", first in its process, as in them"
    return one_line(
        f"{finding.kind} {finding.id}: {finding.current:.3f}s vs baseline"
        f" {finding.baseline:.3f}s ({ratio}, {basis})"
    )


def describe_change(change: Change) -> str:
    """``test t.py::a: 0.21s -> 0.43s (2.05x) since abc1234, 3 runs``."""
    return one_line(
        f"{change.kind} {change.id}: {seconds(change.before)} -> {seconds(change.after)}"
        f" ({change.ratio:.2f}x) since {change.since.describe()}, {change.runs} runs"
    )


def alarm_count(comparison: Comparison) -> str:
    """``2 regression(s) and 1 slowdown change(s)``: what ``--perf-fail`` fails on."""
    parts = [f"{len(comparison.regressions)} regression(s)"]
    if comparison.slowdowns:
        parts.append(f"{len(comparison.slowdowns)} slowdown change(s)")
    return " and ".join(parts)


def summary_line(comparison: Comparison, failing: bool, fail_option: str = "--perf-fail") -> str:
    """The one-line summary; ``fail_option`` names the option that fails on findings as
    the reader typed it (``--fail`` for ``pytest-accel compare``)."""
    new = f"{len(comparison.new)} new"
    if comparison.new_slow:
        new += f" ({len(comparison.new_slow)} slow)"
    parts = [
        f"{len(comparison.regressions)} regression(s)",
        f"{len(comparison.changes)} change(s)",
        f"{len(comparison.improvements)} improvement(s)",
        new,
        f"{len(comparison.missing)} missing",
        f"{comparison.compared} test(s) compared under {comparison.env}",
    ]
    line = "perf: " + ", ".join(parts)
    if comparison.speed != 1.0:
        line += f"; this run was {comparison.speed:.2f}x the baseline overall"
    if failing:
        line += f" -- failing the run ({fail_option})"
    return one_line(line)


def missing_env_line(comparison: Comparison, source: str) -> str:
    keys = ", ".join(comparison.available_envs) or "none"
    return one_line(
        f"perf: {source} has no timings for {comparison.env!r}; nothing compared"
        f" (it has: {keys}). Use --perf-env-key to pick one."
    )


def terminal_rows(comparison: Comparison, top: int) -> list[str]:
    """Regressions, changes (slower first), improvements, new slow tests: ``top`` rows
    of each, and a line for what is left out."""
    sections = [
        ("REGRESSION", [describe(f) for f in comparison.regressions]),
        ("CHANGED", [describe_change(c) for c in comparison.changes]),
        ("improved  ", [describe(f) for f in comparison.improvements]),
        (
            "NEW SLOW",
            [f"test {t}: {seconds(s)} (no baseline yet)" for t, s in comparison.new_slow],
        ),
    ]
    rows: list[str] = []
    for label, lines in sections:
        rows += [one_line(f"{label} {line}") for line in lines[:top]]
        if len(lines) > top:
            rows.append(f"... and {len(lines) - top} more {label.strip().lower()} row(s)")
    if comparison.warmup:
        shown = _first(comparison.warmup)
        rows.append(
            one_line(
                f"not judged: {len(comparison.warmup)} test(s) ran first in their process and"
                f" paid its warm-up, which no baseline run saw them pay ({shown})"
            )
        )
    if comparison.unconfirmed:
        rows.append(
            one_line(
                f"order: this run was {comparison.layout}, the baseline's runs"
                f" {comparison.baseline_layout}; {len(comparison.unconfirmed)} test(s) that"
                f" moved while their class and module held are not findings"
                f" ({_first(comparison.unconfirmed)})"
            )
        )
    return rows


def _first(ids: list[str], count: int = 3) -> str:
    return ", ".join(ids[:count]) + (" ..." if len(ids) > count else "")


Locate = Callable[[str, str], Location | None]  # (kind, id) -> where it is


def workflow_commands(
    comparison: Comparison, locate: Locate, limit: int = MAX_ANNOTATIONS
) -> list[str]:
    """``::warning`` workflow commands for the worst regressions and slowdown changes,
    at most ``limit``."""
    alarms: list[tuple[str, str, str, str]] = [
        (f.kind, f.id, describe(f), "perf regression") for f in comparison.regressions
    ]
    alarms += [(c.kind, c.id, describe_change(c), "perf change") for c in comparison.slowdowns]
    return [
        annotation("warning", text, locate(kind, ident), f"{title} ({kind})")
        for kind, ident, text, title in alarms[:limit]
    ]


def summary_section(
    comparison: Comparison, failing: bool, fail_option: str = "--perf-fail"
) -> Section:
    """The job-summary section: the summary line, then one table row per finding."""
    line = summary_line(comparison, failing, fail_option)
    head = ["### pytest-accel performance", "", escape_cell(line), ""]
    if comparison.suite_history and comparison.suite_now:
        labels = [label for label, _ in comparison.suite_history] + ["this run"]
        totals = [total for _, total in comparison.suite_history] + [comparison.suite_now]
        title = f"Suite total per run, {comparison.env}"
        head += [*mermaid_line_chart(title, labels, totals, "seconds"), ""]
    rows = [_row("regression", f, f"{f.samples} samples") for f in comparison.regressions]
    rows += [
        _row("change", c, f"since {escape_cell(c.since.describe())}, {c.runs} runs")
        for c in comparison.changes
    ]
    rows += [_row("improvement", f, f"{f.samples} samples") for f in comparison.improvements]
    rows += [
        f"| new, slow | test | {escape_cell(t)} | | {s:.3f} | | no baseline yet |"
        for t, s in comparison.new_slow
    ]
    if not rows:
        return Section(head)
    head += [
        "| | kind | id | baseline (s) | current (s) | ratio | evidence |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    return Section(head, rows)


def _row(what: str, finding: Finding | Change, evidence: str) -> str:
    then, now = (
        (finding.baseline, finding.current)
        if isinstance(finding, Finding)
        else (finding.before, finding.after)
    )
    return (
        f"| {what} | {finding.kind} | {escape_cell(finding.id)} | {then:.3f} | {now:.3f} |"
        f" {finding.ratio:.2f}x | {evidence} |"
    )


def markdown(comparison: Comparison, failing: bool, fail_option: str = "--perf-fail") -> str:
    """The section alone, within the job summary's budget (``compare --format markdown``)."""
    return fit([summary_section(comparison, failing, fail_option)], MAX_SUMMARY_BYTES)


def compilation_line(compilation: Mapping[str, float | int]) -> str:
    """``compilation: 41% of test time (312 compilations, 12.3 s; ...)``: what JAX's
    tracing and compiling took, and what the persistent compilation cache saved or
    could save."""
    count, seconds = int(compilation["count"]), float(compilation["seconds"])
    hits, misses = int(compilation["cache_hits"]), int(compilation["cache_misses"])
    cache = (
        f"persistent cache: {hits} hit(s), {misses} miss(es)"
        if hits or misses
        else "the persistent compilation cache is off (jax_compilation_cache_dir):"
        f" up to {seconds:.1f} s a run to save"
    )
    return one_line(
        f"compilation: {100 * float(compilation['share']):.0f}% of test time ({count}"
        f" compilation(s), {seconds:.1f} s; {cache})"
    )


def compilation_section(compilation: Mapping[str, float | int]) -> Section:
    return Section(
        ["### pytest-accel compilation", "", escape_cell(compilation_line(compilation)), ""]
    )
