from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.files import InputError
from pytest_accel.github import escape_cell
from pytest_accel.perf.baseline import (
    BASELINE_SCHEMA,
    Baseline,
    EnvSamples,
    add_run,
    load_baseline,
    parse_baseline,
)
from pytest_accel.perf.output import markdown, workflow_commands
from pytest_accel.perf.regression import Comparison, Finding
from tests.fakesys import run_concurrently

SLEEPY_SUITE = """
import os
import time

def test_a():
    time.sleep(float(os.environ.get("SLEEP_A", "0.2")))

def test_b():
    pass
"""


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def build_baseline(pytester: pytest.Pytester, runs: int = 5) -> Path:
    for _ in range(runs):
        result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-update-baseline")
        result.assert_outcomes(passed=2)
    return pytester.path / "baseline.json"


@pytest.fixture
def slowed_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A five-run baseline with test_a at 0.2 s; from now on test_a takes 0.4 s."""
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    build_baseline(pytester)
    monkeypatch.setenv("SLEEP_A", "0.4")
    return pytester


@pytest.fixture
def slowed_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[pytest.RunResult, Path]:
    """Five baseline runs with test_a at 0.2 s, then a run with it at 0.4 s on CI."""
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    build_baseline(pytester)
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("SLEEP_A", "0.4")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-record=record.json")
    return result, summary


def test_a_baseline_folds_five_runs_under_the_hardware_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    data = load(build_baseline(pytester))
    assert data["schema"] == BASELINE_SCHEMA
    samples = data["envs"]["cpu/x1"]["tests"]["test_sleepy.py::test_a"]["samples"]
    assert len(samples) == 5
    assert all(0.19 < s < 1.0 for s in samples)
    assert len(data["envs"]["cpu/x1"]["modules"]["test_sleepy.py"]["samples"]) == 5


def test_a_test_that_doubles_is_one_regression_in_every_output(
    slowed_run: tuple[pytest.RunResult, Path], pytester: pytest.Pytester
) -> None:
    result, summary = slowed_run
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK  # warnings by default
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*- pytest-accel performance -*",
            "REGRESSION test test_sleepy.py::test_a: 0.4*s vs baseline 0.2*s (*x, 5 sample(s))",
            "perf: * regression(s), 0 improvement(s), 0 new, 0 missing,"
            " 2 test(s) compared under cpu/x1",
        ]
    )
    # In pytest's warnings summary, once for the test, at its file and line.
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "test_sleepy.py:4",
            "*test_sleepy.py:4: PerfRegressionWarning: test test_sleepy.py::test_a*",
        ]
    )
    # A GitHub annotation that points at the test's file and line (1-based).
    source = (pytester.path / "test_sleepy.py").read_text().splitlines()
    line = source.index("def test_a():") + 1
    assert (
        f"::warning file=test_sleepy.py,line={line},title=perf regression (test)"
        "::test test_sleepy.py::test_a: 0.4"
    ) in out
    assert "| regression | test | test\\_sleepy.py::test\\_a |" in summary.read_text()
    comparison = load(pytester.path / "record.json")["comparison"]
    tests = [r for r in comparison["regressions"] if r["kind"] == "test"]
    assert [r["id"] for r in tests] == ["test_sleepy.py::test_a"]
    assert tests[0]["samples"] == 5
    assert tests[0]["ratio"] > 1.5


def test_perf_fail_sets_exit_status_1_and_says_why(
    slowed_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester = slowed_suite
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-fail")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["perf: *regression(s)*-- failing the run (--perf-fail)"])
    assert "Traceback" not in result.stdout.str()
    monkeypatch.setenv("SLEEP_A", "0.2")
    assert pytester.runpytest("--perf-baseline=baseline.json", "--perf-fail").ret == 0


def test_the_perf_marker_can_ignore_a_test_or_loosen_its_threshold(
    slowed_suite: pytest.Pytester,
) -> None:
    pytester = slowed_suite
    for mark in ("@pytest.mark.perf(ignore=True)", "@pytest.mark.perf(threshold=3.0)"):
        pytester.makepyfile(
            test_sleepy="import pytest\n"
            + SLEEPY_SUITE.replace("def test_a", f"{mark}\ndef test_a")
        )
        pytester.runpytest("--perf-baseline=baseline.json", "--perf-record=r.json")
        regressions = load(pytester.path / "r.json")["comparison"]["regressions"]
        assert [r["id"] for r in regressions if r["kind"] == "test"] == [], mark
        # The module (and with threshold= the suite) still got slower, and says so:
        # the marker exempts the test's own timing alone.
        assert "module" in {r["kind"] for r in regressions}, mark
    pytester.makepyfile(
        test_sleepy="import pytest\n@pytest.mark.perf(threshold=0.5)\ndef test_x(): pass\n"
    )
    result = pytester.runpytest("--perf-baseline=baseline.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *test_x: @pytest.mark.perf threshold must be a number >= 1, got 0.5"]
    )


def test_a_class_whose_total_doubles_is_a_class_regression_without_any_test_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_cls="""
        import os, time

        class TestMany:
            def test_1(self): time.sleep(float(os.environ.get("EACH", "0.04")))
            def test_2(self): time.sleep(float(os.environ.get("EACH", "0.04")))
            def test_3(self): time.sleep(float(os.environ.get("EACH", "0.04")))
            def test_4(self): time.sleep(float(os.environ.get("EACH", "0.04")))
            def test_5(self): time.sleep(float(os.environ.get("EACH", "0.04")))
        """
    )
    for _ in range(5):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    monkeypatch.setenv("EACH", "0.08")  # each test stays under --perf-min-duration
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-record=r.json")
    kinds = {
        (r["kind"], r["id"]) for r in load(pytester.path / "r.json")["comparison"]["regressions"]
    }
    assert ("class", "test_cls.py::TestMany") in kinds
    assert not any(kind == "test" for kind, _ in kinds)
    result.stdout.fnmatch_lines(["REGRESSION class test_cls.py::TestMany: *"])


def test_a_baseline_for_other_hardware_compares_nothing_and_names_its_keys(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    baseline = {
        "schema": BASELINE_SCHEMA,
        "version": 1,
        "window": 20,
        "envs": {"tpu/TPU v4/x8": {"tests": {"test_sleepy.py::test_a": {"samples": [0.01] * 5}}}},
    }
    (pytester.path / "b.json").write_text(json.dumps(baseline))
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-fail", "--perf-record=r.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["perf: b.json has no timings for 'cpu/x1'; nothing compared (it has: tpu/TPU v4/x8)*"]
    )
    comparison = load(pytester.path / "r.json")["comparison"]
    assert comparison["compared"] == 0
    assert comparison["available_envs"] == ["tpu/TPU v4/x8"]
    # The same baseline, read as the TPU runner it came from:
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-env-key=tpu/TPU v4/x8")
    result.stdout.fnmatch_lines(["*1 new, 0 missing, 1 test(s) compared under tpu/TPU v4/x8*"])


def test_a_record_and_a_pytest_split_durations_map_are_accepted_as_baselines(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    pytester.runpytest("--perf-record=old.json").assert_outcomes(passed=2)
    (pytester.path / ".test_durations").write_text(
        json.dumps({"test_sleepy.py::test_a": 0.2, "test_sleepy.py::test_b": 0.001})
    )
    monkeypatch.setenv("SLEEP_A", "0.6")
    for source in ("old.json", ".test_durations"):
        result = pytester.runpytest(f"--perf-baseline={source}")
        result.stdout.fnmatch_lines(["REGRESSION test test_sleepy.py::test_a: *(*x, 1 sample(s))"])


HEAD = '{"schema": "pytest-accel/baseline", "version": 1, "envs": '
SAMPLES = HEAD + '{"k": {"tests": {"t": {"samples": '


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (HEAD + "{", "is not valid JSON"),
        ("", "is empty"),
        ("[1, 2]", "expected a JSON object, got list"),
        (
            HEAD + "[]}",
            "envs: expected an object, got list",
        ),
        (
            SAMPLES + '"fast"}}}}}',
            "envs['k'].tests['t'].samples: expected a list of seconds, got str",
        ),
        (
            SAMPLES + "[NaN]}}}}}",
            "is not valid JSON",
        ),
        (
            SAMPLES + "[-1.5]}}}}}",
            "envs['k'].tests['t'].samples[0]: -1.5 is negative",
        ),
        (
            SAMPLES + "[1e300]}}}}}",
            "envs['k'].tests['t'].samples[0]: 1e+300 seconds is implausibly large",
        ),
        (
            '{"schema": "pytest-accel/baselines", "version": 1, "envs": {}}',
            "schema 'pytest-accel/baselines' is not one this plugin reads",
        ),
        (
            '{"schema": "pytest-accel/baseline", "version": 9, "envs": {}}',
            "version 9 is newer than this pytest-accel reads (1); upgrade",
        ),
        (
            '{"schema": "pytest-accel/baseline", "version": "1", "envs": {}}',
            "version: expected an integer, got '1'",
        ),
        ('{"test_x": "slow"}', "['test_x']: expected a number of seconds, got 'slow'"),
    ],
)
def test_a_malformed_baseline_is_a_usage_error_naming_the_file_and_the_problem(
    pytester: pytest.Pytester, content: str, problem: str
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "bad.json").write_text(content)
    result = pytester.runpytest("--perf-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(lines) == 1
    assert lines[0].startswith("ERROR: --perf-baseline: bad.json: ")
    assert problem in lines[0]
    assert "Traceback" not in result.stderr.str()
    assert "passed" not in result.stdout.str()  # stopped before any test ran


def test_a_missing_baseline_is_an_error_unless_it_is_being_created(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--perf-baseline=nope.json")
    result.stderr.fnmatch_lines(["ERROR: --perf-baseline: nope.json: no such file"])
    pytester.runpytest("--perf-baseline=new/b.json", "--perf-update-baseline").assert_outcomes(
        passed=1
    )
    assert load(pytester.path / "new/b.json")["envs"]["cpu/x1"]["tests"]
    result = pytester.runpytest("--perf-update-baseline")
    result.stderr.fnmatch_lines(["ERROR: --perf-update-baseline needs --perf-baseline PATH*"])


def test_failed_tests_add_no_samples_and_the_window_keeps_the_newest(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass\ndef test_bad(): assert False\n")
    for _ in range(4):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline", "--perf-window=3")
    tests = load(pytester.path / "b.json")["envs"]["cpu/x1"]["tests"]
    assert list(tests) == [
        "test_failed_tests_add_no_samples_and_the_window_keeps_the_newest.py::test_ok"
    ]
    assert len(next(iter(tests.values()))["samples"]) == 3
    assert load(pytester.path / "b.json")["envs"]["cpu/x1"]["modules"] == {}


def test_twenty_concurrent_updates_lose_no_sample(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n@pytest.mark.parametrize('i', range(20))\ndef test_p(i): pass\n"
    )
    run_concurrently(
        pytester, ["--perf-baseline=shared.json", "--perf-update-baseline"], processes=20
    )
    tests = load(pytester.path / "shared.json")["envs"]["cpu/x1"]["tests"]
    assert len(tests) == 20
    assert {len(t["samples"]) for t in tests.values()} == {20}


def test_fold_trims_to_the_window_and_keeps_keys_apart() -> None:
    baseline = Baseline({})
    for value in range(1, 6):
        add_run(baseline, "cpu/x1", EnvSamples(tests={"t": [float(value)]}), window=3)
    add_run(baseline, "tpu/TPU v4/x8", EnvSamples(tests={"t": [9.0]}), window=3)
    assert baseline.envs["cpu/x1"].tests["t"] == [3.0, 4.0, 5.0]
    assert baseline.envs["tpu/TPU v4/x8"].tests["t"] == [9.0]


def test_loading_reports_the_path_in_every_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"b\.json: no such file"):
        load_baseline(tmp_path / "b.json")
    with pytest.raises(InputError, match=r"^x: envs: expected an object, got NoneType$"):
        parse_baseline("x", {"schema": BASELINE_SCHEMA, "version": 1})


HOSTILE_IDS = [
    "t.py::test[::warning::pwned]",
    "t.py::test[%0A::error::x]",
    "t.py::test[a\nb]",
    "t.py::test[a|b]",
    "t.py::test[`code`]",
]


def assert_one_warning_command(line: str) -> None:
    """One line, one command: the runner reads properties up to the first ``::`` after the
    command name and takes the rest as the message, so only a line break could start
    another command."""
    assert "\n" not in line
    assert "\r" not in line
    assert line.startswith("::warning ")
    properties, separator, _message = line.removeprefix("::warning ").partition("::")
    assert separator == "::"
    assert {p.split("=", 1)[0] for p in properties.split(",")} <= {"file", "line", "title"}


def test_hostile_test_ids_cannot_inject_workflow_commands_or_break_the_table() -> None:
    findings = [Finding("test", i, 0.2, 0.4, 2.0, 5) for i in HOSTILE_IDS]
    comparison = Comparison("cpu/x1", regressions=findings, compared=5)
    for line in workflow_commands(comparison, lambda _: None):
        assert_one_warning_command(line)
        assert "%0A::error" not in line  # a literal %0A stays text: it becomes %250A
    text = markdown(comparison, failing=False)
    rows = [line for line in text.splitlines() if line.startswith("| regression")]
    assert len(rows) == len(HOSTILE_IDS)
    for row in rows:
        assert row.replace("\\|", "").count("|") == 8  # seven cells, never more
    assert escape_cell("a|b\nc") == "a\\|b c"


def test_hostile_ids_end_to_end_on_github_actions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_evil="""
        import os, time, pytest
        IDS = ["::warning::pwned", "%0A::error::x", "a|b"]
        @pytest.mark.parametrize("case", IDS, ids=IDS)
        def test_evil(case):
            time.sleep(float(os.environ.get("SLEEP", "0.1")))
        """
    )
    for _ in range(3):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("SLEEP", "0.5")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--perf-baseline=b.json")
    commands = [line for line in result.stdout.lines if line.startswith("::")]
    test_commands = [line for line in commands if "title=perf regression (test)" in line]
    assert len(test_commands) == 3
    for line in test_commands:
        assert line.startswith("::warning file=test_evil.py,line=")
    for line in commands:
        assert_one_warning_command(line)
    rows = [line for line in summary.read_text().splitlines() if line.startswith("| regression")]
    assert all(row.replace("\\|", "").count("|") == 8 for row in rows)


def test_the_step_summary_stays_under_900_kib_with_a_note() -> None:
    findings = [
        Finding("test", f"t.py::test_{i}" + "x" * 200, 0.2, 0.4, 2.0, 5) for i in range(10_000)
    ]
    text = markdown(Comparison("cpu/x1", regressions=findings, compared=10_000), failing=True)
    assert len(text.encode()) < 900 * 1024
    assert "more row(s) left out to keep the job summary under GitHub's size limit" in text


def test_at_most_ten_annotations() -> None:
    findings = [Finding("test", f"t.py::test_{i}", 0.2, 0.4, 2.0, 5) for i in range(30)]
    assert len(workflow_commands(Comparison("k", regressions=findings), lambda _: None)) == 10
