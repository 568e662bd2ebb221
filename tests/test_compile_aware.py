"""Compile-aware timing: where the suite uses JAX, a test is judged on its execution
(its time minus its compilation, real ``jax.monitoring`` listeners on CPU), a test
that recompiles on every call is a finding of its own, and a baseline's runs of
another layout or another kind of time never make a change."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main
from pytest_accel.perf.analysis.comparison import changes_in_runs, compare
from pytest_accel.perf.analysis.layouts import same_layout, scope_of
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.formats.baseline import (
    Baseline,
    EnvHistory,
    add_run,
    parse_baseline,
)
from pytest_accel.perf.model.timings import RunTimings
from pytest_accel.perf.offline import baseline_json
from tests.jax_runs import run_jax_suite, run_serial_or_xdist
from tests.test_comparison import NO_FULL_COLLECTION_IN_TESTS, WOBBLE, run_of

HEAVY = """
import jax
import jax.numpy as jnp


@jax.jit
def heavy(x):
    for _ in range(300):  # unrolled: a compilation of a good fraction of a second
        x = jnp.sin(x) * 1.001 + 0.5
    return x
"""

ORDERED = """
import time

import jax.numpy as jnp

from shared import heavy


def test_{name}():
    heavy(jnp.ones(64)).block_until_ready()  # whichever test runs first compiles it
    time.sleep(0.15)
"""

FIRST = """
import jax.numpy as jnp


def test_first():  # pays the process's warm-up, judged apart
    jnp.ones(3).block_until_ready()
"""

RETRACING = """
import os

import jax
import jax.numpy as jnp


def step(x):
    return x * 2 + 1


STEP = jax.jit(step)


def test_steps():
    x = jnp.ones(8)
    for _ in range(8):
        if os.environ.get("RETRACE"):
            x = jax.jit(lambda y: step(y))(x)  # a new function each call: traced anew
        else:
            x = STEP(x)
    assert x.shape == (8,)
"""

PHASES = """
import jax
import jax.numpy as jnp
import pytest


@pytest.fixture
def compiled_in_setup():
    return jax.jit(lambda x: x * 3)(jnp.ones(3))


def test_compiles_in_its_fixture(compiled_in_setup):
    assert compiled_in_setup.shape == (3,)


def test_compiles_in_its_call():
    jax.jit(lambda x: jnp.tanh(x).sum())(jnp.ones(4)).block_until_ready()


def test_retraces_on_every_call():
    for _ in range(5):
        jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()
"""


def record(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.requires("jax")
def test_the_record_keeps_each_tests_compilation_in_its_call_and_its_recompilations(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_phases=PHASES)
    run_jax_suite(pytester, "--perf-record=r.json").assert_outcomes(passed=3)
    tests = record(pytester.path / "r.json")["tests"]
    call = dict(zip(tests["id"], tests["call"], strict=True))
    fixture, in_call, retracing = (
        "test_phases.py::test_compiles_in_its_fixture",
        "test_phases.py::test_compiles_in_its_call",
        "test_phases.py::test_retraces_on_every_call",
    )
    assert tests["compile_seconds"][fixture] > 0
    assert tests["call_compile_seconds"][fixture] == 0  # its setup compiled, not its call
    assert 0 < tests["call_compile_seconds"][in_call] <= call[in_call]
    assert tests["call_compile_seconds"][in_call] <= tests["compile_seconds"][in_call]
    assert tests["recompiles"][retracing] >= 4  # five lambdas of one name
    assert tests["recompiles"][in_call] == 0
    assert record(pytester.path / "r.json")["compilation"]["recompiles"] >= 4


# The calls of ORDERED's tests take their compilation (as measured) and 0.15 s besides,
# with no CPU wait, however loaded the runner: a 0.15 s sleep read 0.28 s at a load of 8
# (a wake-up's wait is counted up to 50 ms), an execution regression of both tests.  No
# full collection runs in them: after test_store.py's runs had loaded botocore into the
# process, one the compiling set off (0.14 s) was taken from the 0.15 s given.
GIVEN_EXECUTION = (
    NO_FULL_COLLECTION_IN_TESTS
    + """


@pytest.hookimpl(trylast=True)  # after the plugin has put the call's compilation on it
def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.startswith(("test_a.py", "test_b.py")):
        measured = getattr(report, "pytest_accel_measures", {})
        report.duration = measured.get("compile_seconds") or 0.0
        report.duration += 0.15
        report.pytest_accel_measures = {**measured, "cpu_wait": 0.0}
"""
)


def _ordered_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        shared=HEAVY,
        test_0=FIRST,
        test_a=ORDERED.format(name="a"),
        test_b=ORDERED.format(name="b"),
    )
    pytester.makeconftest(GIVEN_EXECUTION)


@pytest.mark.requires("jax")
def test_a_compilation_that_moves_to_another_test_is_no_regression_of_its_execution(
    pytester: pytest.Pytester,
) -> None:
    _ordered_suite(pytester)
    for index in range(3):  # test_a compiles the shared function, test_b finds it compiled
        run_jax_suite(
            pytester, "test_0.py", "test_a.py", "test_b.py", f"--perf-record=r{index}.json"
        ).assert_outcomes(passed=3)
    records = ["r0.json", "r1.json", "r2.json"]
    for into, time in (("b.json", "execution"), ("w.json", "wall")):
        assert main(["baseline", *records, "--into", into, "--time", time]) == 0
    baseline = record(pytester.path / "b.json")
    assert [run["time"] for run in baseline["envs"]["cpu/x1"]["runs"]] == ["execution"] * 3
    swapped = ["test_0.py", "test_b.py", "test_a.py"]
    wall = run_jax_suite(pytester, *swapped, "--perf-baseline=w.json", "--perf-time=wall")
    wall.stdout.fnmatch_lines(["REGRESSION test test_b.py::test_b: *"])
    mixed = run_jax_suite(pytester, *swapped, "--perf-baseline=b.json", "--perf-time=wall")
    mixed.stdout.fnmatch_lines(
        ["time: judged on wall time; 3 baseline run(s) timed on execution time left out"]
    )
    assert "REGRESSION" not in mixed.stdout.str()
    swapped.append("--perf-baseline=b.json")
    judged = run_jax_suite(pytester, *swapped, "--perf-record=r.json")
    judged.assert_outcomes(passed=3)
    # No test's execution moved: the compilation did. (The tracing that moved with it
    # is judged apart, by its sums, in tests/test_tracing.py: on a loaded runner test_b's
    # trace read 0.29 s against the baseline's 0.1 s in test_a, a finding of its own.)
    judged.stdout.no_fnmatch_line("REGRESSION test test_?.py::test_?: *")
    judged.stdout.no_fnmatch_line("improved   test test_?.py::test_?: *")
    comparison = record(pytester.path / "r.json")["comparison"]
    assert comparison["time"] == "execution"
    moved = comparison["regressions"] + comparison["improvements"] + comparison["changes"]
    assert [f["id"] for f in moved if not f.get("tracing")] == []
    tests = record(pytester.path / "r.json")["tests"]
    call = dict(zip(tests["id"], tests["call"], strict=True))
    # What moved: test_b now pays the compilation, in its call; test_a finds it compiled.
    compiled = tests["call_compile_seconds"]
    assert compiled["test_b.py::test_b"] > 0.1
    assert compiled.get("test_a.py::test_a", 0.0) < compiled["test_b.py::test_b"] / 2
    given = compiled["test_b.py::test_b"] + 0.15
    assert call["test_b.py::test_b"] == pytest.approx(given, abs=0.01)


@pytest.mark.requires("jax")
def test_a_test_that_retraces_on_every_call_is_a_recompilation_regression_on_its_first_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_r=RETRACING)
    monkeypatch.delenv("RETRACE", raising=False)
    for _ in range(3):  # recompilations need --perf-min-samples runs, as times do
        run_jax_suite(pytester, "--perf-baseline=b.json", "--perf-update-baseline").assert_outcomes(
            passed=1
        )
    monkeypatch.setenv("RETRACE", "1")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = run_jax_suite(
        pytester,
        "--perf-baseline=b.json",
        "--perf-fail",
        "--perf-record=r.json",
        "--accel-report=p.html",
    )
    assert result.ret == 1
    # One alarm, naming the function jitted anew and the line that calls it; its tests
    # (and any slower time of theirs) beneath it.
    culprit = "<lambda> (called in test_steps, test_r.py:18)"
    result.stdout.fnmatch_lines(
        [
            f"*test_r.py:18: PerfRegressionWarning: function {culprit}: compiled anew on every"
            " call in 1 test(s) *: test test_r.py::test_steps: 8 compilations of <lambda>"
            " (judged: 7 recompilation(s), at most 0 in 3 baseline run(s))*",
            f"RECOMPILED function {culprit}: compiled anew on every call in 1 test(s) (a new"
            " function, shape or Python scalar each time?)",
            "  test test_r.py::test_steps: 8 compilations of <lambda> (judged: 7"
            " recompilation(s), at most 0 in 3 baseline run(s))",
            "perf: * regression(s), 0 change(s), 1 recompiling, *",  # its time may show too
            "::warning file=test_r.py,line=18,title=recompilation (function)::function *",
        ]
    )
    assert result.stdout.str().count("PerfRegressionWarning:") == 1
    result.stdout.fnmatch_lines(["*exit status 1: 0 regression(s) and 1 recompiling function(s)*"])
    found = record(pytester.path / "r.json")["comparison"]["recompiled"]
    assert [(r["id"], r["baseline"], r["samples"]) for r in found] == [
        ("test_r.py::test_steps", 0, 3)
    ]
    assert found[0]["current"] >= 7
    assert found[0]["culprit"] == {
        "function": "<lambda>",
        "caller": "test_steps",
        "path": "test_r.py",
        "line": 18,
    }
    table = summary.read_text()
    assert (
        r"| recompiled | function | &lt;lambda&gt; (called in test\_steps, test\_r.py:18) |"
        in table
    )
    assert r"| same cause: recompiled | test | test\_r.py::test\_steps | 0 |" in table
    page = (pytester.path / "p.html").read_text()
    assert "RECOMPILED function &lt;lambda&gt; (called in test_steps, test_r.py:18)" in page
    assert "1 recompiling; judged on execution time" in page


EAGER_AND_JITTED = """
import jax
import jax.numpy as jnp


def helper(v):
    return jax.jit(lambda w: w + 1)(v)  # a new function each call


def other(v):
    return jax.jit(lambda w: w * 2)(v)  # another lambda, from another place


def test_mixed():
    for n in range(1, 7):  # eager operations, compiled once per shape: 6 times each
        jnp.ones((n,)).astype(jnp.int32)
    for _ in range(3):
        helper(1.0)
    for _ in range(2):
        other(1.0)
"""


@pytest.mark.requires("jax")
def test_the_function_named_is_the_jitted_one_never_an_eager_operation(
    pytester: pytest.Pytester,
) -> None:
    """JAX compiles ``convert_element_type`` once per shape of an eager ``astype``: six
    times here, more than the lambda jitted anew (three). The function a recompiling
    test names is the jitted one, where it is called, with its own count: another
    ``<lambda>`` jitted twice elsewhere is another function."""
    pytester.makepyfile(test_e=EAGER_AND_JITTED)
    run_jax_suite(pytester, "--perf-record=r.json").assert_outcomes(passed=1)
    tests = record(pytester.path / "r.json")["tests"]
    assert tests["repeats"]["test_e.py::test_mixed"] >= 6  # an eager operation's
    assert tests["recompiling"]["test_e.py::test_mixed"] == {
        "function": "<lambda>",
        "caller": "helper",
        "path": "test_e.py",
        "line": 6,  # makepyfile drops the leading newline
        "count": 3,
    }


@pytest.mark.requires("jax")
@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_per_call_jit_is_found_on_the_first_xdist_run_against_serial_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request's -n 2 job against a baseline main built serially."""
    pytester.makepyfile(test_r=RETRACING, test_other="def test_other():\n    pass\n")
    monkeypatch.delenv("RETRACE", raising=False)
    for _ in range(3):
        run_jax_suite(
            pytester, "--perf-baseline=b.json", "--perf-update-baseline", "-p", "no:randomly"
        ).assert_outcomes(passed=2)
    monkeypatch.setenv("RETRACE", "1")
    result = run_serial_or_xdist(
        pytester, "--perf-baseline=b.json", "--perf-fail", "-n", "2", "-p", "no:randomly"
    )
    assert result.ret == 1
    # As a serial run says it (test_a_test_that_retraces_on_every_call...), but for what
    # was judged: under xdist, the compilations of the function it compiled most.
    result.stdout.fnmatch_lines(
        [
            "RECOMPILED function <lambda> (called in test_steps, test_r.py:18): compiled anew"
            " on every call in 1 test(s) (a new function, shape or Python scalar each time?)",
            "  test test_r.py::test_steps: 8 compilations of <lambda> (judged: its most"
            " compiled function 8 times, at most 1 in 3 baseline run(s))",
            "recompilations: judged on each test's most compiled function against 3 baseline"
            " run(s) of other layouts (too few laid out as this one, xdist 2)",
        ]
    )


# --- without JAX: the rules on constructed histories --------------------------------

SLOW, FAST = "t.py::test_slow", "t.py::test_fast"


def _laid_out(calls: dict[str, float], index: int, layout: str) -> RunTimings:
    """Run ``index`` laid out as ``layout``, each value wobbling by up to 3%."""
    wobble = WOBBLE[index % len(WOBBLE)]
    return replace(run_of({t: s * wobble for t, s in calls.items()}, index), layout=layout)


def test_a_switch_of_layout_is_no_change_and_a_step_within_one_layout_is_one() -> None:
    """CI's --perf-update-baseline folds serial, -n 2 and sharded runs into one history:
    under -n 2 the workers share the cores and every test is 1.5x its serial time."""
    env = EnvHistory()
    index = 0
    for round_ in range(8):
        slow = 0.4 if round_ < 5 else 0.8  # round 5: a real slowdown, commit c10
        for layout, factor in (("serial", 1.0), ("xdist 2", 1.5)):
            add_run(env, _laid_out({SLOW: slow * factor, FAST: 0.3 * factor}, index, layout), 50)
            index += 1
    switched = compare(_laid_out({SLOW: 1.2, FAST: 0.45}, index, "xdist 2"), env, Rule())
    assert [(c.id, c.since.commit) for c in switched.timing.changes] == [(SLOW, "c11")]
    assert switched.timing.regressions == []
    assert switched.timing.left_out_layout == 8  # 8 xdist runs: enough to compare with alone
    serial = compare(_laid_out({SLOW: 0.8, FAST: 0.3}, index, "serial"), env, Rule())
    assert [(c.id, c.since.commit) for c in serial.timing.changes] == [(SLOW, "c10")]
    # The baseline alone, as `baseline --accept` reads it: its newest run is xdist.
    found = [(c.id, c.since.commit) for _, _, c in changes_in_runs(env, Rule())]
    assert found == [(SLOW, "c11"), ("t.py", "c11")]


def test_a_run_with_too_few_runs_of_its_layout_sees_no_change_from_the_others() -> None:
    env = EnvHistory()
    for index in range(10):
        add_run(env, _laid_out({SLOW: 0.4, FAST: 0.3}, index, "serial"), 50)
    for index in range(10, 12):
        add_run(env, _laid_out({SLOW: 0.6, FAST: 0.45}, index, "xdist 2"), 50)
    result = compare(_laid_out({SLOW: 0.6, FAST: 0.45}, 12, "xdist 2"), env, Rule())
    assert result.timing.changes == []
    assert result.timing.change_runs == 2


def test_a_shard_is_laid_out_as_itself_within_merged_shards() -> None:
    assert same_layout("serial, shard 1/2", "serial, shards 1/2+2/2")
    assert same_layout("xdist 2", "xdist 2")
    assert not same_layout("serial", "serial, shard 1/2")
    assert not same_layout("serial, shard 1/2", "xdist 2, shards 1/2+2/2")
    assert same_layout(None, "xdist 2")  # a baseline from before layouts were kept


@pytest.mark.parametrize(("now", "regressed"), [(1.3, False), (2.1, True)])
def test_three_samples_with_two_alike_give_no_z_score_from_a_collapsed_spread(
    now: float, regressed: bool
) -> None:
    env = EnvHistory()
    for index, seconds in enumerate((1.0, 1.001, 1.2)):
        add_run(env, run_of({SLOW: seconds}, index), 50)
    result = compare(run_of({SLOW: now}, 3), env, Rule(normalize=False))
    assert [f.id for f in result.timing.regressions] == ([SLOW] if regressed else [])
    if regressed:
        z = result.timing.regressions[0].z
        assert z is not None
        assert 2.7 < z < 10  # a spread of at least 10%, not 0.15%


def _compiling(run: RunTimings, seconds: float) -> RunTimings:
    return replace(
        run, compiling={SLOW: seconds}, call_compiling={SLOW: seconds}, recompiles={SLOW: 0}
    )


def test_a_baseline_of_wall_times_judges_a_jax_run_on_wall_time_until_it_has_enough_runs() -> None:
    env = EnvHistory()
    for index in range(5):  # folded by 0.2: wall time, compilation included
        add_run(env, run_of({SLOW: 1.0}, index), 50)
    run = _compiling(run_of({SLOW: 1.0}, 5), 0.6)
    scope = scope_of(run, env, "execution", 3)
    assert (scope.run.basis, scope.left_out_time, len(scope.env.runs)) == ("wall", 0, 5)
    for index in range(5, 8):  # this release folds execution time
        add_run(env, replace(_compiling(run_of({SLOW: 1.0}, index), 0.6), basis="wall"), 50)
        env.runs[-1].basis = "execution"
    scope = scope_of(run, env, "execution", 3)
    assert (scope.run.basis, scope.left_out_time, len(scope.env.runs)) == ("execution", 5, 3)
    assert scope.run.call[0] == pytest.approx(0.4)
    result = compare(run, env, Rule())
    assert (result.timing.time, result.timing.left_out_time) == ("execution", 5)


def _recompiling(count: int, index: int) -> RunTimings:
    return replace(_compiling(run_of({SLOW: 1.0}, index), 0.6), recompiles={SLOW: count})


def _fold_recompiling(env: EnvHistory, counts: tuple[int, ...]) -> None:
    """Runs of this release: timed on execution, with their recompilations."""
    for index, count in enumerate(counts):
        add_run(env, replace(_recompiling(count, index), basis="wall"), 50)
        env.runs[-1].basis = "execution"


@pytest.mark.parametrize(
    ("history", "now", "found"),
    [
        ((12, 9, 12), 23, True),  # a per-call jax.jit in a shared function: 23 against 12
        ((0, 3, 1), 4, False),  # -n 2 hands tests out differently: within what it did
        ((0, 0), 8, False),  # two runs: too few to know the usual count
        ((0, 0, 0), 2, False),  # under the margin
    ],
)
def test_recompilations_are_judged_against_enough_runs_and_a_clear_growth_is_found(
    history: tuple[int, ...], now: int, found: bool
) -> None:
    env = EnvHistory()
    _fold_recompiling(env, history)
    result = compare(_recompiling(now, len(history)), env, Rule())
    assert [(r.id, r.current, r.baseline) for r in result.recompiles.found] == (
        [(SLOW, now, max(history))] if found else []
    )
    assert result.recompiles.judged == (len(history) >= 3)
    assert result.recompiles.runs == len(history)


def test_too_few_runs_to_judge_recompilations_say_how_many_there_are() -> None:
    from pytest_accel.perf.output import scope_notes

    env = EnvHistory()
    _fold_recompiling(env, (0, 0))
    notes = scope_notes(compare(_recompiling(0, 2), env, Rule()))
    assert (
        "recompilations: not judged; 2 baseline run(s) laid out as this one (serial), and a"
        " verdict needs 3 (--perf-min-samples)"
    ) in notes


@pytest.mark.parametrize(
    ("serial", "now", "found"),
    [
        # Under -n 2 a test compiles shapes a serial run's earlier tests had compiled for
        # it: 25 recompilations against at most 7, yet no function more than 4 times.
        ((3, 4, 3), (25, 4), False),
        # A per-call jax.jit of a shared function: compiled on each of 12 calls.
        ((3, 4, 3), (25, 12), True),
        # Eager operations' shapes a serial run's earlier tests compiled (dm-pix).
        ((1, 1, 1), (24, 5), False),
    ],
)
def test_a_run_laid_out_unlike_its_baseline_is_judged_on_its_most_compiled_function(
    serial: tuple[int, ...], now: tuple[int, int], found: bool
) -> None:
    """A pull request's -n 2 job against a baseline of serial runs."""
    env = EnvHistory()
    for index, most in enumerate(serial):
        run = replace(_recompiling(7, index), repeats={SLOW: most}, layout="serial")
        add_run(env, replace(run, basis="wall"), 50)
        env.runs[-1].basis = "execution"
    recompiles, most = now
    run = replace(_recompiling(recompiles, len(serial)), repeats={SLOW: most}, layout="xdist 2")
    result = compare(run, env, Rule())
    assert result.recompiles.judged
    assert result.recompiles.across
    assert [(r.id, r.current, r.baseline, r.of_one_function) for r in result.recompiles.found] == (
        [(SLOW, most, 4, True)] if found else []
    )
    from pytest_accel.perf.output import describe_recompiled, scope_notes

    assert (
        "recompilations: judged on each test's most compiled function against 3 baseline"
        " run(s) of other layouts (too few laid out as this one, xdist 2)"
    ) in scope_notes(result)
    if found:
        assert describe_recompiled(result.recompiles.found[0]).startswith(
            f"test {SLOW}: 12 compilations of one function, at most 4 in 3 baseline run(s)"
        )


@pytest.mark.parametrize(("most", "found"), [(5, False), (12, True)])
def test_xdist_runs_are_judged_on_the_most_compiled_function_against_xdist_runs(
    most: int, found: bool
) -> None:
    """-n 2 against five -n 2 runs: which worker first meets an eager operation's shape
    differs each run (dm-pix: a test recompiled 24 times against 0, its most compiled
    function 5 times against 1); a per-call jax.jit is still found."""
    env = EnvHistory()
    for index in range(5):
        run = replace(_recompiling(0, index), repeats={SLOW: 1}, layout="xdist 2")
        add_run(env, replace(run, basis="wall"), 50)
        env.runs[-1].basis = "execution"
    run = replace(_recompiling(24, 5), repeats={SLOW: most}, layout="xdist 2")
    result = compare(run, env, Rule())
    assert result.recompiles.judged
    assert not result.recompiles.across
    assert [(r.current, r.baseline, r.of_one_function) for r in result.recompiles.found] == (
        [(most, 1, True)] if found else []
    )


def test_a_baseline_keeps_each_runs_time_compilation_and_recompilations(tmp_path: Path) -> None:
    env = EnvHistory()
    counted = replace(_compiling(run_of({SLOW: 1.0}, 0), 0.6), recompiles={SLOW: 4})
    add_run(env, replace(counted, repeats={SLOW: 3, FAST: 1}), 50)
    (tmp_path / "b.json").write_text(json.dumps(baseline_json(Baseline({"cpu/x1": env}))))
    data = json.loads((tmp_path / "b.json").read_text())
    run = data["envs"]["cpu/x1"]["runs"][0]
    assert run["recompiles"] == {SLOW: 4}
    assert run["repeats"] == {SLOW: 3}  # one compilation of each function is no repeat
    assert data["envs"]["cpu/x1"]["summary"]["revision"] == 2
    read = parse_baseline("b.json", data).envs["cpu/x1"].runs[0]
    assert read.recompiles == {SLOW: 4}
    assert read.repeats == {SLOW: 3}
    run["time"] = "cpu"
    with pytest.raises(Exception, match=r"b\.json: envs\['cpu/x1'\]\.runs\[0\]\.time: .*'cpu'"):
        parse_baseline("b.json", data)


def test_unittest_subtests_are_part_of_their_tests_call(pytester: pytest.Pytester) -> None:
    """A subtest's seconds are its test's call's; a failing one fails its test, and
    neither adds a row or an attempt."""
    pytester.makepyfile(
        test_sub="""
        import time
        import unittest

        class T(unittest.TestCase):
            def test_cases(self):
                for n in range(3):
                    with self.subTest(n=n):
                        time.sleep(0.01)

            def test_failing_case(self):
                for n in range(3):
                    with self.subTest(n=n):
                        assert n != 1

            def test_plain(self):
                pass
        """
    )
    pytester.runpytest("--perf-record=r.json")
    tests = record(pytester.path / "r.json")["tests"]
    names = ["test_cases", "test_failing_case", "test_plain"]
    assert tests["id"] == [f"test_sub.py::T::{name}" for name in names]
    assert tests["outcome"] == ["passed", "failed", "passed"]
    assert tests["call"][0] >= 0.03
    assert tests["attempts"] == {}


def test_compile_seconds_count_nested_steps_once_and_leave_full_collections_out() -> None:
    from pytest_accel.perf.compiles import covered_seconds

    # A trace of 1.0-3.0 s holding an inner trace of 1.5-2.0 s, then a compile of 4-5 s.
    spans = [(1.5, 2.0), (1.0, 3.0), (4.0, 5.0)]
    assert covered_seconds(spans) == pytest.approx(3.0)
    # A full collection of 0.25 s inside the compile, one of 1 s after it (not ours).
    assert covered_seconds(spans, [(4.5, 0.25), (6.0, 1.0)]) == pytest.approx(2.75)
    assert covered_seconds([]) == 0


def test_a_bad_perf_time_is_a_usage_error_naming_the_choices(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass")
    result = pytester.runpytest("--perf-record=r.json", "--perf-time=cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--perf-time: invalid choice 'cpu' (choose from execution, wall)*"]
    )


def test_a_run_laid_out_unlike_the_baseline_judges_no_group_and_says_so() -> None:
    """-n 2 on two cores against serial runs: compute-bound groups 2x, the others not.
    A class of three tests confirms its tests' findings; one of a single test cannot."""
    heavy = [SLOW, f"{SLOW}_2", f"{SLOW}_3"]
    groups = {**dict.fromkeys(heavy, ("t.py::TestHeavy", "t.py")), FAST: (None, "t.py")}
    env = EnvHistory()
    for index in range(8):
        wobble = WOBBLE[index % len(WOBBLE)]
        calls = {**dict.fromkeys(heavy, 0.4 * wobble), FAST: 0.3 * wobble}
        add_run(env, run_of(calls, index, groups=groups), 50)
    now = {**dict.fromkeys(heavy, 0.8), FAST: 0.3}
    run = replace(run_of(now, 8, groups=groups), layout="xdist 2")
    result = compare(run, env, Rule())
    assert (result.timing.layout, result.timing.baseline_layout) == ("xdist 2", "serial")
    assert [f.kind for f in result.timing.regressions] == ["test"] * 3  # their class moved too
    from pytest_accel.perf.output import terminal_rows

    assert any(
        row.text.startswith("layout: too few baseline runs laid out as this one (xdist 2; most")
        for row in terminal_rows(result, 20)
    )


@pytest.mark.requires("jax")
@pytest.mark.parametrize("runner", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.processes
def test_a_suite_that_imports_jax_in_a_test_is_counted_from_that_import(
    pytester: pytest.Pytester, runner: list[str]
) -> None:
    """The bundled example imports jax inside its tests: the first test's compilation
    is its own, not execution (it once read as a 1.7x regression "with 0.000s
    compiling beside it")."""
    pytester.makepyfile(
        test_lazy="""
        def test_before_jax():
            pass

        def test_imports_jax_and_compiles():
            import jax
            import jax.numpy as jnp

            jax.jit(lambda x: x * 3)(jnp.ones(3)).block_until_ready()

        def test_compiles():
            import jax
            import jax.numpy as jnp

            jax.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
        """
    )
    # Serially JAX must be imported in this run's own process (this one has it already);
    # under xdist the workers are fresh, and the controller never imports the tests.
    args = ("--perf-record=r.json", "-p", "no:randomly", *runner)
    if runner:
        run_serial_or_xdist(pytester, *args).assert_outcomes(passed=3)
    else:
        pytester.runpytest_subprocess(*args).assert_outcomes(passed=3)
    tests = record(pytester.path / "r.json")["tests"]
    for name in ("test_imports_jax_and_compiles", "test_compiles"):
        assert tests["compiles"][f"test_lazy.py::{name}"] >= 1
        assert tests["call_compile_seconds"][f"test_lazy.py::{name}"] > 0
    # Before jax was imported nothing was listening: no figure, not a measured 0.
    assert "test_lazy.py::test_before_jax" not in tests["compiles"]


@pytest.mark.processes
def test_jaxs_import_in_a_test_stays_that_tests_execution(pytester: pytest.Pytester) -> None:
    """Unlike torch.compile's Dynamo and Inductor, which the first compile imports on
    its own, ``import jax`` is the code's: where a test does it, it stays execution (the
    first test of a process, the usual place, is judged apart as the warm-up).  A fake
    jax whose import takes seconds."""
    import_seconds = 0.3
    (pytester.path / "jax").mkdir()
    (pytester.path / "jax" / "__init__.py").write_text(
        f"import time\ntime.sleep({import_seconds})\nfrom jax import monitoring\n"
    )
    (pytester.path / "jax" / "monitoring.py").write_text(
        "def register_event_duration_secs_listener(listener):\n    pass\n\n"
        "def register_event_listener(listener):\n    pass\n"
    )
    pytester.makepyfile(
        test_lazy="""
        def test_imports_jax():
            import jax

        def test_after():
            import jax
        """
    )
    pytester.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider").assert_outcomes(
        passed=2
    )
    tests = record(pytester.path / "r.json")["tests"]
    assert tests["call"][tests["id"].index("test_lazy.py::test_imports_jax")] >= import_seconds
    assert tests["compile_seconds"]["test_lazy.py::test_imports_jax"] < import_seconds


STUBBED_JAX = {
    "a module without a spec": "sys.modules['jax'] = types.ModuleType('jax')",
    "a MagicMock": "from unittest.mock import MagicMock\nsys.modules['jax'] = MagicMock()",
    "a monitoring whose register raises": (
        "monitoring = types.ModuleType('jax.monitoring')\n"
        "def register(listener):\n    raise RuntimeError('no listeners here')\n"
        "monitoring.register_event_duration_secs_listener = register\n"
        "monitoring.register_event_listener = register\n"
        "sys.modules['jax'] = types.ModuleType('jax')\n"
        "sys.modules['jax'].monitoring = monitoring\n"
        "sys.modules['jax.monitoring'] = monitoring"
    ),
    "a monitoring without unregister functions": (
        "monitoring = types.ModuleType('jax.monitoring')\n"
        "monitoring.register_event_duration_secs_listener = lambda listener: None\n"
        "monitoring.register_event_listener = lambda listener: None\n"
        "sys.modules['jax'] = types.ModuleType('jax')\n"
        "sys.modules['jax'].monitoring = monitoring\n"
        "sys.modules['jax.monitoring'] = monitoring"
    ),
}


@pytest.mark.parametrize("stub", list(STUBBED_JAX))
@pytest.mark.parametrize(
    "runner",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_a_conftest_that_stubs_jax_never_breaks_the_run(
    pytester: pytest.Pytester, stub: str, runner: list[str]
) -> None:
    pytester.makeconftest(f"import sys\nimport types\n{STUBBED_JAX[stub]}\n")
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass\n")
    result = pytester.runpytest_subprocess("--perf-record=r.json", *runner)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output
    assert "INTERNALERROR" not in output
    written = record(pytester.path / "r.json")
    assert (written["run"]["exitstatus"], len(written["tests"]["id"])) == (0, 2)
    if "raises" in stub or "spec" in stub:
        # One note, and the timings go on whole.
        notes = [line for line in output.splitlines() if "compilation: not measured" in line]
        assert len(notes) == 1, output


def test_compile_time_that_grew_is_reported_apart_and_is_no_alarm() -> None:
    from pytest_accel.perf.model.timings import judged_on
    from pytest_accel.perf.output import terminal_rows

    env = EnvHistory()
    for index in range(4):  # 1.0 s a run, 0.3 s of it compiling
        run = _compiling(run_of({SLOW: 1.0 * WOBBLE[index]}, index), 0.3)
        add_run(env, judged_on(run, "execution"), 50)
    grown = compare(_compiling(run_of({SLOW: 2.2}, 4), 1.5), env, Rule())
    assert grown.compilation is not None
    assert (grown.compilation.grew, grown.compilation.samples) == (True, 4)
    assert grown.compilation.baseline == pytest.approx(0.3)
    assert grown.alarms == 0  # execution 0.7 s as before; compiling is not an alarm
    assert (
        "COMPILE TIME suite: 1.5s compiling vs 0.3s (5.00x) in the 4 baseline run(s) of this layout"
        in [row.text for row in terminal_rows(grown, 20)]
    )
    same = compare(_compiling(run_of({SLOW: 1.0}, 4), 0.35), env, Rule())
    assert same.compilation is not None
    assert not same.compilation.grew


@pytest.mark.parametrize(
    ("now", "compiling", "found"),
    [
        (0.35, 4.3, False),  # a first use moved here: 0.33 s more beside 4.3 s compiling
        (0.8, 0.1, True),  # slower with next to no compiling: a finding
    ],
)
def test_under_xdist_a_slowdown_within_what_its_compiling_leaves_is_no_finding(
    now: float, compiling: float, found: bool
) -> None:
    """xdist hands tests to workers anew each run, so first uses (and the overhead
    compiling leaves outside its spans) move between tests of the same layout too."""
    env = EnvHistory()
    for index in range(5):
        wobble = WOBBLE[index % len(WOBBLE)]
        run = run_of({SLOW: 0.02 * wobble if compiling > 1 else 0.4 * wobble, FAST: 0.3}, index)
        add_run(env, replace(run, layout="xdist 2"), 50)
    run = replace(run_of({SLOW: now, FAST: 0.3}, 5), layout="xdist 2", compiling={SLOW: compiling})
    result = compare(run, env, Rule())
    assert [f.id for f in result.timing.regressions] == ([SLOW] if found else [])
    assert result.timing.unconfirmed == ([] if found else [SLOW])
    from pytest_accel.perf.output import terminal_rows

    if not found:
        assert any(
            row.text.startswith("order: xdist hands tests to workers anew each run; 1 test(s)")
            for row in terminal_rows(result, 20)
        )
