"""One verdict in every output (issue 36): one suite with marks, an override, a
regression, a recompilation, a flaky test and a quarantined one, run for real; the
terminal, the warnings, ``--perf-fail``, the annotations, the job summary, the record,
the in-run HTML page, ``pytest-accel compare`` and ``pytest-accel report`` name the
same alarms, and the terminal, the page and JUnit XML count the run alike."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main
from tests.jax_runs import run_jax_suite

SUITE = """
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import pytest

JUDGED = os.environ.get("JUDGED") == "1"


@jax.jit
def double(x):
    return x * 2


def test_first():
    pass


def test_slowed():
    time.sleep(0.4 if JUDGED else 0.05)  # 8x: a regression


@pytest.mark.perf(ignore=True)
def test_ignored():
    time.sleep(0.4 if JUDGED else 0.05)  # 8x, but its mark says not to judge it


# 3x, under its own threshold. Its 0.1 s more counts in the suite total, which the
# slowed test's finding must explain (half of the shift at least), whatever a loaded
# runner adds to the JAX tests' execution beside it.
@pytest.mark.perf(threshold=50)
def test_lenient():
    time.sleep(0.15 if JUDGED else 0.05)


# Re-jitting costs execution time too (jit's own work past what JAX times as compiling:
# 50 ms more on a loaded runner, where it became a second alarm): what this test is
# about is its recompilations, a count, which its mark leaves judged.
@pytest.mark.perf(min_delta=1.0)
def test_retraces():
    for i in range(6):
        if JUDGED:  # a new function object each call: traced and compiled each time
            jax.jit(lambda x: x + 1)(jnp.ones(4)).block_until_ready()
        else:
            double(jnp.ones(4)).block_until_ready()


def test_flaky():
    mark = pathlib.Path("flaky-ran")
    if JUDGED and not mark.exists():
        mark.write_text("")
        raise AssertionError("fails once")


def test_quarantined():
    assert not JUDGED, "known bug"
"""

# A recompiling test's alarm names the function it compiled anew, where it is called.
RETRACED = "<lambda> (called in test_retraces, test_suite.py:45)"
ALARMS = {("test", "test_suite.py::test_slowed"), ("function", RETRACED)}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def alarms_of(comparison: dict[str, Any]) -> set[tuple[str, str]]:
    found = {(f["kind"], f["id"]) for f in comparison["regressions"]}
    found |= {(c["kind"], c["id"]) for c in comparison["changes"] if c["after"] > c["before"]}
    for recompiled in comparison["recompiled"]:
        culprit = recompiled.get("culprit")
        found.add(
            ("test", recompiled["id"])
            if culprit is None
            else (
                "function",
                f"{culprit['function']} (called in {culprit['caller']},"
                f" {culprit['path']}:{culprit['line']})",
            )
        )
    return found


@pytest.mark.requires("jax")
def test_every_output_names_the_same_alarms_and_counts_the_run_alike(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "q.txt").write_text("test_suite.py::test_quarantined  # known bug\n")
    for _ in range(3):  # the baseline: three runs, the rule's minimum
        run_jax_suite(
            pytester, "--perf-baseline=b.json", "--perf-update-baseline", "-p", "no:randomly"
        ).assert_outcomes(passed=7)
    monkeypatch.setenv("JUDGED", "1")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    common = ["--perf-baseline=b.json", "--flaky-reruns=1", "--flaky-quarantine=q.txt"]
    result = run_jax_suite(
        pytester,
        *common,
        "--perf-record=r.json",
        "--accel-report=in-run.html",
        "--junitxml=junit.xml",
        "-p",
        "no:randomly",
    )
    assert result.ret == pytest.ExitCode.OK  # warnings by default
    out = result.stdout.str()

    # The record: what every other output is held against.
    record = load(pytester.path / "r.json")
    # On a failure, say what was judged: it failed once on a loaded runner (issue 39).
    assert alarms_of(record["comparison"]) == ALARMS, (record["comparison"], record["tests"])

    # The terminal: one red row per alarm, none for the marked tests.
    rows = {
        (found.group(1), found.group(2))
        for line in result.stdout.lines
        if (found := re.match(r"(?:REGRESSION|RECOMPILED|CHANGED) (\w+) (.+?): ", line))
    }
    assert rows == ALARMS
    assert "test_ignored" not in out.split("pytest-accel performance")[1].split("=====")[0]
    assert "test_lenient" not in out.split("pytest-accel performance")[1].split("=====")[0]

    # pytest's warnings, and GitHub's annotations: one each per alarm.
    assert out.count("PerfRegressionWarning: ") == len(ALARMS)
    annotations = [line for line in result.stdout.lines if line.startswith("::warning ")]
    assert len(annotations) == len(ALARMS)
    named = {re.search(r"::(?:test|function) (.+?): ", a) for a in annotations}
    assert {found.group(1) for found in named if found} == {ident for _, ident in ALARMS}

    # The job summary's table.
    table = [r for r in summary.read_text().splitlines() if r.startswith("| ")]
    alarm_rows = [r for r in table if r.split("|")[1].strip() in ("regression", "recompiled")]
    unescaped = {
        r.split("|")[3].strip().replace("\\_", "_").replace("&lt;", "<").replace("&gt;", ">")
        for r in alarm_rows
    }
    assert unescaped == {ident for _, ident in ALARMS}

    # The tally: the terminal's last line, the page's summary and JUnit agree.
    last = result.stdout.lines[-1]
    said = re.search(r"=+ (.*) in [0-9.]+s", last).group(1)  # type: ignore[union-attr]
    # Its tests (pytest's line adds the warnings, which are no tests): both failing
    # tests were rerun once, the quarantined one failing again.
    tally = re.sub(r", \d+ warnings?", "", said)
    assert tally == "5 passed, 2 rerun, 1 flaky, 1 quarantined"
    page = (pytester.path / "in-run.html").read_text()
    assert tally in page
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("7", "0", "1")
    quarantined = suite.find("testcase[@name='test_quarantined']/skipped")
    assert quarantined is not None  # JUnit has no "quarantined": labelled where it differs
    assert quarantined.get("message", "").startswith("quarantined: ")

    # The in-run page and the commands on the record: the same alarms.
    capsys.readouterr()
    path, baseline = str(pytester.path / "r.json"), str(pytester.path / "b.json")
    assert main(["compare", path, "--baseline", baseline, "--format", "json"]) == 0
    assert alarms_of(json.loads(capsys.readouterr().out)) == ALARMS
    assert main(["report", path, "--baseline", baseline, "-o", str(pytester.path / "p.html")]) == 0
    offline_page = (pytester.path / "p.html").read_text()
    for html in (page, offline_page):
        for _, ident in ALARMS:
            assert escape(ident, quote=False) in html
        assert "REGRESSION test test_suite.py::test_slowed" in html
        assert "test_suite.py::test_ignored:" not in html
        assert tally in html

    # --perf-fail and a warning filter fail the run on the same alarms, and say so.
    (pytester.path / "flaky-ran").unlink()
    failing = run_jax_suite(pytester, *common, "--perf-fail", "-p", "no:randomly")
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    failing.stdout.fnmatch_lines(
        [
            "pytest-accel: exit status 1: 1 regression(s) and 1 recompiling function(s) with"
            " --perf-fail"
        ]
    )
    (pytester.path / "flaky-ran").unlink()
    escalated = run_jax_suite(
        pytester, *common, "-W", "error::pytest_accel.PerfRegressionWarning", "-p", "no:randomly"
    )
    assert escalated.ret == pytest.ExitCode.TESTS_FAILED
    escalated.stdout.fnmatch_lines(
        ["pytest-accel: exit status 1: 2 PerfRegressionWarning(s) turned into errors by -W*"]
    )
