"""A run against its baseline, as a CI user meets it: one cause one alarm, the runner-speed
correction, warnings through pytest's machinery, shards, warm-up, new slow tests, and
changes over runs (found, failing the run, accepted).  Each test is one of the problems
issue 13 lists, reproduced end to end."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from pytest_accel.cli import main
from pytest_accel.perf.analysis.comparison import compare
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory, add_run
from pytest_accel.perf.formats.record import check_record, timings
from pytest_accel.perf.model.findings import Comparison, TimingVerdict
from pytest_accel.perf.model.timings import RunTimings
from pytest_accel.perf.offline import baseline_json
from pytest_accel.perf.output import scope_notes, summary_line, terminal_rows

WOBBLE = (1.00, 1.03, 0.98, 1.01, 0.97, 1.02, 0.99, 1.03, 0.97, 1.00)
HOUR = 3600.0

SUITE = """
import os
import time


def test_first():
    pass


def test_a():
    pass  # takes SLEEP_A seconds (STEADY)


def test_b():
    pass  # takes SLEEP_B seconds (STEADY)
"""

# For a conftest that gives the calls their times: no full garbage collection runs in a
# call.  Its pause is left out of the call's time (perf.pauses), so it would be taken
# from the time given: in a test process that had run the store's tests before, a
# class given 0.42 s read 0.057 s.  Held off over each test's protocol, not its call
# alone: the collections a call puts off run at the first allocation after the collector
# is let go, and a wrapper of the call lets it go inside the call's window (a test given
# 0.15 s read 0 after a JAX compilation; docs/benchmarks.md).
NO_FULL_COLLECTION_IN_TESTS = """
import gc

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        if enabled:
            gc.enable()
"""
# The calls of SUITE take what SLEEP_A and SLEEP_B say, whatever the runner's load, and
# wait for no CPU: these tests judge the rule, not the clock (a 0.2 s sleep took 0.39 s
# at a load of 8, a regression where none was meant).
STEADY = (
    NO_FULL_COLLECTION_IN_TESTS
    + """
import os

CALLS = {"test_a": ("SLEEP_A", "0.2"), "test_b": ("SLEEP_B", "0.15")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when != "call":
        return report
    given = CALLS.get(item.name)
    if given is not None and item.path.name == "test_mod.py":
        report.duration = float(os.environ.get(*given))
    elif item.cls is not None and item.cls.__name__ == "TestMany":  # each EACH seconds
        report.duration = float(os.environ.get("EACH", "0.015"))
    return report
"""
)


def make_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str = SUITE
) -> None:
    """``source`` as ``test_mod.py``, its calls' times given (``STEADY``), no CPU wait."""
    pytester.makepyfile(test_mod=source)
    steady(pytester, monkeypatch)


def steady(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The calls' times given (``STEADY``), and no CPU wait read."""
    pytester.makeconftest(STEADY)
    stat = pytester.path / "sysroot" / "proc" / "thread-self" / "schedstat"
    stat.parent.mkdir(parents=True)
    stat.write_text("0 0 0")
    monkeypatch.setenv("PYTEST_ACCEL_SYSROOT", str(stat.parents[2]))


IDS = ("test_mod.py::test_first", "test_mod.py::test_a", "test_mod.py::test_b")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def run_of(
    calls: Mapping[str, float], index: int = 0, key: str = "cpu/x1", **kw: Any
) -> RunTimings:
    """Run ``index`` of a history: commit ``c<index>``, an hour after the one before."""
    data = synthetic.record(calls, key=key, started=synthetic.STARTED + index * HOUR, **kw)
    data["run"]["commit"] = f"c{index}"
    return timings(check_record("r.json", data))


def history(runs: Sequence[Mapping[str, float]], **kw: Any) -> EnvHistory:
    """A baseline's runs, each value wobbling by up to 3% from run to run."""
    env = EnvHistory()
    for index, calls in enumerate(runs):
        wobble = WOBBLE[index % len(WOBBLE)]
        add_run(env, run_of({t: s * wobble for t, s in calls.items()}, index, **kw), 50)
    return env


def write_baseline(path: Path, env: EnvHistory, key: str = "cpu/x1") -> Path:
    path.write_text(json.dumps(baseline_json(Baseline({key: env}, window=50))))
    return path


def suite_baseline(pytester: pytest.Pytester, runs: int = 10) -> Path:
    """The baseline SUITE builds when nothing changes: test_first pays the warm-up."""
    calls = dict(zip(IDS, (0.0002, 0.2, 0.15), strict=True))
    env = history([calls] * runs, warmup=True)
    return write_baseline(pytester.path / "baseline.json", env)


def warnings_summary(result: pytest.RunResult) -> str:
    out = result.stdout.str()
    start = out.find("warnings summary")
    return "" if start < 0 else out[start : out.find("-- Docs:", start)]


# --- one cause, one alarm -------------------------------------------------------------


def test_one_slowed_test_is_one_alarm_in_every_output(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("SLEEP_A", "0.45")
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-record=r.json")
    result.assert_outcomes(passed=3)
    assert result.ret == 0  # warnings by default
    result.stdout.fnmatch_lines(
        [
            "*- pytest-accel performance -*",
            "REGRESSION test test_mod.py::test_a: 0.4*s vs baseline 0.2*s (2.*x, 10 sample(s))",
            "perf: 1 regression(s), 0 change(s), 0 improvement(s), 0 new, 0 missing,"
            " 3 test(s) compared under cpu/x1",
        ]
    )
    out = result.stdout.str()
    assert out.count("REGRESSION") == 1  # not the module, not the suite total
    assert warnings_summary(result).count("PerfRegressionWarning") == 1
    line = SUITE.splitlines().index("def test_a():")
    assert out.count("::warning ") == 1
    assert f"::warning file=test_mod.py,line={line},title=perf regression (test)::" in out
    rows = [r for r in summary.read_text().splitlines() if r.startswith("| regression")]
    assert len(rows) == 1
    assert "test\\_mod.py::test\\_a" in rows[0]
    comparison = load(pytester.path / "r.json")["comparison"]
    assert [(f["kind"], f["id"]) for f in comparison["regressions"]] == [("test", IDS[1])]


def test_a_class_slowed_as_a_whole_is_one_alarm_at_the_test_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test stays under --perf-min-duration (0.1 s): its time is given, as a 35 ms
    sleep's is not (one took 0.1 s at a load of 8, a test-level finding).  Fewer than 20
    tests: no runner-speed estimate explains the class away."""
    tests = 12
    source = "def test_first():\n    pass\n\nclass TestMany:\n" + "".join(
        f"    def test_{i}(self): pass  # takes EACH seconds (STEADY)\n"
        for i in range(1, tests + 1)
    )
    pytester.makepyfile(test_cls=source)
    steady(pytester, monkeypatch)
    ids = ["test_cls.py::test_first"]
    ids += [f"test_cls.py::TestMany::test_{i}" for i in range(1, tests + 1)]
    groups = {i: ("test_cls.py::TestMany" if "Many" in i else None, "test_cls.py") for i in ids}
    calls = {i: 0.015 if "Many" in i else 0.0002 for i in ids}
    write_baseline(pytester.path / "b.json", history([calls] * 8, groups=groups, warmup=True))
    monkeypatch.setenv("EACH", "0.035")  # the class: 0.18 s -> 0.42 s; each test 35 ms
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-record=r.json")
    regressions = load(pytester.path / "r.json")["comparison"]["regressions"]
    assert [(r["kind"], r["id"]) for r in regressions] == [("class", "test_cls.py::TestMany")]
    result.stdout.fnmatch_lines(["REGRESSION class test_cls.py::TestMany: *"])
    # Located at the class's first test, in pytest's warnings and on GitHub alike.
    line = source.splitlines().index("class TestMany:") + 2  # its first test's line
    assert f"::warning file=test_cls.py,line={line},title=perf regression (class)::" in (
        result.stdout.str()
    )
    summary = warnings_summary(result)
    assert f"test_cls.py:{line}: PerfRegressionWarning: class test_cls.py::TestMany" in summary
    assert "b.json" not in summary


def test_a_slower_suite_without_a_culprit_is_one_suite_alarm_at_the_slowest_module(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    # Both tests 1.3x, each by less than the smallest change worth acting on: the
    # suite total, by more, and far beyond the noise of the baseline runs' totals.
    monkeypatch.setenv("SLEEP_A", "0.27")
    monkeypatch.setenv("SLEEP_B", "0.2")
    result = pytester.runpytest(
        "--perf-baseline=baseline.json", "--perf-record=r.json", "--perf-min-delta=0.1"
    )
    regressions = load(pytester.path / "r.json")["comparison"]["regressions"]
    assert [(r["kind"], r["id"]) for r in regressions] == [("session", "suite total")]
    assert "test_mod.py:1: PerfRegressionWarning: session suite total" in warnings_summary(result)


# --- the warnings machinery -------------------------------------------------------------


@pytest.mark.parametrize(
    "silence",
    [
        ["-W", "ignore::pytest_accel.PerfRegressionWarning"],
        ["-W", "ignore::pytest_accel.regression.PerfRegressionWarning"],  # 0.1's name
        ["-W", "ignore"],
        ["-p", "no:warnings"],
        ["-o", "filterwarnings=ignore::pytest_accel.PerfRegressionWarning"],
    ],
)
def test_warning_filters_silence_perf_warnings_but_not_the_perf_section(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, silence: list[str]
) -> None:
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    monkeypatch.setenv("SLEEP_A", "0.45")
    result = pytester.runpytest("--perf-baseline=baseline.json", *silence)
    assert result.ret == 0
    assert "PerfRegressionWarning" not in result.stdout.str()
    result.stdout.fnmatch_lines(["REGRESSION test test_mod.py::test_a: *"])


def test_warnings_as_errors_fail_the_run_without_a_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    monkeypatch.setenv("SLEEP_A", "0.45")
    result = pytester.runpytest(
        "--perf-baseline=baseline.json", "-W", "error::pytest_accel.PerfRegressionWarning"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "pytest-accel: exit status 1: 1 PerfRegressionWarning(s) turned into errors by"
            " -W 'error::pytest_accel.PerfRegressionWarning'"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_named_filter_in_the_ini_fails_the_run_and_the_exit_line_names_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error::pytest_accel.PerfRegressionWarning\n")
    monkeypatch.setenv("SLEEP_A", "0.45")
    result = pytester.runpytest("--perf-baseline=baseline.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "pytest-accel: exit status 1: 1 PerfRegressionWarning(s) turned into errors by"
            " filterwarnings (tox.ini) 'error::pytest_accel.PerfRegressionWarning'"
        ]
    )


def test_a_blanket_error_filter_shows_timing_alarms_without_failing_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's ``filterwarnings = error`` is strictness about its own code: the
    alarm is a warning in the summary, the run passes, and a note says how to fail on
    timings."""
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    monkeypatch.setenv("SLEEP_A", "0.45")
    result = pytester.runpytest("--perf-baseline=baseline.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*PerfRegressionWarning: test test_mod.py::test_a: *",
            "REGRESSION test test_mod.py::test_a: *",
            "warnings: filterwarnings (tox.ini) 'error' does not fail a run on timings: the"
            " alarms are shown as warnings; fail on them with --perf-fail, or name the class*",
        ]
    )
    assert "exit status 1" not in result.stdout.str()


# --- the runner's speed -------------------------------------------------------------------


def many(count: int, seconds: float = 0.5) -> dict[str, float]:
    return {f"t_{i:03d}.py::test": seconds * (1 + (i % 7) / 10) for i in range(count)}


def compared(now: Mapping[str, float], then: Mapping[str, float], **kw: Any) -> Comparison:
    return compare(run_of(now, 99), history([then] * 10), Rule(), **kw)


def test_tests_that_got_faster_on_their_own_never_make_the_others_regress() -> None:
    # A warm compile cache: 40% of the tests take 0.6x, the rest did not change.
    then = many(50)
    now = {t: s * (0.6 if i < 20 else 1.0) for i, (t, s) in enumerate(then.items())}
    result = compared(now, then)
    assert result.timing.regressions == []
    assert len([f for f in result.timing.improvements if f.kind == "test"]) == 20


def test_on_a_slower_runner_only_the_truly_slower_test_regresses_with_both_ratios() -> None:
    then = many(50)
    now = {t: s * 1.3 for t, s in then.items()}
    now["t_007.py::test"] *= 2.0
    result = compared(now, then)
    assert result.timing.speed == pytest.approx(1.3, rel=0.03)
    tests = [f for f in result.timing.regressions if f.kind == "test"]
    assert [f.id for f in tests] == ["t_007.py::test"]
    assert tests[0].ratio == pytest.approx(2.6, rel=0.05)
    assert tests[0].corrected == pytest.approx(2.0, rel=0.05)
    # The runner is not the code: the summary line says it, no total regresses for it.
    assert [f.kind for f in result.timing.regressions] == ["test"]
    assert "this run was 1.30x the baseline overall" in summary_line(result, failing=False)


def test_a_uniformly_slower_run_on_a_busy_runner_is_the_runner_not_a_regression() -> None:
    """Every test 1.3-2x slower alike, against 3-, 5- and 8-run baselines: no test, no
    module and no suite total regresses; the speed is reported."""
    ids = [f"m{i % 6}.py::test_{i:02d}" for i in range(60)]
    groups = {t: (None, t.split("::")[0]) for t in ids}
    then = {t: 0.2 + (i % 5) * 0.05 for i, t in enumerate(ids)}
    for factor in (1.3, 2.0):
        now = {t: s * factor for t, s in then.items()}
        for runs in (3, 5, 8):
            env = history([then] * runs, groups=groups)
            result = compare(run_of(now, 99, groups=groups), env, Rule())
            assert result.timing.regressions == [], (factor, runs)
            assert result.timing.speed == pytest.approx(factor, rel=0.03)


def test_a_total_slower_as_measured_is_no_improvement_for_the_runners_speed() -> None:
    """The speed explains a total's finding away and never makes one, as a test's: 60
    tests 1.6x slower on a busy runner and one heavy test as it was make a total 1.3x as
    measured, 0.8x for the runner's speed (jmp's suite read "improved" so)."""
    ids = [f"m{i % 6}.py::test_{i:02d}" for i in range(60)]
    groups = {t: (None, t.split("::")[0]) for t in [*ids, "heavy.py::test"]}
    then = {**{t: 0.2 + (i % 5) * 0.05 for i, t in enumerate(ids)}, "heavy.py::test": 20.0}
    now = {t: s * 1.6 for t, s in then.items()} | {"heavy.py::test": 20.0}
    result = compare(run_of(now, 99, groups=groups), history([then] * 8, groups=groups), Rule())
    assert result.timing.speed == pytest.approx(1.6, rel=0.03)
    assert result.timing.suite_now / result.timing.suite_then > 1.2
    assert result.timing.improvements == []
    assert result.timing.regressions == []


def test_a_run_in_another_order_than_the_baseline_is_compared_the_same() -> None:
    # The baseline's order takes a shortcut (no lookup per test); any other, the lookups.
    then = many(50)
    now = {t: s * 1.3 for t, s in then.items()}
    now["t_007.py::test"] *= 2.0
    now["t_020.py::test"] *= 0.3
    in_order = compared(now, then)
    reordered = compared(dict(reversed(list(now.items()))), then)
    assert reordered.to_json() == in_order.to_json()
    assert [f.id for f in in_order.timing.regressions if f.kind == "test"] == ["t_007.py::test"]
    assert [f.id for f in in_order.timing.improvements if f.kind == "test"] == ["t_020.py::test"]


def test_compare_after_merging_shards_warm_from_a_cache_passes_with_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    then = many(30, 0.2)
    write_baseline(tmp_path / "b.json", history([then] * 10))
    faster = {t: s * (0.68 if i % 3 else 1.0) for i, (t, s) in enumerate(then.items())}
    shards = [dict(list(faster.items())[i::2]) for i in range(2)]
    for index, calls in enumerate(shards):
        record = synthetic.record(calls, shard=f"{index + 1}/2")
        (tmp_path / f"s{index}.json").write_text(json.dumps(record))
    argv = ["merge", "-o", str(tmp_path / "m.json"), str(tmp_path / "s0.json")]
    assert main([*argv, str(tmp_path / "s1.json")]) == 0
    code = main(
        ["compare", str(tmp_path / "m.json"), "--baseline", str(tmp_path / "b.json"), "--fail"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "REGRESSION" not in out
    assert "perf: 0 regression(s)" in out


# --- shards, warm-up, new tests -------------------------------------------------------------


def test_a_shard_compares_only_what_it_ran_and_no_partial_group(
    pytester: pytest.Pytester,
) -> None:
    source = "import time\n" + "".join(f"def test_{i}():\n    time.sleep(0.02)\n" for i in range(6))
    pytester.makepyfile(test_mod=source, test_other=source)
    ids = [f"{m}.py::test_{i}" for m in ("test_mod", "test_other") for i in range(6)]
    env = history([dict.fromkeys(ids, 0.02)] * 6)
    write_baseline(pytester.path / "b.json", env)
    for shard in ("1/2", "2/2"):
        result = pytester.runpytest(
            "--perf-baseline=b.json", f"--accel-shard={shard}", "--perf-record=r.json"
        )
        comparison = load(pytester.path / "r.json")["comparison"]
        assert comparison["missing"] == [], shard
        assert comparison["regressions"] == comparison["improvements"] == [], shard
        ran = result.parseoutcomes()["passed"]
        judged = ran - len(comparison["warmup"])  # what ran first paid the warm-up
        assert 0 < judged < ran < 12
        result.stdout.fnmatch_lines([f"perf: *, 0 missing, {judged} test(s) compared under *"])
    # A removed test is missing when its module ran whole.
    pytester.makepyfile(test_other=source.replace("def test_5", "def _gone"))
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-record=r.json")
    assert load(pytester.path / "r.json")["comparison"]["missing"] == ["test_other.py::test_5"]


@pytest.mark.processes
def test_the_first_test_of_each_process_is_judged_apart_as_with_jax_compilation(
    pytester: pytest.Pytester,
) -> None:
    # Whichever test compiles first pays for it: the cost moves with the order.
    pytester.makeconftest(
        """
import time, pytest
compiled = []

@pytest.fixture(autouse=True)
def jit():
    if not compiled:
        time.sleep(0.25)
        compiled.append(True)
"""
    )
    pytester.makepyfile(test_mod="".join(f"def test_{i}():\n    pass\n" for i in range(8)))
    # One time basis for every run: JAX, imported in this process (tests/jax_runs.py) and
    # not in xdist's workers, would otherwise judge those runs on execution time and these
    # on wall time, which a comparison keeps apart.
    wall = ["--perf-baseline=b.json", "--perf-time=wall"]
    for _ in range(3):  # serial runs: test_0 pays every time
        pytester.runpytest(*wall, "--perf-update-baseline").assert_outcomes(passed=8)
    orders = [["--accel-shard=1/2"], ["--accel-shard=2/2"]]
    if importlib.util.find_spec("xdist"):  # the release matrix runs without it too
        orders.append(["-p", "xdist", "-n", "2"])
    for order in (*orders, ["-k", "not test_0"]):
        result = pytester.runpytest(*wall, "--perf-record=r.json", *order)
        record = load(pytester.path / "r.json")
        comparison = record["comparison"]
        assert comparison["regressions"] == [], (order, comparison["regressions"])
        assert comparison["improvements"] == [], order
        if record["tests"]["warmup"] == ["test_mod.py::test_0"]:
            continue  # the shard that holds test_0 runs it first, as the baseline did
        assert comparison["warmup"], order
        result.stdout.fnmatch_lines(["not judged: * ran first in their process and paid*"])


def test_a_new_slow_test_is_named_and_a_quick_one_only_counted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch, SUITE + "\ndef test_new():\n    time.sleep(0.3)\n")
    suite_baseline(pytester)
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-new-slow=0.25")
    result.stdout.fnmatch_lines(
        [
            "NEW SLOW test test_mod.py::test_new: 0.3*s (no baseline yet)",
            "perf: 0 regression(s), 0 change(s), 0 improvement(s), 1 new (1 slow), 0 missing*",
        ]
    )
    result = pytester.runpytest("--perf-baseline=baseline.json")  # default: 1.0 s
    assert "NEW SLOW" not in result.stdout.str()
    result.stdout.fnmatch_lines(["perf: *, 1 new, 0 missing*"])


# --- changes over runs ----------------------------------------------------------------------


def changed_suite(pytester: pytest.Pytester, runs_after: int = 2) -> Path:
    """A baseline where test_a took 0.1 s for 12 runs and 0.25 s in the last ones."""
    before = dict(zip(IDS, (0.0002, 0.1, 0.15), strict=True))
    after = {**before, IDS[1]: 0.25}
    env = history([before] * 12 + [after] * runs_after, warmup=True)
    return write_baseline(pytester.path / "baseline.json", env)


def test_a_step_over_runs_is_one_change_since_its_first_commit_and_fails_with_perf_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_suite(pytester, monkeypatch)
    changed_suite(pytester)
    monkeypatch.setenv("SLEEP_A", "0.25")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest(
        "--perf-baseline=baseline.json", "--perf-record=r.json", "--perf-fail"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "CHANGED test test_mod.py::test_a: 0.1s -> 0.2*s (2.*x) since c12, 3 runs",
            "perf: 0 regression(s), 1 change(s), *-- failing the run (--perf-fail)",
            "::warning file=test_mod.py,line=*,title=perf change (test)::test test_mod.py::test_a*",
        ]
    )
    assert "REGRESSION" not in result.stdout.str()  # the change says more
    assert "PerfRegressionWarning: test test_mod.py::test_a: 0.1s -> 0.2" in (
        warnings_summary(result)
    )
    rows = [r for r in summary.read_text().splitlines() if r.startswith("| change |")]
    assert len(rows) == 1
    assert "| test | test\\_mod.py::test\\_a |" in rows[0]
    assert rows[0].endswith("| since c12, 3 runs |")
    (change,) = load(pytester.path / "r.json")["comparison"]["changes"]
    assert change["since"]["commit"] == "c12"
    assert (change["kind"], change["id"], change["runs"]) == ("test", IDS[1], 3)
    assert change["before"] == pytest.approx(0.1, rel=0.05)
    assert change["after"] == pytest.approx(0.25, rel=0.05)


def test_compare_json_lists_changes_and_an_accepted_change_stops_alarming(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {"t.py::a": 0.1, "t.py::b": 0.3}
    runs = [before] * 12 + [{**before, "t.py::a": 0.25}] * 3
    env = history(runs)
    baseline = write_baseline(tmp_path / "b.json", env)
    record = tmp_path / "now.json"
    record.write_text(json.dumps(synthetic.record({"t.py::a": 0.25, "t.py::b": 0.3})))
    compare_argv = ["compare", str(record), "--baseline", str(baseline), "--format", "json"]
    assert main([*compare_argv, "--fail"]) == 1
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [(c["kind"], c["id"], c["runs"]) for c in changes] == [("test", "t.py::a", 4)]
    assert set(changes[0]) == {"kind", "id", "before", "after", "ratio", "runs", "since"}
    assert set(changes[0]["since"]) == {"commit", "branch", "started"}

    assert main(["baseline", "--into", str(baseline), "--accept", "t.py::a"]) == 0
    out = capsys.readouterr().out
    assert fnmatch(out, "accepted test t.py::a: 0.1s -> 0.2*s (2.*x) since c12, 3 runs\n")
    assert main([*compare_argv, "--fail"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []
    assert load(baseline)["envs"]["cpu/x1"]["accepted"][0]["id"] == "t.py::a"
    # Nothing more to accept: said, and an unknown id is an error.
    assert main(["baseline", "--into", str(baseline), "--accept", "all"]) == 0
    assert "no change to accept" in capsys.readouterr().out
    assert main(["baseline", "--into", str(baseline), "--accept", "t.py::b"]) == 2
    assert "no change to accept for t.py::b" in capsys.readouterr().err
    # A key the baseline does not hold: named, with the keys it does.
    wrong = ["baseline", "--into", str(baseline), "--accept", "all", "--accel-key", "tpu/x4"]
    assert main(wrong) == 2
    assert "has no runs for 'tpu/x4' (it has: cpu/x1)" in capsys.readouterr().err


def sped_up(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, runs_since: int) -> None:
    """SUITE and a baseline where test_a went from 0.4 s to 0.2 s ``runs_since`` runs ago
    (c12 the first at 0.2 s), and nobody accepted it."""
    make_suite(pytester, monkeypatch)
    before = dict(zip(IDS, (0.0002, 0.4, 0.15), strict=True))
    after = {**before, IDS[1]: 0.2}
    runs = [before] * 12 + [after] * runs_since
    write_baseline(pytester.path / "baseline.json", history(runs, warmup=True))


def test_a_test_that_became_faster_is_a_change_that_does_not_fail_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    sped_up(pytester, monkeypatch, runs_since=2)  # this run is the third at the new level
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-fail")
    assert result.ret == 0
    # The test sleeps for real, and the sleep overshoots on a loaded machine: this run's
    # 0.2 s moves the levels a little (the step's spread takes it in), never the change.
    changed = re.compile(
        r"CHANGED test test_mod\.py::test_a: ([0-9.]+)s -> ([0-9.]+)s \(([0-9.]+)x\)"
        r" since c12, 3 runs"
    )
    found = [m for m in map(changed.fullmatch, result.stdout.lines) if m is not None]
    assert len(found) == 1, result.stdout.str()
    level_before, level_after, ratio = map(float, found[0].groups())
    assert level_before == pytest.approx(0.4, rel=0.03)
    assert level_after < 0.3
    assert ratio < 0.75
    assert "PerfRegressionWarning" not in result.stdout.str()


def test_a_speed_up_is_reported_once_and_a_slowdown_from_its_level_is_a_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    sped_up(pytester, monkeypatch, runs_since=5)  # found by an earlier run
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-fail")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["perf: 0 regression(s), 0 change(s), 0 improvement(s)*"])
    # Back to 0.4 s: twice the level since the speed-up, though the median of all the
    # baseline's runs is 0.4 s.
    monkeypatch.setenv("SLEEP_A", "0.4")
    result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-fail")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "REGRESSION test test_mod.py::test_a: 0.4*s vs baseline 0.*s (*x, 5 sample(s))",
            "perf: 1 regression(s), *",
        ]
    )


def test_a_record_folded_into_the_baseline_already_is_not_counted_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dict(zip(IDS, (0.0002, 0.1, 0.15), strict=True))
    after = {**before, IDS[1]: 0.3}
    records = []
    for index, calls in enumerate([before] * 10 + [after] * 4):
        wobble = WOBBLE[index % len(WOBBLE)]
        data = synthetic.record(
            {t: s * wobble for t, s in calls.items()},
            started=synthetic.STARTED + index * HOUR,
            warmup=True,
        )
        data["run"]["commit"] = f"c{index}"
        records.append(tmp_path / f"r{index}.json")
        records[-1].write_text(json.dumps(data))
    baseline = tmp_path / "b.json"
    assert main(["baseline", "--into", str(baseline), *map(str, records)]) == 0
    capsys.readouterr()
    assert main(["compare", str(records[-1]), "--baseline", str(baseline)]) == 0
    out = capsys.readouterr().out
    assert "CHANGED test test_mod.py::test_a: 0.1" in out
    assert "since c10, 4 runs" in out
    # Folding it again adds nothing, and says so.
    assert main(["baseline", "--into", str(baseline), str(records[-1])]) == 0
    captured = capsys.readouterr()
    assert f"{records[-1]}: not added: {baseline} holds this run already" in captured.err
    assert len(load(baseline)["envs"]["cpu/x1"]["runs"]) == 14


# --- full garbage collections ---------------------------------------------------------------

SERIAL_AND_UNDER_XDIST = pytest.mark.parametrize(
    "xdist",
    [
        pytest.param([], id="serial"),
        pytest.param(["-p", "xdist", "-n", "1"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)

GC_SUITE = """
import gc

HEAP = [(i,) for i in range(500_000)]  # a big heap makes a full collection slow


def test_first():
    pass


def test_collects():
    for _ in range(6):
        gc.collect()
"""


@SERIAL_AND_UNDER_XDIST
@pytest.mark.processes
def test_full_garbage_collections_are_recorded_and_left_out_of_the_timing_judged(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    pytester.makepyfile(test_gc=GC_SUITE)
    calls = {"test_gc.py::test_first": 0.0002, "test_gc.py::test_collects": 0.002}
    write_baseline(pytester.path / "b.json", history([calls] * 10, warmup=True))
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-record=r.json", *xdist)
    result.assert_outcomes(passed=2)
    tests = load(pytester.path / "r.json")["tests"]
    row = tests["id"].index("test_gc.py::test_collects")
    assert tests["gc"][row] > 0.05  # four full collections of a million objects
    assert tests["call"][row] >= tests["gc"][row]
    assert tests["call"][row] - tests["gc"][row] < 0.05
    comparison = load(pytester.path / "r.json")["comparison"]
    assert comparison["regressions"] == []
    assert "REGRESSION" not in result.stdout.str()


GC_ELSEWHERE_SUITE = """
import gc
import threading

HEAP = [(i,) for i in range(500_000)]


def test_first():
    pass


def test_waits_while_another_thread_collects():
    collected = threading.Event()

    def collect():
        for _ in range(3):
            gc.collect()
        collected.set()

    threading.Thread(target=collect).start()
    assert collected.wait(timeout=120)


def test_collects():
    gc.collect()
"""


@SERIAL_AND_UNDER_XDIST
@pytest.mark.processes
def test_another_threads_full_collection_is_left_in_the_test_it_did_not_hold_up(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    """A test waiting (a sleep, a device, here an event) while another thread collects
    was not held up by it: taking it out had made a test that slept 0.5 s read 0.29 s,
    and on a busy runner an unchanged test read as 20x faster."""
    pytester.makepyfile(test_gc=GC_ELSEWHERE_SUITE)
    result = pytester.runpytest("--perf-record=r.json", *xdist)
    result.assert_outcomes(passed=3)
    tests = load(pytester.path / "r.json")["tests"]
    gc_of = dict(zip(tests["id"], tests["gc"], strict=True))
    assert gc_of["test_gc.py::test_waits_while_another_thread_collects"] == 0.0
    assert gc_of["test_gc.py::test_collects"] > 0.0  # its own thread's: taken out


GC_FIXTURE_SUITE = """
import gc

import pytest

HEAP = [(i,) for i in range(500_000)]


@pytest.fixture
def collects():
    for _ in range(3):
        gc.collect()
    yield
    for _ in range(3):
        gc.collect()


def test_first():
    pass


def test_with_fixture(collects):
    pass
"""


@SERIAL_AND_UNDER_XDIST
@pytest.mark.processes
def test_full_collections_in_a_setup_or_teardown_leave_that_phase_and_its_module_total(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    """On a 10,000-test run the full collections of a teardown made a module of
    0.014 s read 0.13 s, a regression of nothing the tests did."""
    pytester.makepyfile(test_gc=GC_FIXTURE_SUITE)
    calls = {"test_gc.py::test_first": 0.0002, "test_gc.py::test_with_fixture": 0.0002}
    write_baseline(
        pytester.path / "b.json",
        history([calls] * 10, warmup=True, groups=dict.fromkeys(calls, (None, "test_gc.py"))),
    )
    result = pytester.runpytest("--perf-baseline=b.json", "--perf-record=r.json", *xdist)
    result.assert_outcomes(passed=2)
    record = load(pytester.path / "r.json")
    tests = record["tests"]
    row = tests["id"].index("test_gc.py::test_with_fixture")
    assert tests["setup"][row] < 0.02  # three full collections of a million objects each
    assert tests["teardown"][row] < 0.02
    assert tests["gc"][row] == 0.0  # none started in the call
    modules = dict(zip(record["modules"]["id"], record["modules"]["total"], strict=True))
    assert modules["test_gc.py"] < 0.04
    assert record["comparison"]["regressions"] == []


def test_a_runner_that_got_slower_for_good_is_one_suite_change_not_one_per_test() -> None:
    then = many(40)
    slower = {t: s * 1.5 for t, s in then.items()}
    env = history([then] * 12 + [slower] * 3)
    result = compare(run_of(slower, 99), env, Rule())
    assert [(c.kind, c.id, c.runs, c.since.commit) for c in result.timing.changes] == [
        ("session", "suite total", 4, "c12")
    ]
    assert result.timing.changes[0].ratio == pytest.approx(1.5, rel=0.05)
    assert [f.kind for f in result.timing.regressions] == []  # the change says it, once


def test_a_test_that_changed_on_a_runner_that_also_changed_is_still_a_change() -> None:
    then = many(40)
    faster = {t: s * 0.8 for t, s in then.items()}
    later = {**faster, "t_005.py::test": then["t_005.py::test"] * 0.8 * 2.5}
    result = compare(run_of(later, 99), history([then] * 12 + [later] * 3), Rule())
    kinds = sorted((c.kind, c.id, c.slower) for c in result.timing.changes)
    assert kinds == [("session", "suite total", False), ("test", "t_005.py::test", True)]


def of_commits(runs: Sequence[Mapping[str, float]], commits: Sequence[str]) -> EnvHistory:
    """A baseline's runs (wobbling as ``history``'s), each at the commit given."""
    env = EnvHistory()
    for index, (calls, commit) in enumerate(zip(runs, commits, strict=True)):
        wobble = WOBBLE[index % len(WOBBLE)]
        run = run_of({t: s * wobble for t, s in calls.items()}, index)
        add_run(env, replace(run, identity=replace(run.identity, commit=commit)), 50)
    return env


def now_at(calls: Mapping[str, float], commit: str) -> RunTimings:
    run = run_of(calls, 99)
    return replace(run, identity=replace(run.identity, commit=commit))


def test_a_step_between_two_runs_of_one_commit_is_never_that_commits_change() -> None:
    """Every run at one commit, a test 2.5x from the third-last run on: the code did not
    change, so no CHANGED (nor a REGRESSION the same way); one note says what moved."""
    then = many(12)
    later = {**then, "t_005.py::test": then["t_005.py::test"] * 2.5}
    env = of_commits([then] * 12 + [later] * 2, ["1bda877"] * 14)
    result = compare(now_at(later, "1bda877"), env, Rule())
    assert result.timing.changes == []
    assert result.timing.regressions == []
    stepped = [(c.kind, c.id, c.runs, c.slower) for c in result.timing.unattributed]
    assert stepped == [("test", "t_005.py::test", 3, True)]  # its module's step is its own
    (note,) = [n for n in scope_notes(result) if n.startswith("environment:")]
    assert "1 test(s), class(es) or module(s) stepped (1 slower, 0 faster: t_005.py::test)" in note
    assert "between two runs of one commit (1bda877): the code did not change there" in note
    # The same step where the commit changed with it is that commit's change.
    env = of_commits([then] * 12 + [later] * 2, ["1bda877"] * 12 + ["9f0e2c4"] * 2)
    result = compare(now_at(later, "9f0e2c4"), env, Rule())
    assert [(c.id, c.since.commit) for c in result.timing.changes] == [
        ("t_005.py::test", "9f0e2c4")
    ]
    assert result.timing.unattributed == []


def test_a_run_at_the_commit_of_its_baseline_says_environment_never_changed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end, in a git checkout: every baseline run at this commit, test_a 2.5x
    since the second-last; this run at that commit too. No CHANGED line, no failure with
    --perf-fail; the environment note, and the record's ``unattributed``."""
    import subprocess

    make_suite(pytester, monkeypatch)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(["git", *args], cwd=pytester.path, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pytester.path, check=True, capture_output=True, text=True
    ).stdout.strip()
    before = dict(zip(IDS, (0.0002, 0.1, 0.15), strict=True))
    after = {**before, IDS[1]: 0.25}
    runs = [before] * 12 + [after] * 2
    write_baseline(pytester.path / "baseline.json", of_commits(runs, [head] * 14))
    monkeypatch.setenv("SLEEP_A", "0.25")
    result = pytester.runpytest(
        "--perf-baseline=baseline.json", "--perf-record=r.json", "--perf-fail"
    )
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "CHANGED" not in out
    assert "REGRESSION" not in out
    result.stdout.fnmatch_lines(
        [f"environment: *test_mod.py::test_a*between two runs of one commit ({head[:12]})*"]
    )
    comparison = load(pytester.path / "r.json")["comparison"]
    assert comparison["changes"] == []
    assert [(c["id"], c["since"]["commit"]) for c in comparison["unattributed"]][:1] == [
        (IDS[1], head)
    ]


def test_a_step_inside_a_later_commits_runs_is_not_that_commits_change() -> None:
    """The commit changed two runs before the step: its first run held the old level, so
    the step began between two of its runs, and it is not named as its change."""
    then = many(12)
    later = {**then, "t_005.py::test": then["t_005.py::test"] * 2.5}
    runs = [then] * 12 + [then] + [later] * 2
    env = of_commits(runs, ["aaaaaaa"] * 12 + ["bbbbbbb"] * 3)
    result = compare(now_at(later, "bbbbbbb"), env, Rule())
    assert result.timing.changes == []
    assert [(c.id, c.since.commit) for c in result.timing.unattributed if c.kind == "test"] == [
        ("t_005.py::test", "bbbbbbb")
    ]


def test_a_runner_that_slowed_at_one_commit_is_named_as_the_runner() -> None:
    then = many(40)
    slower = {t: s * 1.5 for t, s in then.items()}
    env = of_commits([then] * 12 + [slower] * 3, ["c0ffee1"] * 15)
    result = compare(now_at(slower, "c0ffee1"), env, Rule())
    assert result.timing.changes == []
    assert [(c.kind, c.runs) for c in result.timing.unattributed] == [("session", 4)]
    (note,) = [n for n in scope_notes(result) if n.startswith("environment:")]
    assert re.match(
        r"environment: the runner's speed 1\.[45]\dx since c0ffee1, between two runs"
        r" of one commit \(c0ffee1\)",
        note,
    ), note


def test_a_baseline_alone_shows_no_change_between_runs_of_one_commit() -> None:
    """``changes_in_runs`` (what ``baseline --accept`` accepts, what a report of a
    baseline alone draws) applies the same rule."""
    from pytest_accel.perf.analysis.comparison import changes_in_runs

    then = many(12)
    later = {**then, "t_005.py::test": then["t_005.py::test"] * 2.5}
    runs = [then] * 12 + [later] * 3
    assert changes_in_runs(of_commits(runs, ["1bda877"] * 15), Rule()) == []
    found = changes_in_runs(of_commits(runs, ["1bda877"] * 12 + ["9f0e2c4"] * 3), Rule())
    assert [(c.kind, c.id, c.since.commit) for _, _, c in found] == [
        ("test", "t_005.py::test", "9f0e2c4"),
        ("module", "t_005.py", "9f0e2c4"),
    ]


def test_a_warm_up_is_judged_against_warm_ups_and_only_a_large_change_is_a_finding() -> None:
    then = {"t.py::first": 0.6, **many(5)}
    env = history([then] * 10, warmup=True)
    for factor, found in ((1.33, False), (2.2, True)):
        now = {**then, "t.py::first": 0.6 * factor}
        result = compare(run_of(now, 99, warmup=True), env, Rule())
        regressions = [(f.id, f.warmup) for f in result.timing.regressions if f.kind == "test"]
        assert regressions == ([("t.py::first", True)] if found else []), factor


def test_a_cost_that_moved_inside_its_class_in_a_run_ordered_otherwise_is_not_a_finding() -> None:
    from dataclasses import replace

    ids = [f"t.py::TestModel::test_{i}" for i in range(1, 7)]
    groups = dict.fromkeys(ids, ("t.py::TestModel", "t.py"))
    # Serially test_1 compiles what the class shares; under -n 2 another test does.
    then = dict.fromkeys(ids, 0.1) | {ids[0]: 0.25}
    moved = dict.fromkeys(ids, 0.1) | {ids[3]: 0.25}
    env = history([then] * 8, groups=groups)
    assert {run.layout for run in env.runs} == {"serial"}

    serial = compare(run_of(moved, 99, groups=groups), env, Rule())
    assert [f.id for f in serial.timing.regressions] == [ids[3]]  # same order: a finding

    reordered = replace(run_of(moved, 99, groups=groups), layout="xdist 2")
    result = compare(reordered, env, Rule())
    assert result.timing.regressions == result.timing.improvements == []
    assert result.timing.unconfirmed == sorted([ids[0], ids[3]])
    assert (result.timing.layout, result.timing.baseline_layout) == ("xdist 2", "serial")
    rows = terminal_rows(result, 20)
    assert any(
        row.text.startswith("order: this run was xdist 2, the baseline's runs serial")
        for row in rows
    )

    # A real slowdown moves its class's total too, in any order.
    slower = replace(run_of(moved | {ids[3]: 0.7}, 99, groups=groups), layout="xdist 2")
    result = compare(slower, env, Rule())
    assert [(f.kind, f.id) for f in result.timing.regressions] == [("test", ids[3])]


def test_a_regression_row_is_red_and_minus_q_keeps_only_what_matters(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression rows were never red: the colour was chosen by matching a word no row
    had.  It comes from the row's tone now, as pytest's from a status's category."""
    make_suite(pytester, monkeypatch)
    suite_baseline(pytester)
    monkeypatch.setenv("SLEEP_A", "0.45")
    args = ["--perf-baseline=baseline.json", "--perf-record=r.json", "--color=yes"]
    result = pytester.runpytest(*args)
    red = "\x1b[31m\x1b[1m"  # pytest's red and bold, as its own failures are shown
    green = "\x1b[32m"
    out = result.stdout.str()
    assert f"{red}REGRESSION test test_mod.py::test_a: " in out
    assert f"{red}perf: 1 regression(s), " in out
    # Nothing regressed: the summary is green, and nothing is red.
    monkeypatch.setenv("SLEEP_A", "0.2")
    calm = pytester.runpytest(*args).stdout.str()
    assert f"{green}perf: 0 regression(s), " in calm
    assert red not in calm
    # -q: no section bars and no notes; the alarm, the verdict and the file written stay.
    monkeypatch.setenv("SLEEP_A", "0.45")
    quiet = pytester.runpytest(*args[:2], "-q")
    quiet.stdout.no_fnmatch_line("*- pytest-accel performance -*")
    quiet.stdout.fnmatch_lines(
        [
            "REGRESSION test test_mod.py::test_a: *",
            "perf: 1 regression(s)*",
            "pytest-accel: timing record of 3 test(s) written to r.json",
        ]
    )
    # -qq: alarms only (the verdict is one when something regressed) ...
    quieter = pytester.runpytest(*args[:2], "-qq")
    quieter.stdout.fnmatch_lines(["REGRESSION test test_mod.py::test_a: *", "perf: 1 regr*"])
    quieter.stdout.no_fnmatch_line("pytest-accel: timing record of *")
    # ... and nothing at all where nothing did.
    monkeypatch.setenv("SLEEP_A", "0.2")
    silent = pytester.runpytest(*args[:2], "-qq")
    silent.stdout.no_fnmatch_line("perf: *")


IGNORED_SUITE = """
import os
import time

import pytest


def test_first():
    pass


@pytest.mark.perf(ignore=True)
def test_a():
    time.sleep(float(os.environ.get("SLEEP_A", "0.2")))


@pytest.mark.perf(threshold=3.0)
def test_b():
    time.sleep(float(os.environ.get("SLEEP_B", "0.15")))
"""


def test_the_commands_judge_a_record_as_its_session_did(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An ignored test 4x slower: the session said 0 regressions, while ``compare`` and
    ``report`` on the same record and baseline once said REGRESSION 3.88x (the record
    kept neither the marks nor the rule's options)."""
    pytester.makepyfile(test_mod=IGNORED_SUITE)
    suite_baseline(pytester)
    monkeypatch.setenv("SLEEP_A", "0.8")  # 4x, ignored by its mark
    result = pytester.runpytest(
        "--perf-baseline=baseline.json", "--perf-record=r.json", "--perf-min-delta=0.04"
    )
    result.stdout.fnmatch_lines(["perf: 0 regression(s), *"])
    record = load(pytester.path / "r.json")
    assert record["judgement"]["overrides"] == {
        "test_mod.py::test_a": {"threshold": None, "min_delta": None, "ignore": True},
        "test_mod.py::test_b": {"threshold": 3.0, "min_delta": None, "ignore": False},
    }
    assert record["judgement"]["rule"]["min_delta"] == 0.04
    session = record["comparison"]
    capsys.readouterr()
    path, baseline = str(pytester.path / "r.json"), str(pytester.path / "baseline.json")
    assert main(["compare", path, "--baseline", baseline, "--format", "json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    for field in ("regressions", "changes", "improvements", "recompiled", "learning"):
        assert offline[field] == session[field], field
    assert offline["judged_by"] == (
        "judged as the run was: by the record's rule and its 2 @pytest.mark.perf override(s)"
    )
    page = str(pytester.path / "p.html")
    assert main(["report", path, "--baseline", baseline, "-o", page]) == 0
    assert "REGRESSION" not in Path(page).read_text()
    # A rule option given to the command applies on top, and the output says so.
    assert main(["compare", path, "--baseline", baseline, "--threshold", "1.05"]) == 0
    text = capsys.readouterr().out
    assert "given here, on top: --threshold 1.05" in text
    assert "test_mod.py::test_a" not in text  # still ignored: its mark is the record's


def test_many_small_tests_each_slower_under_the_floor_are_found_at_their_module_and_named() -> None:
    """A 20 ms sleep in a function 30 tests of one module call: each test moves by less
    than --perf-min-delta (0.05 s) from 0.03 s, so no test can be a finding; the
    module's total moves by 0.6 s, and its finding names the tests that moved most."""
    ids = [f"m.py::test_{i:02d}" for i in range(30)] + [f"n.py::test_{i:02d}" for i in range(30)]
    groups = {t: (None, t.split("::")[0]) for t in ids}
    then = {t: 0.03 + (i % 5) * 0.001 for i, t in enumerate(ids)}
    now = {t: s + (0.02 if t.startswith("m.py") else 0.0) for t, s in then.items()}
    now["m.py::test_07"] += 0.01  # the one that moved most
    result = compare(run_of(now, 99, groups=groups), history([then] * 8, groups=groups), Rule())
    assert [f.kind for f in result.timing.regressions if f.kind == "test"] == []
    [module] = [f for f in result.timing.regressions if f.kind == "module"]
    assert module.id == "m.py"
    assert module.movers[0][0] == "m.py::test_07"
    assert len(module.movers) == 3
    assert all(ident.startswith("m.py::") for ident, _ in module.movers)
    from pytest_accel.perf.output import describe

    assert "; moved most: m.py::test_07 (+3" in describe(module)


def test_a_recompiling_function_is_one_alarm_with_its_symptoms_beneath_it() -> None:
    """Two tests compile ``<lambda>`` anew on every call: their recompilations, their
    tracing and execution regressions and the suite total they moved most are one alarm
    naming the function; a regression of another test stays its own."""
    from pytest_accel.perf.model.findings import Culprit, Finding, Recompiled, RecompileVerdict
    from pytest_accel.perf.output import alarm_count, terminal_rows

    culprit = Culprit("<lambda>", "fit", "calc/train.py", 8)
    a, b, other = "t.py::test_a", "t.py::test_b", "t.py::test_other"
    comparison = Comparison(
        "cpu/x1",
        TimingVerdict(
            regressions=[
                Finding("test", a, 0.1, 0.5, 5.0, 5),
                Finding("test", a, 0.01, 0.2, 20.0, 5, tracing=True),
                Finding("session", "suite total", 1.0, 1.9, 1.9, 3, movers=((b, 0.5), (a, 0.4))),
                Finding("test", other, 0.2, 0.5, 2.5, 5),
            ]
        ),
        recompiles=RecompileVerdict(
            [
                Recompiled(a, 19, 0, 5, culprit=culprit, compilations=20),
                Recompiled(b, 24, 0, 5, culprit=culprit, compilations=25),
            ]
        ),
    )
    alarms = comparison.alarm_list
    assert [(alarm.kind, alarm.id) for alarm in alarms] == [
        ("recompiled", b),  # compiled it most: it leads
        ("regression", other),
    ]
    lead = alarms[0]
    assert lead.culprit == culprit
    assert [(s.kind, s.id, getattr(s.finding, "tracing", False)) for s in lead.symptoms] == [
        ("regression", a, True),  # the most severe first, as alarms are
        ("recompiled", a, False),
        ("regression", a, False),
        ("regression", "suite total", False),
    ]
    assert alarm_count(comparison) == "1 regression(s) and 1 recompiling function(s)"
    rows = [line.text for line in terminal_rows(comparison, 20)]
    head = rows.index(
        "RECOMPILED function <lambda> (called in fit, calc/train.py:8): compiled anew on"
        " every call in 2 test(s) (a new function, shape or Python scalar each time?)"
    )
    assert rows[head + 1] == (
        f"  test {b}: 25 compilations of <lambda> (judged: 24 recompilation(s), at most 0 in 5"
        " baseline run(s))"
    )
    assert rows[head + 2].startswith(f"  REGRESSION test {a} tracing: ")
    assert (
        rows[head + 3]
        == f"  test {a}: 20 compilations of <lambda> (judged: 19 recompilation(s), at most 0 in 5"
        " baseline run(s))"
    )
    assert sum(row.startswith(("REGRESSION", "RECOMPILED")) for row in rows) == 2


def test_a_modules_change_names_the_tests_that_moved_most_as_its_regression_does() -> None:
    """The same 20 ms in 30 tests, from three runs ago on (a new commit): the module's
    step is a change, and it names its tests that moved most, in every output."""
    ids = [f"m.py::test_{i:02d}" for i in range(30)] + [f"n.py::test_{i:02d}" for i in range(30)]
    groups = {t: (None, t.split("::")[0]) for t in ids}
    then = {t: 0.03 + (i % 5) * 0.001 for i, t in enumerate(ids)}
    slower = {t: s + (0.02 if t.startswith("m.py") else 0.0) for t, s in then.items()}
    slower["m.py::test_07"] += 0.01  # the one that moved most
    env = history([then] * 12 + [slower] * 2, groups=groups)
    result = compare(run_of(slower, 99, groups=groups), env, Rule())
    [module] = [c for c in result.timing.changes if c.kind == "module"]
    assert (module.id, module.since.commit) == ("m.py", "c12")
    assert module.movers[0][0] == "m.py::test_07"
    assert all(ident.startswith("m.py::") for ident, _ in module.movers)
    from pytest_accel.perf.output import describe_change

    assert "since c12, 3 runs; moved most: m.py::test_07 (+3" in describe_change(module)
    assert module.to_json()["moved_most"][0]["id"] == "m.py::test_07"


def test_a_slowed_run_folded_into_a_3_run_baseline_does_not_hide_the_next_one() -> None:
    """docs/ci.md builds a baseline with 3 runs: a 2x slowdown is a regression on its
    first run and is folded in; its second run is a regression against the runs before
    it (a pending step: judged against all four, the widened spread hid it); its third
    is named as a change since the run that brought it.  An outlier folded in the same
    way makes no alarm on the run after it."""
    slow, other = "t.py::test_slow", "t.py::test_other"
    env = EnvHistory()
    for index in range(3):
        wobble = WOBBLE[index]
        add_run(env, run_of({slow: 0.5 * wobble, other: 0.3 * wobble}, index), 20)
    first = run_of({slow: 1.0, other: 0.9}, 3)
    assert sorted(f.id for f in compare(first, env, Rule()).timing.regressions) == [other, slow]
    add_run(env, first, 20)
    second_run = run_of({slow: 1.02, other: 0.29}, 4)
    second = compare(second_run, env, Rule())
    assert [(f.id, f.pending) for f in second.timing.regressions] == [(slow, True)]
    from pytest_accel.perf.output import describe

    assert "3 sample(s), the newest run left out: it was as slow" in describe(
        second.timing.regressions[0]
    )
    assert second.timing.slowdowns == []
    assert second.alarms == 1
    add_run(env, second_run, 20)
    third = compare(run_of({slow: 0.98, other: 0.31}, 5), env, Rule())
    assert [(c.id, c.since.commit, c.runs) for c in third.timing.slowdowns] == [(slow, "c3", 3)]
    assert third.alarms == 1


def _read_back(env: EnvHistory, steps: Any = "as written") -> EnvHistory:
    """``env`` written and read again, its summary's ``steps`` as written, replaced, or
    left out (None: as a summary from before the field)."""
    from pytest_accel.perf.formats.baseline import parse_baseline

    data = baseline_json(Baseline({"cpu/x1": env}, window=50))
    summary = data["envs"]["cpu/x1"]["summary"]["tests"]
    if steps is None:
        del summary["steps"]
    elif steps != "as written":
        summary["steps"] = steps
    return parse_baseline("b.json", json.loads(json.dumps(data))).envs["cpu/x1"]


def test_the_steps_kept_in_the_summary_judge_as_the_steps_found_anew() -> None:
    """The baseline's summary keeps the steps its own runs show, so a comparison does not
    search 100,000 tests' histories for them again: the same comparison either way, on
    a history with speed-ups, slowdowns and steady tests, judged by the default rule."""
    rng = __import__("numpy").random.default_rng(7)
    ids = [f"t.py::test_{i:02d}" for i in range(40)]
    levels = dict(zip(ids, rng.uniform(0.2, 2.0, len(ids)).tolist(), strict=True))
    runs = []
    for index in range(16):
        calls = dict(levels)
        for i, ident in enumerate(ids[:12]):  # steps in the baseline's own runs
            if index >= 16 - (3 + i % 5):
                calls[ident] *= 0.5 if i % 2 else 2.5
        runs.append(calls)
    env = history(runs)
    kept = _read_back(env)
    summary = kept.stored_summary()
    assert summary is not None
    assert summary.steps is not None
    assert len(summary.steps) >= 6  # most of the twelve: the search names each one
    # Back at the old level now: a regression from the sped-up tests' new level.
    calls = {**levels, ids[2]: levels[ids[2]] * 3.0}
    now = run_of(calls, 99)
    with_steps = compare(now, kept, Rule())
    without = compare(now, _read_back(env, steps=None), Rule())
    assert with_steps == without
    assert ids[1] in {f.id for f in with_steps.timing.regressions}
    assert with_steps.alarms >= 1
    # A run without some of the baseline's tests, and with one it lacks: the steps of
    # the tests it has, each at its place among them.
    fewer = {k: v for k, v in calls.items() if k not in (ids[0], ids[3])}
    partial = run_of({**fewer, "t.py::test_new": 0.5}, 100)
    assert compare(partial, kept, Rule()) == compare(partial, _read_back(env, steps=None), Rule())
    assert ids[1] in {f.id for f in compare(partial, kept, Rule()).timing.regressions}


def test_the_summarys_steps_are_read_by_the_default_rule_only() -> None:
    """Two fast runs are not yet a change; with a third, this one, they are, and the
    speed-up is named.  A summary that says the two were one already (a hand edit)
    means it was named when found, under the rule its steps were found by; under any
    other rule the runs are searched anew."""
    ident = "t.py::test_a"
    env = history([{ident: 0.4}] * 8 + [{ident: 0.2}] * 2)
    now = run_of({ident: 0.2}, 99)
    told, untold = _read_back(env, steps=[[0, 2]]), _read_back(env, steps=None)

    def test_changes(comparison: Comparison) -> list[tuple[str, int]]:
        return [(c.id, c.runs) for c in comparison.timing.changes if c.kind == "test"]

    assert test_changes(compare(now, untold, Rule())) == [(ident, 3)]
    assert test_changes(compare(now, told, Rule())) == []
    other = Rule(threshold=1.5)
    assert compare(now, told, other) == compare(now, untold, other)
    assert test_changes(compare(now, told, other)) == [(ident, 3)]
