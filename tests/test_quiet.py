"""The comparison without numpy (``perf.analysis.quiet``) gives what the full comparison gives,
whenever it answers; and it steps aside whenever something could be a finding."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from pytest_accel.perf.analysis.changes import change_rule
from pytest_accel.perf.analysis.comparison import compare
from pytest_accel.perf.analysis.compilation import with_compilation
from pytest_accel.perf.analysis.layouts import scope_of
from pytest_accel.perf.analysis.quiet import quiet_comparison
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory, add_run, parse_baseline
from pytest_accel.perf.model.findings import Comparison
from pytest_accel.perf.model.timings import RunTimings
from pytest_accel.perf.offline import baseline_json
from tests.test_comparison import history, run_of

RULE = Rule()
FAST = {f"t_{i:03d}.py::test": 0.002 + 0.0001 * i for i in range(40)}


def as_read(env: EnvHistory) -> EnvHistory:
    """``env`` written and read back, as a run finds it: with its stored summary."""
    text = json.dumps(baseline_json(Baseline({"cpu/x1": env})))
    read = parse_baseline("b.json", json.loads(text)).envs["cpu/x1"]
    assert read.stored_summary() is not None
    return read


def both(run: RunTimings, env: EnvHistory, rule: Rule = RULE) -> tuple[Comparison, Comparison]:
    """The quiet comparison (which must answer) and the full one, of the same inputs."""
    read = as_read(env)
    quiet = quiet_comparison(run, read, rule, {}, new_slow=1.0, change_rule=change_rule(rule))
    assert quiet is not None, "the quiet comparison stepped aside"
    quiet = with_compilation(quiet, scope_of(run, read, rule.time, rule.min_samples))
    full = compare(run, env, rule)  # in memory: no stored summary, so numpy all the way
    return quiet, full


def scaled(calls: Mapping[str, float], factor: float) -> dict[str, float]:
    return {test: seconds * factor for test, seconds in calls.items()}


@pytest.mark.parametrize(
    ("case", "now", "runs"),
    [
        pytest.param("unchanged", FAST, 12, id="unchanged"),
        pytest.param("a tenth slower runner", scaled(FAST, 1.1), 12, id="slower-runner"),
        pytest.param("few runs", scaled(FAST, 1.1), 3, id="three-runs"),
        # Timed at 0.0 s in every run (faster than the clock): no level, None in the
        # summary, the ids still the baseline's in its order.
        pytest.param("a test at zero", {**FAST, "t_zero.py::test": 0.0}, 12, id="zero"),
    ],
)
def test_the_quiet_comparison_is_the_full_comparison(
    case: str, now: dict[str, float], runs: int
) -> None:
    env = history([{test: FAST.get(test, 0.0) for test in now}] * runs, warmup=True)
    quiet, full = both(run_of(now, 99, warmup=True), env)
    assert quiet.to_json() == full.to_json()
    assert len(quiet.timing.suite_history) == runs
    assert quiet.timing.compared == len(now)
    if case == "a tenth slower runner":
        assert quiet.timing.speed == pytest.approx(1.1, rel=0.02)
        assert quiet.timing.regressions == []  # below --perf-threshold: no suite finding


def test_a_third_slower_runner_is_the_runner_and_no_finding_either_way() -> None:
    """Every test a third slower alike: the runner, not the code (issue 37); the quiet
    comparison and the full one say the same, and both carry the speed."""
    env = history([FAST] * 12, warmup=True)
    run = run_of(scaled(FAST, 4 / 3), 99, warmup=True)
    quiet, full = both(run, env)
    assert full.timing.regressions == []
    assert full.timing.speed == pytest.approx(4 / 3, rel=0.02)
    assert quiet.to_json() == full.to_json()


def test_new_and_missing_tests_are_the_same_either_way() -> None:
    then = {"m.py::a": 0.002, "m.py::b": 0.003, **FAST}
    now = {"m.py::a": 0.002, "m.py::c": 0.004, **FAST}
    quiet, full = both(run_of(now, 99), history([then] * 8))
    assert (quiet.timing.new, quiet.timing.missing) == (["m.py::c"], ["m.py::b"])
    assert quiet.to_json() == full.to_json()


def test_a_suite_total_over_the_floors_is_left_to_the_full_comparison_which_finds_it() -> None:
    """Its noise is judged against the same tests' totals in each baseline run, which
    only the samples (numpy) give: the quiet comparison steps aside."""
    many = {f"t_{i:03d}.py::test": 0.05 for i in range(40)}  # each below min_duration
    env = history([many] * 12)
    # Half the tests 1.8x (each still under the floor), half as before: no one runner
    # speed explains it; the code moved, and only the total can show it.
    run = run_of({t: s * (1.8 if i % 2 else 1.0) for i, (t, s) in enumerate(many.items())}, 99)
    read = as_read(env)
    rule = RULE
    assert (
        quiet_comparison(run, read, rule, {}, new_slow=1.0, change_rule=change_rule(rule)) is None
    )
    full = compare(run, env, rule)
    assert [f.kind for f in full.timing.regressions] == ["session"]


def test_a_suite_slowed_by_its_own_processes_contention_or_a_slower_runner_is_no_finding() -> None:
    """chex under -n 2 on two cores against serial runs: every test 1.3-1.7x slower as
    the workers share the cores, and the suite total with them."""
    many = {f"t_{i:03d}.py::test": 0.05 for i in range(40)}
    env = history([many] * 12)
    slower = run_of(scaled(many, 1.4), 99)
    quiet, full = both(replace(slower, layout="xdist 2"), env)
    assert quiet.timing.speed == pytest.approx(1.4, rel=0.02)
    assert quiet.timing.regressions == []
    assert quiet.to_json() == full.to_json()
    full = compare(slower, env, RULE)  # the same layout: a slower runner, said once
    assert full.timing.regressions == []
    assert full.timing.speed == pytest.approx(1.4, rel=0.02)


def test_a_run_spread_unlike_the_baseline_names_both_layouts_either_way() -> None:
    env = history([FAST] * 6)
    run = replace(run_of(FAST, 99), layout="xdist 2")
    quiet, full = both(run, env)
    assert (quiet.timing.layout, quiet.timing.baseline_layout) == ("xdist 2", "serial")
    assert quiet.to_json() == full.to_json()


def test_a_single_slow_sample_in_the_history_does_not_wake_numpy() -> None:
    """A full collection or a noisy neighbour once made a fast test slow: its median is
    still far below the floor, and no step is in sight."""
    runs = [FAST] * 12
    runs[4] = {**FAST, "t_001.py::test": 0.4}
    quiet, full = both(run_of(FAST, 99), history(runs))
    assert quiet.to_json() == full.to_json()


def unanswered(run: RunTimings, env: EnvHistory, rule: Rule = RULE) -> bool:
    read = as_read(env)
    found = quiet_comparison(run, read, rule, {}, new_slow=1.0, change_rule=change_rule(rule))
    return found is None


def test_a_test_at_the_floor_now_or_as_a_median_is_left_to_the_full_comparison() -> None:
    assert unanswered(run_of({**FAST, "t_001.py::test": 0.1}, 99), history([FAST] * 12))
    slow_before = {**FAST, "t_001.py::test": 0.3}
    assert unanswered(run_of(FAST, 99), history([slow_before] * 12))
    # Slow for the last three runs: a step the screen cannot rule out.
    assert unanswered(run_of(slow_before, 99), history([FAST] * 9 + [slow_before] * 2))


def test_a_step_in_the_runners_speed_is_left_to_the_full_comparison() -> None:
    then = {f"t_{i:03d}.py::test": 0.05 for i in range(40)}
    env = history([then] * 12 + [scaled(then, 1.5)] * 2)
    assert unanswered(run_of(scaled(then, 1.5), 99), env)
    result = compare(run_of(scaled(then, 1.5), 99), as_read(env), Rule())
    assert [(c.kind, c.runs) for c in result.timing.changes] == [("session", 3)]


def test_a_rule_the_summary_was_not_made_for_is_left_to_the_full_comparison() -> None:
    assert unanswered(run_of(FAST, 99), history([FAST] * 6), Rule(spread="mad"))
    assert not unanswered(run_of(FAST, 99), history([FAST] * 6), Rule(min_duration=0.5))


def test_a_summary_left_behind_by_an_edit_of_the_runs_is_not_used() -> None:
    env = as_read(history([FAST] * 6))
    env.runs.pop(0)  # what a hand edit or an older tool could leave
    assert env.stored_summary() is None
    data: Any = baseline_json(Baseline({"cpu/x1": env}))
    assert data["envs"]["cpu/x1"]["summary"]["runs"] == 5  # written afresh


def test_a_suites_tracing_is_left_to_the_full_comparison_where_its_sum_can_be_a_finding() -> None:
    """JAX tracing is judged summed over modules and the suite (issue 37): tests each
    tracing under the floor can add up to a finding, so the quiet comparison answers only
    where the sum stays under it, and then as the full comparison does."""

    def traced(calls: Mapping[str, float], seconds: float, index: int) -> RunTimings:
        return replace(run_of(calls, index), tracing=dict.fromkeys(calls, seconds))

    env = EnvHistory()
    for index in range(5):
        add_run(env, traced(FAST, 0.001, index), 50)
    quiet, full = both(traced(FAST, 0.001, 5), env)
    assert quiet.to_json() == full.to_json()
    assert quiet.tracing.judged
    assert unanswered(traced(FAST, 0.01, 5), env)  # 40 tests: 0.4 s of tracing in all
