"""The change detector on hand-made series: a step, a spike, a drift, an outlier pair, a
short history, an improvement, the floors, missing runs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from pytest_accel.perf.analysis.changes import ChangeRule, Steps, find_steps
from pytest_accel.perf.analysis.rule import LOG_FLOOR

# A fixed +-3% wobble, so every series is the same on every machine.
WOBBLE = (1.00, 1.03, 0.98, 1.01, 0.97, 1.02, 0.99, 1.03, 0.97, 1.00)


def series(*levels: tuple[float, int]) -> list[float]:
    """``(seconds, runs)`` pieces, oldest first, each run wobbling by up to 3%."""
    values: list[float] = []
    for seconds, runs in levels:
        values += [seconds * WOBBLE[(len(values) + i) % len(WOBBLE)] for i in range(runs)]
    return values


def steps(*rows: Sequence[float], rule: ChangeRule | None = None) -> Steps:
    width = max(len(row) for row in rows)
    matrix = np.full((len(rows), width), np.nan)
    for index, row in enumerate(rows):
        matrix[index, width - len(row) :] = row  # a shorter row lacks the oldest runs
    return find_steps(matrix, rule or ChangeRule())


def test_a_step_that_holds_for_three_runs_is_a_change_with_its_levels_and_length() -> None:
    found = steps(series((1.0, 20), (2.0, 3)))
    assert found.found.tolist() == [True]
    assert found.runs.tolist() == [3]
    assert found.before[0] == pytest.approx(1.0, rel=0.03)
    assert found.after[0] == pytest.approx(2.0, rel=0.03)


def test_an_older_step_is_dated_at_the_run_where_it_began() -> None:
    assert steps(series((1.0, 20), (2.0, 6))).runs.tolist() == [6]


def test_two_runs_at_a_new_level_are_not_yet_a_change() -> None:
    # One or two slow runs are the single-run rule's business.
    assert not steps(series((1.0, 20), (2.0, 2))).found.any()


def test_an_improvement_is_found_like_a_slowdown() -> None:
    found = steps(series((2.0, 20), (1.0, 4)))
    assert found.found.tolist() == [True]
    assert found.runs.tolist() == [4]
    assert found.after[0] < found.before[0]


def test_a_one_run_spike_is_not_a_change() -> None:
    history = series((1.0, 22))
    history[19] *= 2.0  # three runs ago, followed by two runs at the old level
    assert not steps(history).found.any()


def test_an_outlier_pair_next_to_a_run_at_the_old_level_is_not_a_change() -> None:
    history = series((1.0, 20))
    assert not steps([*history, 3.0, 3.0, 1.0]).found.any()
    assert not steps([*history, 3.0, 1.0, 3.0]).found.any()


def test_outliers_in_the_history_neither_hide_a_step_nor_make_one() -> None:
    history = series((1.0, 20))
    history[4] = history[11] = 3.0  # two 3x runs earlier on
    assert not steps([*history, 1.02, 0.99, 1.01]).found.any()
    found = steps([*history, 2.0, 2.06, 1.96])
    assert found.found.tolist() == [True]
    assert found.before[0] == pytest.approx(1.0, rel=0.05)


def test_a_slow_drift_is_not_a_step() -> None:
    drift = [value * 1.005**index for index, value in enumerate(series((1.0, 25)))]
    assert not steps(drift).found.any()


def test_a_short_history_names_a_large_step_on_its_third_run() -> None:
    """A baseline of the 3 runs docs/ci.md builds and slowed runs folded in: 2x is a
    change of 3 runs; two slowed runs are not one yet (a spike and an outlier are two
    slow runs too); 1.25x is too little evidence against the short tier's 15% spread
    floor; one slow run is no change; a long history still needs 3 runs."""
    found = steps(
        series((1.0, 3), (2.0, 3)),
        series((1.0, 3), (2.0, 2)),
        series((1.0, 3), (1.25, 3)),
        series((1.0, 4), (2.0, 1)),
        series((1.0, 2), (2.0, 3)),  # fewer than short_before runs before it
        series((1.0, 4), (2.0, 3)),
        series((1.0, 20), (2.0, 2)),
    )
    assert found.found.tolist() == [True, False, False, False, False, True, False]
    assert found.runs.tolist() == [3, 0, 0, 0, 0, 3, 0]


def test_a_spike_followed_by_an_outlier_is_not_a_change_of_a_short_history() -> None:
    base = series((1.0, 3))
    assert not steps([*base, 2.0, 3.0]).found.any()
    assert not steps([*base, 2.0, 3.0, 1.0]).found.any()
    assert not steps([*base, 2.0, 1.0, 3.0]).found.any()


def test_a_row_without_this_run_is_never_a_change() -> None:
    assert not steps([*series((1.0, 20), (2.0, 2)), float("nan")]).found.any()


def test_missing_runs_in_the_middle_are_skipped_not_read_as_zero() -> None:
    history = series((1.0, 20), (2.0, 3))
    history[5] = history[15] = float("nan")
    assert steps(history).runs.tolist() == [3]


def test_tiny_tests_are_held_to_the_single_run_rules_floors() -> None:
    # 3 ms -> 6 ms doubles, but is under min_duration and min_delta.
    assert not steps(series((0.003, 20), (0.006, 5))).found.any()
    # 0.2 s -> 0.23 s is under the 1.2x threshold, however clear.
    assert not steps(series((0.2, 20), (0.23, 5))).found.any()


def test_a_noisy_test_needs_more_evidence_than_a_quiet_one() -> None:
    rng = np.random.default_rng(3)
    noisy = np.exp(0.3 * rng.standard_normal(23))
    noisy[-3:] *= 1.3  # +30% under 30% noise: not three runs' worth of evidence
    quiet = np.array(series((1.0, 20), (1.3, 3)))
    assert steps(noisy.tolist(), quiet.tolist()).found.tolist() == [False, True]


def test_the_rule_is_tunable() -> None:
    strict = ChangeRule(t=50.0)
    assert not steps(series((1.0, 20), (2.0, 3)), rule=strict).found.any()
    one_run = ChangeRule(min_runs=1, min_before=5)
    assert steps(series((1.0, 20), (2.0, 1)), rule=one_run).runs.tolist() == [1]


def test_zero_seconds_do_not_disturb_the_search_for_the_other_rows() -> None:
    # Timings that round to 0.0 s (a coarse clock) are logged at LOG_FLOOR, never -inf:
    # no warning (the suite runs with -W error), and the row beside them is judged as
    # it would be alone.
    assert np.log(LOG_FLOOR) > -np.inf
    found = steps([0.0] * 8 + series((0.5, 3)), series((1.0, 8), (2.0, 3)))
    alone = steps(series((1.0, 8), (2.0, 3)))
    assert found.found[1] == alone.found[0]
    assert found.after[1] == alone.after[0]
    assert found.runs[1] == alone.runs[0] == 3


def test_a_test_that_always_takes_zero_seconds_never_changes() -> None:
    found = steps([0.0] * 12)
    assert not found.found.any()
    assert found.runs.tolist() == [0]


@pytest.mark.parametrize("min_duration", [0.1, 0.02, 1e-7])
def test_rows_never_at_the_duration_floor_are_left_out_without_changing_what_is_found(
    min_duration: float,
) -> None:
    """``find_steps`` searches only the rows whose largest sample reaches the floor: on
    2,000 rows of steps, spikes, drifts and gaps around it, what it finds is what the
    search of every row finds."""
    from pytest_accel.perf.analysis.changes import _find_steps

    generator = np.random.default_rng(7)
    rows, width = 2000, 21
    levels = generator.choice([0.001, 0.03, 0.06, 0.09, 0.12, 0.5], size=(rows, 1))
    shape = np.ones((rows, width))
    begins = generator.integers(5, width - 1, size=rows)
    factor = generator.choice([0.4, 1.0, 1.6, 3.0], size=rows)
    shape[np.arange(width)[None, :] >= begins[:, None]] = np.repeat(factor, width)[
        (np.arange(width)[None, :] >= begins[:, None]).ravel()
    ]
    matrix = levels * shape * generator.uniform(0.9, 1.1, size=(rows, width))
    matrix[generator.random((rows, width)) < 0.05] = np.nan  # runs that lacked a test
    rule = ChangeRule(min_duration=min_duration)
    screened, every = find_steps(matrix, rule), _find_steps(matrix, rule)
    assert every.found.sum() > 100  # steps both below and above the floor
    assert screened.found.tolist() == every.found.tolist()
    assert screened.runs.tolist() == every.runs.tolist()
    np.testing.assert_array_equal(screened.before, every.before)
    np.testing.assert_array_equal(screened.after, every.after)
