"""The ``--flaky-report`` file: written only here (docs/flaky.md, and its JSON Schema
``schemas/flaky-report.schema.json``)."""

from __future__ import annotations

from typing import Any

from pytest_accel.flaky.classify import analysis
from pytest_accel.flaky.findings import Findings

REPORT_SCHEMA = "pytest-accel/flaky-report"
REPORT_VERSION = 1


def report_json(findings: Findings) -> dict[str, Any]:
    """The report of one run, in the shape of docs/flaky.md."""
    share = findings.share
    return {
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "env": {"key": findings.key, "platform": findings.platform},
        "run": {
            "tests": len(findings.letters),
            "flaky": [{"test": t, "attempts": a} for t, a in findings.flaky],
            "failed": findings.failed,
            "quarantined": [q.to_json() for q in findings.quarantined],
            "candidates_for_removal": [q.to_json() for q in findings.candidates],
            "stale_quarantine": [e.to_json() for e in findings.stale],
            "expired_quarantine": [e.to_json() for e in findings.expired],
            "keep_quarantine": [
                {**q.to_json(), "across_runs": v.to_json()} for q, v in findings.kept
            ],
            "new_tests": [
                {"test": t, "runs": n, "flaky": t in dict(findings.flaky)}
                for t, n in sorted(findings.new_tests.items())
            ],
            "mass_failure": findings.mass_failure is not None,
            "rerun_budget": (
                None
                if findings.budget is None
                else dict(zip(("total", "used", "refused"), findings.budget, strict=True))
            ),
        },
        "across_runs": {
            "flaky": [v.to_json() for v in findings.across_runs if v.status == "flaky"],
            "broken": [v.to_json() for v in findings.across_runs if v.status == "broken"],
        },
        "history": analysis(findings.history) if findings.history is not None else None,
        "flaky_pct": {findings.platform: round(share.pct, 4)},
        "flaky_tests": {findings.platform: share.flaky},
        "max_pct": findings.max_pct,
        "over_limit": findings.over_limit,
    }
