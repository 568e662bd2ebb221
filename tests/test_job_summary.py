"""The GitHub job summary as one budget, unit by unit: a section's rows cut with a note
of how many were left out, rows shared out so a small section keeps all of its own,
nothing written when no feature added a section, and the file appended to, never
replaced.  (Whole runs writing the summary are in test_github_output.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_accel.github import JobSummary, Section, fit
from pytest_accel.reports import job_summary


def rows(count: int, width: int = 40) -> list[str]:
    return [f"| row {n:04d} | {'x' * width} |" for n in range(count)]


def test_a_section_renders_head_rows_and_tail_with_a_blank_line_after() -> None:
    section = Section(["### title", ""], ["| a |", "| b |"], ["tail"])
    assert section.render() == "### title\n\n| a |\n| b |\ntail\n\n"


def test_rows_beyond_the_allowance_are_left_out_and_counted() -> None:
    text = Section(["### t"], rows(10)).render(allowance=120)
    kept = [line for line in text.splitlines() if line.startswith("| row")]
    assert len(kept) == 2  # each row is 53 bytes with its newline
    assert "*8 more row(s) left out to keep the job summary under GitHub's size limit.*" in text


def test_a_small_section_keeps_all_its_rows_and_the_big_one_takes_the_rest() -> None:
    small = Section(["### small"], rows(3))
    big = Section(["### big"], rows(500))
    text = fit([small, big], budget=4000)
    assert len(text.encode()) <= 4000
    assert text.count("| row 000") == 3 + 10  # all of small's, the first rows of big's
    assert "left out" in text.split("### big")[1]
    assert "left out" not in text.split("### big")[0]


def test_heads_are_kept_when_no_row_fits_and_nothing_goes_over_the_budget() -> None:
    sections = [Section(["### a"], rows(5)), Section(["### b"], rows(5))]
    text = fit(sections, budget=300)
    assert "### a" in text
    assert "### b" in text
    assert "| row" not in text
    # Where not even the heads fit, nothing is written: GitHub rejects the whole summary
    # over its limit, heads included.
    first_only = fit(sections, budget=150)
    assert first_only.startswith("### a\n")
    assert "### b" not in first_only
    assert len(first_only.encode()) <= 150
    assert fit(sections, budget=10) == ""


def test_a_summary_with_no_section_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    JobSummary(str(path)).write()
    assert not path.exists()


def test_the_summary_is_appended_after_what_the_step_wrote(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("# Build\n\nearlier output\n")
    summary = JobSummary(str(path), budget=2000)
    summary.add(Section(["### pytest-accel performance"], rows(100)))
    summary.write()
    text = path.read_text()
    assert text.startswith("# Build\n\nearlier output\n### pytest-accel performance")
    assert len(text.encode()) <= 2000


def test_without_github_step_summary_there_is_no_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert job_summary(pytester.parseconfig()) is None


def test_github_step_summary_alone_is_enough_for_a_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Once written only under GITHUB_ACTIONS=true, which only docs/regressions.md said:
    a self-hosted runner or a local dry run that sets the file gets its summary."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    pytester.makepyfile("def test_ok(): pass\n")
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline").assert_outcomes(passed=1)
    result = pytester.runpytest("--perf-baseline=b.json")
    result.assert_outcomes(passed=1)
    assert "### pytest-accel performance" in (tmp_path / "summary.md").read_text()
    result.stdout.no_fnmatch_line("*no job summary written*")


def test_under_github_actions_without_the_summary_file_one_line_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makepyfile("def test_ok(): pass\n")
    result = pytester.runpytest("--perf-record=r.json")
    assert result.ret == pytest.ExitCode.OK
    lines = [line for line in result.stdout.lines if "no job summary written" in line]
    assert lines == [
        "pytest-accel: no job summary written: GITHUB_ACTIONS is true but"
        " GITHUB_STEP_SUMMARY names no file"
    ]


def test_a_summary_file_over_the_budget_gets_nothing_more_and_a_line_says_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("x" * (950 * 1024))  # over the plugin's 900 KiB budget already
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile("def test_ok(): pass\n")
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    result = pytester.runpytest("--perf-baseline=b.json")
    assert result.ret == pytest.ExitCode.OK
    assert summary.read_text() == "x" * (950 * 1024)  # not one more byte
    result.stdout.fnmatch_lines(
        [f"pytest-accel: no job summary written: {summary} holds 972800 bytes already, *"]
    )


def test_in_github_actions_the_summary_is_one_per_run_and_checked_up_front(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    config = pytester.parseconfig()
    first = job_summary(config)
    assert first is not None
    assert job_summary(config) is first
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a directory
    with pytest.raises(pytest.UsageError, match=r"GITHUB_STEP_SUMMARY: .* is a directory"):
        job_summary(pytester.parseconfig())


def test_without_a_summary_file_there_is_no_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert job_summary(pytester.parseconfig()) is None
