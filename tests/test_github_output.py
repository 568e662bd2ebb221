"""Safe under GitHub Actions: no line the plugin prints can be made to start a workflow
command by a test id, a file name, a hardware key or a message; Markdown escapes every
user string; all sections the plugin appends to the job summary share one budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from pytest_accel.cli import main
from pytest_accel.github import MAX_SUMMARY_BYTES, JobSummary, Section, fit
from pytest_accel.text import line_start, one_line

# Forces every test that ran slower than a nanosecond to regress: a baseline of identical
# 1 ns samples (no spread, so no noise gate) and no minimum duration or delta.
REGRESS_EVERYTHING = (
    "--perf-threshold=1",
    "--perf-min-delta=0",
    "--perf-min-duration=0",
    "--perf-normalize=off",  # every test is slower: no runner speed may explain it away
)


def baseline_of(tests: list[str], seconds: float = 1e-9) -> dict[str, Any]:
    """Five runs of ``tests``, each also timed as the first of its process (the first test
    of a run is judged against such samples)."""
    run: dict[str, Any] = {
        "commit": None,
        "branch": None,
        "started": None,
        "classes": [],
        "modules": [],
    }
    return {
        "schema": "pytest-accel/baseline",
        "version": 2,
        "envs": {
            "cpu/x1": {
                "tests": tests,
                "warmup": tests,
                "classes": [],
                "modules": [],
                "runs": [{**run, "tests": [seconds] * len(tests), "warmup": [seconds] * len(tests)}]
                * 5,
            }
        },
    }


def workflow_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("::")]


def test_a_file_name_with_a_line_break_and_a_command_cannot_start_a_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "test_x\n::error file=a::pwned.py"
    (pytester.path / name).write_text("def test_a(): pass\n", encoding="utf-8")
    nodeid = f"{name}::test_a"
    (pytester.path / "baseline.json").write_text(json.dumps(baseline_of([nodeid])))
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("-q", "--perf-baseline=baseline.json", *REGRESS_EVERYTHING)
    result.assert_outcomes(passed=1, warnings=1)  # the test (it explains the suite total)
    out = result.stdout.str()
    assert "REGRESSION test test_x\\n::error file=a::pwned.py::test_a" in out
    # The workflow commands are ours: annotations whose parts are escaped.
    annotations = workflow_lines(out)
    assert all(line.startswith("::warning ") for line in annotations)
    assert any(
        line.startswith("::warning file=test_x%0A%3A%3Aerror file=a%3A%3Apwned.py,")
        for line in annotations
    )
    assert not [line for line in out.splitlines() if line.lstrip().startswith("::error")]
    assert "\\| regression \\|" not in summary.read_text()  # cells are escaped, not broken
    assert "| regression | test | test\\_x ::error file=a::pwned.py::test\\_a |" in (
        summary.read_text()
    )


def test_warning_locations_and_messages_are_one_line() -> None:
    assert line_start("::error x.py") == "./::error x.py"
    assert line_start("a\n::error") == "a\\n::error"
    assert one_line("ok \u2028 \x1b[31m\r\n") == "ok \\u2028 \\x1b[31m\\r\\n"
    assert one_line("plain ünïcödé") == "plain ünïcödé"


def record_with(tmp_path: Path, name: str, *, key: str, test: str, seconds: float) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(synthetic.record({test: seconds}, key="cpu/x1")))
    data = json.loads(path.read_text())
    data["env"]["key"] = key
    path.write_text(json.dumps(data))
    return path


def test_compare_and_flaky_output_of_hostile_ids_and_keys_stay_on_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "cpu\n::error::pwned|x"
    test = "t.py::test_a\n::error file=x::pwned"
    record = record_with(tmp_path, "r.json", key=key, test=test, seconds=0.5)
    base_record = record_with(tmp_path, "b.json", key=key, test=test, seconds=0.1)
    main(["baseline", str(base_record), "--into", str(tmp_path / "base.json")])
    capsys.readouterr()
    for args in (
        ["compare", str(record), "--baseline", str(tmp_path / "base.json")],
        ["compare", str(record), "--baseline", str(tmp_path / "base.json"), "--format=markdown"],
        ["compare", str(record), "--baseline", str(tmp_path / "b.json"), "--env-key=other"],
        ["flaky", str(record)],
        ["flaky", str(record), "--format=markdown"],
        ["merge", str(record), "-o", str(tmp_path / "m.json")],
    ):
        main(args)
        captured = capsys.readouterr()
        for stream in (captured.out, captured.err):
            assert workflow_lines(stream) == [], (args, stream)
    main(["flaky", str(record), "--format=markdown"])
    markdown = capsys.readouterr().out
    assert "cpu ::error::pwned\\|x (1 run(s)" in markdown  # the key, escaped for Markdown


# --- one budget for the whole job summary -------------------------------------------


def test_fit_keeps_every_head_and_shares_the_rows_fairly() -> None:
    small = Section(["### small", ""], [f"| s{i} |" for i in range(10)])
    big = Section(["### big", ""], ["| " + "b" * 1000 + " |" for _ in range(2000)])
    bigger = Section(["### bigger", ""], ["| " + "c" * 1000 + " |" for _ in range(3000)])
    text = fit([small, big, bigger], 900 * 1024)
    assert len(text.encode()) <= 900 * 1024
    assert "### small" in text
    assert "### big" in text
    assert "### bigger" in text
    assert text.count("| s") == 10  # the small section is whole
    big_rows = text.count("| bbb")
    bigger_rows = text.count("| ccc")
    assert abs(big_rows - bigger_rows) <= 1  # the rest is shared evenly
    assert text.count("more row(s) left out to keep the job summary") == 2


def test_a_section_that_fits_is_written_whole_without_a_note() -> None:
    section = Section(["### s", ""], ["| a |", "| b |"], ["", "tail"])
    assert fit([section], 10_000) == "### s\n\n| a |\n| b |\n\ntail\n\n"


def test_what_the_step_already_wrote_counts_against_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("x" * (600 * 1024))
    summary = JobSummary(str(path))
    summary.add(Section(["### big", ""], ["| " + "b" * 1000 + " |" for _ in range(1000)]))
    summary.write()
    assert os.path.getsize(path) <= MAX_SUMMARY_BYTES
    assert "left out to keep the job summary" in path.read_text()


HOSTILE_SUITE = """
import pytest

LONG = ["n{:03d}".format(i) + "x" * 5000 for i in range(100)]

@pytest.mark.parametrize("p", LONG, ids=LONG)
def test_slow(p):
    pass

@pytest.mark.parametrize("p", LONG, ids=LONG)
def test_q(p):
    assert False, "quarantined"
"""


def test_a_hundred_regressions_and_a_hundred_quarantined_failures_fit_in_one_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_big=HOSTILE_SUITE)
    ids = [f"test_big.py::test_slow[n{i:03d}{'x' * 5000}]" for i in range(100)]
    (pytester.path / "baseline.json").write_text(json.dumps(baseline_of(ids)))
    (pytester.path / "q.txt").write_text("test_big.py::test_q\n")
    summary = pytester.path / "summary.md"
    summary.write_text("earlier steps' output\n" * 1000)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest(
        "-q", "--perf-baseline=baseline.json", "--flaky-quarantine=q.txt", *REGRESS_EVERYTHING
    )
    assert result.ret == 0
    text = summary.read_text()
    assert len(text.encode()) <= MAX_SUMMARY_BYTES < 1024 * 1024
    assert text.startswith("earlier steps' output\n")
    assert "### pytest-accel performance" in text
    assert "### pytest-accel flaky tests" in text
    assert text.count("left out to keep the job summary") == 2
    assert len(workflow_lines(result.stdout.str())) == 10  # at most ten annotations
