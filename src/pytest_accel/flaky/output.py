"""What a run's flaky findings look like: the terminal section and the job summary."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_accel.flaky.classify import SETTLED_FAILURE_RUNS
from pytest_accel.flaky.findings import Findings
from pytest_accel.github import MAX_SUMMARY_BYTES, Section, escape_cell, fit
from pytest_accel.text import Line, Tone, line_start, one_line


def summary_line(findings: Findings) -> str:
    share = findings.share
    in_run = len(findings.flaky)
    line = (
        f"flaky: {share.flaky} of {share.tests} test(s) ({share.pct:.2f}%) on {findings.platform}:"
        f" {in_run} in this run"
    )
    if findings.history is not None:
        runs = len(env.runs) if (env := findings.history.envs.get(findings.key)) else 0
        across = share.flaky - in_run
        line += f", {across} more across the history's {runs} run(s)"
    if findings.max_pct is not None:
        verdict = "over the limit: exit status 1" if findings.over_limit else "within"
        line += f"; --flaky-max-pct {findings.max_pct:g}: {verdict}"
    if findings.quarantined:
        line += f"; {len(findings.quarantined)} quarantined failure(s) did not fail the run"
    return line


def _history_of(findings: Findings, test: str) -> str:
    verdict = findings.context.get(test)
    if verdict is None:
        return ""
    return f"; {verdict.status} across {verdict.runs} run(s): failed {verdict.failures}" + (
        f", flaky in {verdict.flaky_runs}" if verdict.flaky_runs else ""
    )


def terminal_lines(findings: Findings, top: int = 20) -> list[Line]:
    """One line per test with something to say, and one status per test: what this run
    saw, and what the history says where it has more; each with its tone."""
    lines: list[Line] = []
    if findings.mass_failure is not None:
        executed, failed = findings.mass_failure
        lines.append(
            Line(
                Tone.ALARM,
                f"mass failure: {failed} of {executed} test(s) ({100 * failed / executed:.0f}%)"
                " failed: reruns stopped, and the history infers no flakiness from this run",
            )
        )
    for test, attempts in findings.flaky:
        runs = findings.new_tests.get(test)
        if runs:
            text = f"NEW AND FLAKY {test} (a new test, ran {runs} times: {', '.join(attempts)})"
        else:
            text = f"FLAKY {test} ({len(attempts)} attempts: {', '.join(attempts)})"
            text += _history_of(findings, test)
        lines.append(Line(Tone.CHANGE, text))
    for q in findings.quarantined:
        detail = f" - {q.message}" if q.message else ""
        if q.not_rerun:
            detail += f"; not rerun: it failed in each of its last {SETTLED_FAILURE_RUNS} runs"
        lines.append(
            Line(
                Tone.CHANGE,
                f"QUARANTINED {q.entry.describe() if q.entry.test == q.test else q.test}"
                f" [{q.outcome}]{detail}{_history_of(findings, q.test)}",
            )
        )
    notes = [
        f"quarantined, keep it: {q.test} passed this run, but is {v.status} across"
        f" {v.runs} run(s) (failed {v.failures})"
        for q, v in findings.kept
    ]
    notes += [
        f"passed while quarantined, candidate for removal: {q.test}" for q in findings.candidates
    ]
    notes += [
        f"expired quarantine entry (since {e.expires}; its failures count again): {e.test}"
        for e in findings.expired
    ]
    notes += [
        f"stale quarantine entry (matches no collected test): {e.test}" for e in findings.stale
    ]
    lines += [Line(Tone.NOTE, note) for note in notes[:top]]
    if len(notes) > top:
        lines.append(
            Line(
                Tone.NOTE, f"... and {len(notes) - top} more quarantine notes (see --flaky-report)"
            )
        )
    shown = findings.across_runs[:top]
    for v in shown:
        lines.append(
            Line(
                Tone.CHANGE,
                f"{v.status} across runs: {v.test}: failed {v.failures} of {v.runs} run(s)"
                + (f", flaky in {v.flaky_runs}" if v.flaky_runs else "")
                + f", flip rate {v.flip_rate:.2f}",
            )
        )
    if len(findings.across_runs) > len(shown):
        more = len(findings.across_runs) - len(shown)
        lines.append(Line(Tone.CHANGE, f"... and {more} more (see --flaky-report)"))
    if findings.new_tests:
        runs = max(findings.new_tests.values())
        flaky_new = sum(t in findings.new_tests for t, _ in findings.flaky)
        lines.append(
            Line(
                Tone.NOTE,
                f"new tests: {len(findings.new_tests)} ran {runs} times each"
                f" (--flaky-new-runs); {flaky_new} of them flaky",
            )
        )
    if findings.budget is not None:
        total, used, refused = findings.budget
        text = f"rerun budget: {used} of {total} rerun(s) used"
        if refused:
            text += f"; it ran out: {refused} failure(s) were not rerun"
        lines.append(Line(Tone.CHANGE if refused else Tone.NOTE, text))
    lines.append(Line(Tone.ALARM if findings.over_limit else Tone.OK, summary_line(findings)))
    return lines


def summary_section(findings: Findings) -> Section:
    """The job-summary section: the flaky share, then one row per flaky, quarantined or
    across-runs finding; node ids are escaped for table cells."""
    share = findings.share
    head = [
        "### pytest-accel flaky tests",
        "",
        f"{share.flaky} of {share.tests} test(s) flaky ({share.pct:.2f}%) on"
        f" `{escape_cell(findings.platform)}`"
        + (f", limit {findings.max_pct:g}%" if findings.max_pct is not None else ""),
        "",
    ]
    rows = [("flaky", t, f"{len(a)} attempts") for t, a in findings.flaky]
    rows += [("quarantined", q.test, q.message or q.outcome) for q in findings.quarantined]
    rows += [(v.status, v.test, f"failed {v.failures}/{v.runs} runs") for v in findings.across_runs]
    if not rows:
        return Section(head)
    head += ["| status | test | detail |", "| --- | --- | --- |"]
    return Section(head, [f"| {s} | {escape_cell(t)} | {escape_cell(d)} |" for s, t, d in rows])


def analysis_text(report: Mapping[str, object], *, markdown: bool) -> str:
    """``pytest-accel flaky``: per key, the flaky and broken tests; per platform, the
    share.  Markdown (for the job summary) stays within the job summary's budget: its
    rows are cut, with a note of how many, where the tests would not fit."""
    envs = report["envs"]
    assert isinstance(envs, dict)
    title = ["### pytest-accel flaky tests", ""]
    sections: list[Section] = []
    lines: list[str] = []
    for key, env in envs.items():
        name = escape_cell(key) if markdown else line_start(key)
        line = (
            f"{name} ({env['runs']} run(s), {env['tests']} test(s)):"
            f" {len(env['flaky'])} flaky across runs, {len(env['broken'])} broken"
        )
        if env.get("flaky_in_last_run"):
            line += f"; {len(env['flaky_in_last_run'])} flaky in the last run (passed on a rerun)"
        if env["runs"] < 10:
            line += "; across runs needs 10 runs"
        if env.get("mass_failure_runs"):
            line += f"; {env['mass_failure_runs']} mass-failure run(s) left out"
        rows = [("flaky", v) for v in env["flaky"]] + [("broken", v) for v in env["broken"]]
        if markdown:
            head = [one_line(line)]
            if rows:
                head += [
                    "",
                    "| status | test | failed | flip rate |",
                    "| --- | --- | ---: | ---: |",
                ]
            table = [
                one_line(
                    f"| {status} | {escape_cell(v['test'])} | {v['failures']} of {v['runs']}"
                    f" | {v['flip_rate']:.2f} |"
                )
                for status, v in rows
            ]
            sections.append(Section([*([] if sections else title), *head], table))
            continue
        lines.append(line)
        for status, v in rows:
            lines.append(
                f"  {status:<6} {v['test']}  failed {v['failures']} of {v['runs']} run(s)"
                + (f", flaky in {v['flaky_runs']}" if v["flaky_runs"] else "")
                + f", flip rate {v['flip_rate']:.2f}"
            )
    shares = report["flaky_pct"]
    assert isinstance(shares, dict)
    limit = report.get("max_pct")
    verdicts = []
    for platform, pct in shares.items():
        verdict = ""
        if isinstance(limit, (int, float)):
            verdict = f" (over --max-pct {limit:g})" if pct > limit else f" (within {limit:g})"
        name = escape_cell(platform) if markdown else platform
        verdicts.append(one_line(f"flaky_pct {name}: {pct:.2f}%{verdict}"))
    if markdown:
        sections.append(Section([*([] if sections else title), *verdicts]))
        return fit(sections, MAX_SUMMARY_BYTES).rstrip("\n") + "\n"
    return "\n".join(map(one_line, [*lines, *verdicts])) + "\n"
