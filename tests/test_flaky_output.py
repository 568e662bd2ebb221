"""A run's flaky findings as a CI user reads them, from hand-made findings: one sentence
per test, the quarantine notes, the budget and mass-failure lines, the summary line
with the share and the limit, and the job-summary table, each exact.  (The same output
from real runs is in test_flaky.py and test_flaky_ci.py.)"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

from pytest_accel.flaky.classify import Classification
from pytest_accel.flaky.findings import Findings, Quarantined
from pytest_accel.flaky.history import History, KeyOutcomes
from pytest_accel.flaky.output import summary_line, summary_section, terminal_lines
from pytest_accel.flaky.quarantine import Entry
from pytest_accel.text import Tone, texts


def findings(**fields: Any) -> Findings:
    letters = {f"t.py::test_{i}": "P" for i in range(40)}
    return replace(Findings("cpu/x1", "cpu", letters), **fields)


def verdict(test: str, status: str = "flaky", failures: int = 3, runs: int = 20) -> Classification:
    return Classification(test, runs, failures, 1, status, 0.25)


def lines_of(found: Findings, top: int = 20) -> list[str]:
    return texts(terminal_lines(found, top))


def test_each_line_s_tone_says_what_it_is_not_its_words() -> None:
    """Colour comes from the tone (an alarm red, a flaky test yellow, a verdict that
    holds green), as pytest's from a status's category: never from the line's text."""
    assert [line.tone for line in terminal_lines(findings(mass_failure=(60, 60)))] == [
        Tone.ALARM,
        Tone.OK,
    ]
    found = findings(flaky=[("t.py::test_1", ["failed", "passed"])])
    assert [line.tone for line in terminal_lines(found)] == [Tone.CHANGE, Tone.OK]
    over = findings(flaky=[("t.py::test_1", ["failed", "passed"])], max_pct=0.0)
    assert over.over_limit
    assert terminal_lines(over)[-1].tone is Tone.ALARM


def test_a_clean_run_says_its_share_in_one_line() -> None:
    assert lines_of(findings()) == ["flaky: 0 of 40 test(s) (0.00%) on cpu: 0 in this run"]


def test_a_test_that_passed_on_a_rerun_is_one_flaky_line_with_its_attempts() -> None:
    found = findings(flaky=[("t.py::test_1", ["failed", "passed"])])
    assert lines_of(found) == [
        "FLAKY t.py::test_1 (2 attempts: failed, passed)",
        "flaky: 1 of 40 test(s) (2.50%) on cpu: 1 in this run",
    ]


def test_what_the_history_knows_of_a_flaky_test_is_on_the_same_line() -> None:
    found = findings(
        flaky=[("t.py::test_1", ["failed", "passed"])],
        context={"t.py::test_1": verdict("t.py::test_1")},
    )
    assert lines_of(found)[0] == (
        "FLAKY t.py::test_1 (2 attempts: failed, passed); flaky across 20 run(s): failed 3,"
        " flaky in 1"
    )


def test_a_new_test_run_several_times_says_so() -> None:
    found = findings(
        flaky=[("t.py::test_new", ["failed", "passed"])], new_tests={"t.py::test_new": 3}
    )
    assert lines_of(found)[:2] == [
        "NEW AND FLAKY t.py::test_new (a new test, ran 3 times: failed, passed)",
        "new tests: 1 ran 3 times each (--flaky-new-runs); 1 of them flaky",
    ]


def test_a_quarantined_failure_names_its_entry_outcome_and_message() -> None:
    entry = Entry("t.py::test_2", reason="races on v5e", issue="#42")
    found = findings(quarantined=[Quarantined("t.py::test_2", entry, "failed", "AssertionError")])
    assert lines_of(found) == [
        "QUARANTINED t.py::test_2 (races on v5e; #42) [failed] - AssertionError",
        "flaky: 0 of 40 test(s) (0.00%) on cpu: 0 in this run; 1 quarantined failure(s)"
        " did not fail the run",
    ]


def test_a_module_entry_shows_the_test_it_covered() -> None:
    entry = Entry("t.py", reason="whole module")
    found = findings(quarantined=[Quarantined("t.py::test_3", entry, "failed")])
    assert lines_of(found)[0] == "QUARANTINED t.py::test_3 [failed]"


def test_quarantine_notes_are_cut_at_top_with_a_pointer_to_the_report() -> None:
    entry = Entry("t.py::test_4")
    stale = [Entry(f"gone.py::t{i}") for i in range(3)]
    found = findings(
        candidates=[Quarantined("t.py::test_4", entry, "passed")],
        expired=[Entry("t.py::test_5", expires=date(2026, 1, 31))],
        stale=stale,
    )
    lines = lines_of(found, top=3)
    assert lines[:4] == [
        "passed while quarantined, candidate for removal: t.py::test_4",
        "expired quarantine entry (since 2026-01-31; its failures count again): t.py::test_5",
        "stale quarantine entry (matches no collected test): gone.py::t0",
        "... and 2 more quarantine notes (see --flaky-report)",
    ]


def test_a_quarantined_test_that_passed_but_is_flaky_across_runs_is_kept() -> None:
    entry = Entry("t.py::test_6")
    kept = (Quarantined("t.py::test_6", entry, "passed"), verdict("t.py::test_6"))
    assert lines_of(findings(kept=[kept]))[0] == (
        "quarantined, keep it: t.py::test_6 passed this run, but is flaky across 20 run(s)"
        " (failed 3)"
    )


def test_across_runs_findings_and_the_rest_of_them() -> None:
    across = [verdict(f"t.py::test_{i}", failures=i + 2) for i in range(3)]
    lines = lines_of(findings(across_runs=across), top=2)
    assert lines[:3] == [
        "flaky across runs: t.py::test_0: failed 2 of 20 run(s), flaky in 1, flip rate 0.25",
        "flaky across runs: t.py::test_1: failed 3 of 20 run(s), flaky in 1, flip rate 0.25",
        "... and 1 more (see --flaky-report)",
    ]
    assert lines[-1] == "flaky: 3 of 40 test(s) (7.50%) on cpu: 0 in this run"


def test_a_mass_failure_comes_first_and_says_what_it_stopped() -> None:
    lines = lines_of(findings(mass_failure=(60, 60)))
    assert lines[0] == (
        "mass failure: 60 of 60 test(s) (100%) failed: reruns stopped, and the history"
        " infers no flakiness from this run"
    )


def test_the_rerun_budget_says_when_it_ran_out() -> None:
    assert "rerun budget: 2 of 5 rerun(s) used" in lines_of(findings(budget=(5, 2, 0)))
    assert "rerun budget: 5 of 5 rerun(s) used; it ran out: 3 failure(s) were not rerun" in (
        lines_of(findings(budget=(5, 5, 3)))
    )


def test_the_summary_line_counts_the_history_and_the_limit() -> None:
    history = History(envs={"cpu/x1": KeyOutcomes(platform="cpu", runs=[{}] * 12)})
    found = findings(
        flaky=[("t.py::test_1", ["failed", "passed"])],
        across_runs=[verdict("t.py::test_2"), verdict("t.py::test_3", status="broken")],
        history=history,
        max_pct=5.0,
    )
    assert summary_line(found) == (
        "flaky: 2 of 40 test(s) (5.00%) on cpu: 1 in this run, 1 more across the history's"
        " 12 run(s); --flaky-max-pct 5: within"
    )
    found = replace(found, max_pct=4.0)
    assert found.over_limit
    assert summary_line(found).endswith("--flaky-max-pct 4: over the limit: exit status 1")


def test_a_history_without_this_key_has_zero_runs() -> None:
    found = findings(history=History())
    assert summary_line(found).endswith("0 in this run, 0 more across the history's 0 run(s)")


def test_lines_never_break_whatever_the_test_id() -> None:
    found = findings(flaky=[("t.py::test[\n::error::x]", ["failed", "passed"])])
    assert all("\n" not in line for line in lines_of(found))


def test_the_job_summary_has_the_share_and_a_row_per_finding() -> None:
    entry = Entry("t.py::q|1")
    found = findings(
        flaky=[("t.py::test_1", ["failed", "passed"])],
        quarantined=[Quarantined("t.py::q|1", entry, "failed", "boom *bold*")],
        across_runs=[verdict("t.py::test_2", status="broken", failures=19)],
        max_pct=5.0,
    )
    section = summary_section(found)
    assert section.head[:3] == [
        "### pytest-accel flaky tests",
        "",
        "1 of 40 test(s) flaky (2.50%) on `cpu`, limit 5%",  # broken is not flaky
    ]
    assert section.rows == [
        "| flaky | t.py::test\\_1 | 2 attempts |",
        "| quarantined | t.py::q\\|1 | boom \\*bold\\* |",
        "| broken | t.py::test\\_2 | failed 19/20 runs |",
    ]


def test_nothing_to_report_has_no_table() -> None:
    assert summary_section(findings()).rows == []


def test_the_markdown_analysis_of_twenty_thousand_flaky_tests_fits_the_job_summary() -> None:
    """``flaky --format markdown`` once wrote 1.74 MB for 20,000 tests; the recipes append
    it to the job summary, which GitHub rejects over 1 MiB."""
    from pytest_accel.flaky.output import analysis_text
    from pytest_accel.github import MAX_SUMMARY_BYTES

    flaky = [
        {
            "test": f"tests/test_m{i // 100}.py::test_{i}[{'p' * 40}]",
            "failures": 3,
            "runs": 20,
            "flip_rate": 0.3,
            "flaky_runs": 1,
        }
        for i in range(20_000)
    ]
    report: dict[str, Any] = {
        "envs": {"cpu/x1": {"runs": 20, "tests": 20_000, "flaky": flaky, "broken": []}},
        "flaky_pct": {"cpu": 100.0},
        "max_pct": 5,
    }
    text = analysis_text(report, markdown=True)
    assert len(text.encode()) <= MAX_SUMMARY_BYTES
    assert text.startswith("### pytest-accel flaky tests\n\ncpu/x1 (20 run(s), 20000 test(s))")
    assert "more row(s) left out to keep the job summary under GitHub's size limit" in text
    assert text.rstrip().endswith("flaky_pct cpu: 100.00% (over --max-pct 5)")
    # Plain text is not for the job summary: every test is listed.
    assert analysis_text(report, markdown=False).count("failed 3 of 20 run(s)") == 20_000
