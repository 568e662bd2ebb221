"""What a run says about flakiness: pure logic behind the terminal section, the
``--flaky-report`` JSON, the job summary and ``--flaky-max-pct``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.history import FLAKY, History, Share, Verdict, analysis, classify
from pytest_accel.quarantine import Entry
from pytest_accel.records import phase_outcome

REPORT_SCHEMA = "pytest-accel/flaky-report"
REPORT_VERSION = 1


@dataclass(frozen=True)
class Quarantined:
    test: str
    entry: Entry
    outcome: str
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.entry.to_json(),
            "test": self.test,
            "outcome": self.outcome,
            "message": self.message,
        }


@dataclass
class Findings:
    key: str
    platform: str
    letters: dict[str, str]  # this run: node id -> P, F or K
    flaky: list[tuple[str, list[str]]] = field(default_factory=list)  # (test, attempts)
    failed: list[str] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    candidates: list[Quarantined] = field(default_factory=list)  # passed while quarantined
    stale: list[Entry] = field(default_factory=list)
    expired: list[Entry] = field(default_factory=list)
    across_runs: list[Verdict] = field(default_factory=list)  # this run's tests, by history
    history: History | None = None
    max_pct: float | None = None

    @property
    def share(self) -> Share:
        flaky = {t for t, _ in self.flaky}
        flaky.update(v.test for v in self.across_runs if v.status == "flaky")
        return Share(self.platform, len(self.letters), len(flaky))

    @property
    def over_limit(self) -> bool:
        return self.max_pct is not None and self.share.pct > self.max_pct

    def to_json(self) -> dict[str, Any]:
        share = self.share
        return {
            "schema": REPORT_SCHEMA,
            "version": REPORT_VERSION,
            "env": {"key": self.key, "platform": self.platform},
            "run": {
                "tests": len(self.letters),
                "flaky": [{"test": t, "attempts": a} for t, a in self.flaky],
                "failed": self.failed,
                "quarantined": [q.to_json() for q in self.quarantined],
                "candidates_for_removal": [q.to_json() for q in self.candidates],
                "stale_quarantine": [e.to_json() for e in self.stale],
                "expired_quarantine": [e.to_json() for e in self.expired],
            },
            "across_runs": {
                "flaky": [v.to_json() for v in self.across_runs if v.status == "flaky"],
                "broken": [v.to_json() for v in self.across_runs if v.status == "broken"],
            },
            "history": analysis(self.history) if self.history is not None else None,
            "flaky_pct": {self.platform: round(share.pct, 4)},
            "flaky_tests": {self.platform: share.flaky},
            "max_pct": self.max_pct,
            "over_limit": self.over_limit,
        }


@dataclass
class RunOutcomes:
    """Each test's letter for this run, and the outcome of every attempt of the tests
    that did not simply pass."""

    letters: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, list[str]] = field(default_factory=dict)


def outcomes_from_stats(stats: Mapping[str, Sequence[Any]]) -> RunOutcomes:
    """From the reports by status category, as pytest's terminal reporter keeps them.

    Only the calls that passed and the reports that did not pass are read: a run of
    10,000 passing tests costs one dict entry per test, not a walk over 30,000 reports.
    """
    run = RunOutcomes()
    letters = run.letters
    for report in stats.get("passed", ()):
        letters[report.nodeid] = "P"
    reruns: dict[str, list[Any]] = {}
    for report in stats.get("rerun", ()):
        reruns.setdefault(report.nodeid, []).append(report)
    for report in stats.get("flaky", ()):
        letters[report.nodeid] = FLAKY
        run.attempts[report.nodeid] = ["passed"]
    for category in ("failed", "error", "quarantined"):
        for report in stats.get(category, ()):
            if getattr(report, "when", "collect") == "collect":
                continue  # a collection error, not a test
            if letters.get(report.nodeid) == "F":
                continue  # a second failing phase (a call failure outranks its teardown's)
            letters[report.nodeid] = "F"
            run.attempts[report.nodeid] = [phase_outcome(report.when, "failed", False)]
    for test, earlier in reruns.items():
        earlier.sort(key=lambda r: getattr(r, "start", 0.0) or 0.0)
        failed = [phase_outcome(r.when, "failed", False) for r in earlier]
        run.attempts[test] = failed + run.attempts.get(test, ["passed"])
    return run


def build_findings(
    *,
    key: str,
    platform: str,
    run: RunOutcomes,
    quarantined: Mapping[str, Entry],
    messages: Mapping[str, str],
    stale: Sequence[Entry],
    expired: Sequence[Entry],
    history: History | None,
    max_pct: float | None,
) -> Findings:
    letters = run.letters
    findings = Findings(
        key,
        platform,
        letters,
        stale=list(stale),
        expired=list(expired),
        history=history,
        max_pct=max_pct,
    )
    for test, attempts in run.attempts.items():
        letter = letters.get(test)
        entry = quarantined.get(test)
        if letter == FLAKY:
            findings.flaky.append((test, attempts))
        elif letter == "F" and entry is not None:
            findings.quarantined.append(Quarantined(test, entry, attempts[-1], messages.get(test)))
        elif letter == "F":
            findings.failed.append(test)
    for test, entry in quarantined.items():
        if letters.get(test) == "P":
            findings.candidates.append(Quarantined(test, entry, "passed"))
    env = history.envs.get(key) if history is not None else None
    if env is not None:
        for test in letters:
            series = env.tests.get(test)
            # One run is what the run section shows; without F or K there is nothing.
            if series and len(series) > 1 and ("F" in series or FLAKY in series):
                verdict = classify(test, series)
                if verdict.status != "ok":
                    findings.across_runs.append(verdict)
        findings.across_runs.sort(
            key=lambda v: (v.status != "flaky", -v.flip_rate, -v.failure_rate, v.test)
        )
    return findings


def summary_line(findings: Findings) -> str:
    share = findings.share
    line = (
        f"flaky: {share.flaky} of {share.tests} test(s) ({share.pct:.2f}%) on {findings.platform}"
    )
    if findings.max_pct is not None:
        verdict = "over the limit: exit status 1" if findings.over_limit else "within"
        line += f"; --flaky-max-pct {findings.max_pct:g}: {verdict}"
    if findings.quarantined:
        line += f"; {len(findings.quarantined)} quarantined failure(s) did not fail the run"
    return line


def terminal_lines(findings: Findings, top: int = 20) -> list[str]:
    lines = []
    for test, attempts in findings.flaky:
        lines.append(f"FLAKY {test} ({len(attempts)} attempts: {', '.join(attempts)})")
    for q in findings.quarantined:
        detail = f" - {q.message}" if q.message else ""
        lines.append(
            f"QUARANTINED {q.entry.describe() if q.entry.test == q.test else q.test}"
            f" [{q.outcome}]{detail}"
        )
    notes = [
        f"passed while quarantined, candidate for removal: {q.test}" for q in findings.candidates
    ]
    notes += [
        f"expired quarantine entry (since {e.expires}; its failures count again): {e.test}"
        for e in findings.expired
    ]
    notes += [
        f"stale quarantine entry (matches no collected test): {e.test}" for e in findings.stale
    ]
    lines += notes[:top]
    if len(notes) > top:
        lines.append(f"... and {len(notes) - top} more quarantine notes (see --flaky-report)")
    shown = findings.across_runs[:top]
    for v in shown:
        lines.append(
            f"{v.status} across runs: {v.test}: failed {v.failures} of {v.runs} run(s)"
            + (f", flaky in {v.flaky_runs}" if v.flaky_runs else "")
            + f", flip rate {v.flip_rate:.2f}"
        )
    if len(findings.across_runs) > len(shown):
        lines.append(f"... and {len(findings.across_runs) - len(shown)} more (see --flaky-report)")
    lines.append(summary_line(findings))
    return lines


def markdown(findings: Findings) -> str:
    """A short job-summary section; node ids are escaped for table cells."""
    from pytest_accel.ci_output import escape_cell

    share = findings.share
    out = [
        "### pytest-accel flaky tests",
        "",
        f"{share.flaky} of {share.tests} test(s) flaky ({share.pct:.2f}%) on"
        f" `{findings.platform}`"
        + (f", limit {findings.max_pct:g}%" if findings.max_pct is not None else ""),
        "",
    ]
    rows = [("flaky", t, f"{len(a)} attempts") for t, a in findings.flaky[:50]]
    rows += [("quarantined", q.test, q.message or q.outcome) for q in findings.quarantined[:50]]
    rows += [
        (v.status, v.test, f"failed {v.failures}/{v.runs} runs") for v in findings.across_runs[:50]
    ]
    if rows:
        out += ["| status | test | detail |", "| --- | --- | --- |"]
        out += [f"| {s} | {escape_cell(t)} | {escape_cell(d)} |" for s, t, d in rows]
        hidden = len(findings.flaky) + len(findings.quarantined) + len(findings.across_runs)
        if hidden > len(rows):
            out += ["", f"*{hidden - len(rows)} more in the --flaky-report file.*"]
    return "\n".join(out) + "\n"
