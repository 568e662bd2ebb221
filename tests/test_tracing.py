"""JAX tracing judged as a kind of its own (issue 37): a test's seconds of tracing its
Python, and their sums over each module and the suite, against the baseline's runs of
the run's layout; tracing that merely moved to another test is no finding."""

from __future__ import annotations

import json
from dataclasses import replace
from math import isnan
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.perf.analysis.comparison import compare
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory, add_run, parse_baseline
from pytest_accel.perf.model.findings import Comparison
from pytest_accel.perf.model.timings import RunTimings, without_waits
from pytest_accel.perf.offline import baseline_json
from pytest_accel.perf.output import terminal_rows
from tests.jax_runs import run_jax_suite
from tests.test_comparison import WOBBLE, run_of

MODULE = "m.py"
TESTS = [f"{MODULE}::test_{n:02d}" for n in range(30)]
GROUPS = dict.fromkeys(TESTS, (None, MODULE))
OTHER = "o.py::test_other"


def _run(tracing: dict[str, float], index: int, layout: str = "serial") -> RunTimings:
    """Run ``index``: every test executes for 0.2 s and traces as ``tracing`` says,
    both wobbling by up to 3%."""
    wobble = WOBBLE[index % len(WOBBLE)]
    calls = {**dict.fromkeys(TESTS, 0.2 * wobble), OTHER: 0.2 * wobble}
    run = run_of(calls, index, groups={**GROUPS, OTHER: (None, "o.py")})
    traced = {test: seconds * wobble for test, seconds in tracing.items()}
    return replace(run, tracing=traced, layout=layout)


def _judged(
    baseline: dict[str, float], now: dict[str, float], runs: int = 5, layout: str = "serial"
) -> Comparison:
    env = EnvHistory()
    for index in range(runs):
        add_run(env, _run(baseline, index, layout), 50)
    return compare(_run(now, runs, layout), env, Rule())


def _texts(result: Comparison) -> list[str]:
    return [row.text for row in terminal_rows(result, 50)]


USUAL = {**dict.fromkeys(TESTS, 0.01), OTHER: 0.02}


def test_a_test_whose_tracing_grew_is_a_tracing_regression_and_its_execution_is_not() -> None:
    result = _judged(USUAL, {**USUAL, OTHER: 0.4})
    assert [(f.kind, f.id, f.tracing) for f in result.timing.regressions] == [("test", OTHER, True)]
    assert result.tracing.judged
    assert any(
        text.startswith(f"REGRESSION test {OTHER} tracing: 0.4") and "vs baseline 0.02" in text
        for text in _texts(result)
    )
    assert result.to_json()["regressions"][0]["tracing"] is True
    assert result.alarms == 1  # what --perf-fail, the warnings and the summary count


def test_under_xdist_only_the_sums_of_tracing_are_judged() -> None:
    """xdist hands tests to workers anew each run: which test traces a shared function
    first in its worker moves, so a test's tracing is no finding there; its module's
    sum is."""
    result = _judged(USUAL, {**USUAL, OTHER: 0.4}, layout="xdist 2")
    assert [(f.kind, f.id, f.tracing) for f in result.timing.regressions] == [
        ("module", "o.py", True)
    ]
    assert result.timing.regressions[0].movers[0][0] == OTHER


def test_many_tests_tracing_a_little_longer_each_are_found_at_their_module() -> None:
    """12 of the module's 30 tests each 25 ms slower to trace (a function they call
    while JAX traces them): every one under the floor, 0.3 s in all."""
    slower = {**USUAL, **dict.fromkeys(TESTS[:12], 0.035)}
    result = _judged(USUAL, slower)
    found = [(f.kind, f.id, f.tracing) for f in result.timing.regressions]
    assert found == [("module", MODULE, True)]  # the suite's shift is the module's
    module = result.timing.regressions[0]
    assert len(module.movers) == 3
    assert all(test in TESTS[:12] for test, _ in module.movers)
    assert any(
        text.startswith(f"REGRESSION module {MODULE} tracing: ") and "moved most: m.py::" in text
        for text in _texts(result)
    )


@pytest.mark.parametrize(
    ("then", "now"),
    [(0.4, 0.4), (0.12, 0.3)],  # the second: traced 2.5x slower on a busy runner
)
def test_tracing_that_moved_to_another_test_is_no_finding_and_is_said(
    then: float, now: float
) -> None:
    """A shared function traced first by another test after a reorder."""
    before = {**USUAL, TESTS[0]: then}
    after = {**USUAL, TESTS[1]: now}
    result = _judged(before, after)
    assert [f for f in result.timing.regressions if f.tracing] == []
    assert result.tracing.moved == [TESTS[0], TESTS[1]]  # the one that fell, the one that rose
    assert any(text.startswith("tracing: 2 test(s) or module(s) traced") for text in _texts(result))


def test_tracing_that_moved_to_a_test_on_a_quicker_runner_is_no_improvement() -> None:
    """The baseline's runs traced the shared function in 0.12 s on a loaded runner;
    this run, quicker, traces it in the test it moved to, 0.045 s more than before: a
    rise under the floor of a finding on its own (CI saw 0.101 s fall to nothing this
    way), but the other side of the fall, so not an improvement."""
    before = {**USUAL, TESTS[0]: 0.12}
    after = {**USUAL, TESTS[1]: 0.055}
    result = _judged(before, after)
    assert result.timing.improvements == []
    assert result.tracing.moved == [TESTS[0]]  # the finding set aside


@pytest.mark.parametrize("runner", [1.0, 1.4])
def test_a_steady_suite_has_no_tracing_finding_on_a_quiet_or_a_busy_runner(
    runner: float,
) -> None:
    """On a busy runner every test traces 1.4x slower: the runner's speed, not a
    finding of the module or the suite."""
    result = _judged(USUAL, {test: seconds * runner for test, seconds in USUAL.items()})
    assert result.tracing.judged
    assert result.timing.regressions == result.timing.improvements == []
    assert result.tracing.moved == []


def test_tracing_is_not_judged_against_runs_of_another_layout_and_that_is_said() -> None:
    env = EnvHistory()
    for index in range(5):
        add_run(env, _run(USUAL, index), 50)
    compiled = replace(_run({**USUAL, OTHER: 0.4}, 5, "xdist 2"), compiling={OTHER: 0.5})
    result = compare(compiled, env, Rule())
    assert not result.tracing.judged
    assert [f for f in result.timing.regressions if f.tracing] == []
    assert any(
        text.startswith("tracing: not judged; too few baseline runs") for text in _texts(result)
    )


def test_a_short_trace_keeps_a_millisecond_once_its_wait_is_out_and_its_slowdown_is_found() -> None:
    """The wait taken out of a trace is all the wait since the clock's last reading
    that could lie in it: on a busy runner, all of a short trace.  At 0 it was one
    sample among three that, in log seconds, hid a trace 300 times slower."""

    def waited(run: RunTimings, trace_waits: dict[str, float]) -> RunTimings:
        return without_waits(replace(run, tracing_waits=trace_waits), [0.0] * len(run.ids))

    kept = waited(
        _run({OTHER: 0.05, TESTS[0]: 0.0009, TESTS[1]: 0.05}, 0),
        {
            OTHER: 0.06,  # more than the trace: a millisecond is kept
            TESTS[0]: 0.004,  # a trace under a millisecond keeps itself
            TESTS[1]: 0.02,
        },
    ).tracing
    assert kept == {OTHER: 0.001, TESTS[0]: 0.0009, TESTS[1]: 0.03}
    env = EnvHistory()
    for index in range(3):  # the rule's fewest runs, the first on a busy runner
        trace_waits = {OTHER: 0.004} if index == 0 else {}
        add_run(env, waited(_run({**USUAL, OTHER: 0.0009}, index), trace_waits), 50)
    result = compare(_run({**USUAL, OTHER: 0.3}, 3), env, Rule())
    assert [(f.id, f.tracing) for f in result.timing.regressions] == [(OTHER, True)]


def test_the_baseline_file_keeps_the_tracing_of_a_jax_suite_and_writes_none_without_jax(
    tmp_path: Path,
) -> None:
    env, plain = EnvHistory(), EnvHistory()
    for index in range(2):
        add_run(env, _run(USUAL, index), 50)
        add_run(plain, run_of({OTHER: 0.2}, index), 50)
    path = tmp_path / "b.json"
    data: dict[str, Any] = baseline_json(Baseline({"jax": env, "plain": plain}, window=50))
    path.write_text(json.dumps(data))
    assert data["envs"]["jax"]["trace"] == [*TESTS, OTHER]
    assert "trace" not in data["envs"]["plain"]
    assert "trace" not in data["envs"]["plain"]["runs"][0]
    read = parse_baseline(str(path), json.loads(path.read_text()))
    ids, samples = read.envs["jax"].matrix("trace")
    assert ids == [*TESTS, OTHER]
    assert samples.shape == (31, 2)
    assert abs(float(samples[-1, 0]) - 0.02) < 1e-9


TRACED = """
import os
import time

import jax
import jax.numpy as jnp


def helper(x):
    time.sleep(float(os.environ.get("TRACE_SLEEP", "0")))  # runs while JAX traces
    return x * 2


@pytest.mark.parametrize("n", range({count}))
def test_traces(n):
    jax.jit(lambda x: helper(x) + n)(jnp.ones(4)).block_until_ready()
"""


@pytest.mark.requires("jax")
def test_python_made_slower_while_jax_traces_is_reported_as_tracing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end on JAX: a sleep committed into a function the tests call while JAX
    traces it is each test's tracing, not its execution."""
    pytester.makepyfile(test_first="def test_first():\n    pass\n")
    pytester.makepyfile(test_traced="import pytest\n" + TRACED.format(count=4))
    monkeypatch.delenv("TRACE_SLEEP", raising=False)
    for _ in range(3):
        run_jax_suite(
            pytester, "--perf-baseline=b.json", "--perf-update-baseline", "-p", "no:randomly"
        ).assert_outcomes(passed=5)
    stored = json.loads((pytester.path / "b.json").read_text())
    assert len(stored["envs"]["cpu/x1"]["trace"]) == 4  # test_first is the warm-up
    # On a runner at a load of 8 on two cores, XLA's own threads wait for a CPU too, which
    # the tests' thread's clock does not see: each test's execution read 30-40 ms more,
    # and their module's 0.1 s. Such a move is the runner's, below the floor here; a
    # 0.6 s sleep taken for execution rather than tracing would be far above it.
    monkeypatch.setenv("TRACE_SLEEP", "0.6")
    result = run_jax_suite(
        pytester,
        "--perf-baseline=b.json",
        "--perf-record=r.json",
        "--perf-fail",
        "--perf-min-delta=0.3",
        "-p",
        "no:randomly",
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["REGRESSION test test_traced.py::test_traces[[]*[]] tracing: *"])
    comparison = json.loads((pytester.path / "r.json").read_text())["comparison"]
    traced = [f for f in comparison["regressions"] if f.get("tracing")]
    assert len(traced) >= 3  # the 4 tests, or their module where it explains them
    # The sleep, less the share of the call's CPU wait charged to tracing on a busy runner.
    assert all(f["current"] > 2 * f["baseline"] for f in traced)
    # A sleep taken for execution would be each test's: 0.6 s, beyond the 0.3 s floor.
    assert not [
        f for f in comparison["regressions"] if not f.get("tracing") and f["kind"] == "test"
    ]
    # Their module sums the four tests' execution, which a loaded runner moves by 0.1-0.2 s
    # each (XLA's threads wait, unseen by the test's clock): it may be flagged for that,
    # never for the sleeps (2.4 s).
    execution = [f for f in comparison["regressions"] if not f.get("tracing")]
    assert all(f["current"] - f["baseline"] < 1.2 for f in execution), execution


def test_a_change_of_tracing_is_named_and_accepted_like_one_of_execution(tmp_path: Path) -> None:
    from pytest_accel.cli import main

    env = EnvHistory()
    for index in range(8):
        slower = index >= 5  # a slower trace committed in run 5, 3 runs ago
        add_run(env, _run({**USUAL, OTHER: 0.4 if slower else 0.02}, index), 50)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(baseline_json(Baseline({"cpu/x1": env}, window=50))))
    assert main(["baseline", "--accept", OTHER, "--into", str(path)]) == 0
    accepted = json.loads(path.read_text())["envs"]["cpu/x1"]["accepted"]
    assert [(a["id"], a["tracing"], a["since"]["commit"]) for a in accepted] == [
        (OTHER, True, "c5")
    ]
    read = parse_baseline(str(path), json.loads(path.read_text())).envs["cpu/x1"]
    ids, samples = read.matrix("trace")
    kept = samples[ids.index(OTHER)].tolist()
    assert [isnan(value) for value in kept] == [True] * 5 + [False] * 3  # before it: gone


@pytest.mark.parametrize(
    ("waited", "measured", "moved"), [(0.0, False, False), (0.7, False, True), (0.7, True, False)]
)
def test_on_a_busy_runner_a_move_may_trace_slower_by_as_much_as_its_waits_say(
    waited: float, measured: bool, moved: bool
) -> None:
    """The shared function traced 4x as long by the test it moved to: more than a quiet
    runner explains, and what one whose calls waited 70% of their time for a CPU does
    (the waits are taken out of the tracing only in proportion to its call).  The test
    it left traced it under the floor: no improvement, only the rise is a finding.  A run
    that measured the wait within each trace took it out already: no allowance."""
    env = EnvHistory()
    for index in range(5):
        add_run(env, _run({**USUAL, TESTS[0]: 0.09}, index), 50)
    now = _run({**USUAL, TESTS[1]: 0.35}, 5)
    share_waited = waited * sum(now.call) / (1 - waited)  # the seconds of that share
    within = {TESTS[1]: 0.0} if measured else None
    result = compare(replace(now, cpu_wait=share_waited, tracing_waits=within), env, Rule())
    assert result.load.calls_share == pytest.approx(waited)
    regressions = [f.id for f in result.timing.regressions if f.tracing]
    assert (regressions, result.tracing.moved) == (
        ([], [TESTS[1]]) if moved else ([TESTS[1]], [])  # the one that fell was no finding
    )


def test_a_fall_that_is_a_finding_does_not_hide_a_rise_far_past_it() -> None:
    """One test stopped tracing 0.4 s and another traces 4 s it never did: the fall
    matched by a rise is not the rise explained (at most 1/MOVED_SHARE of it)."""
    result = _judged({**USUAL, TESTS[0]: 0.4}, {**USUAL, TESTS[1]: 4.0})
    assert result.tracing.moved == []
    assert [f.id for f in result.timing.regressions if f.tracing] == [TESTS[1]]
    assert [f.id for f in result.timing.improvements if f.tracing] == [TESTS[0]]
