"""The runner-speed estimate on hand-made arrays: it applies only where the tests agree,
and a step all tests took together is not a change of each test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_accel.perf.analysis.changes import ChangeRule, find_steps
from pytest_accel.perf.analysis.speed import (
    MIN_FOR_SPEED,
    column_speeds,
    current_speed,
    current_speed_of_arrays,
    log_centres,
    runner_speed,
    runner_speed_of_arrays,
    unexplained_steps,
)


def medians(count: int = 100, seed: int = 0) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).uniform(np.log(0.01), np.log(2.0), count))


def test_a_run_where_every_test_is_a_third_slower_has_speed_one_point_three_three() -> None:
    base = medians()
    speed = runner_speed(base * 4 / 3, base, np.full(base.size, 0.02))
    assert speed == pytest.approx(4 / 3)


def test_a_faster_runner_gives_a_speed_below_one() -> None:
    base = medians()
    speed = runner_speed(base * 0.8, base, np.full(base.size, 0.02))
    assert speed == pytest.approx(0.8)


def test_a_speed_within_two_percent_of_one_is_not_applied() -> None:
    base = medians()
    assert runner_speed(base * 1.01, base, np.full(base.size, 0.02)) is None


def test_too_few_tests_give_no_speed() -> None:
    base = medians(MIN_FOR_SPEED - 1)
    assert runner_speed(base * 1.5, base, np.full(base.size, 0.02)) is None


def test_enough_tests_with_a_zero_or_missing_median_still_need_twenty_usable_ones() -> None:
    base = medians(MIN_FOR_SPEED + 5)
    base[:10] = 0.0  # never measured: no ratio to take
    assert runner_speed(base * 1.5, base, np.full(base.size, 0.02)) is None
    base = medians(MIN_FOR_SPEED + 5)
    assert runner_speed(base * 1.5, base, np.full(base.size, 0.02)) == pytest.approx(1.5)


def test_tests_split_in_two_camps_give_no_single_speed() -> None:
    # Half the tests twice as fast (a warm compile cache), half unchanged: no one speed.
    base = medians()
    current = base.copy()
    current[::2] *= 0.5
    current[1::2] *= 1.2
    assert runner_speed(current, base, np.full(base.size, 0.02)) is None


def test_noisy_tests_widen_the_band_they_agree_within() -> None:
    rng = np.random.default_rng(1)
    base = medians()
    scatter = np.exp(rng.normal(0.0, 0.25, base.size))
    current = base * 1.3 * scatter
    # Quiet tests (2% spread, the 10% floor): too few agree with any one estimate.
    assert runner_speed(current, base, np.full(base.size, 0.02)) is None
    # Their own spreads say they are this noisy: most agree, and the speed applies.
    speed = runner_speed(current, base, np.full(base.size, 0.25))
    assert speed is not None
    assert speed == pytest.approx(1.3, rel=0.1)


def test_a_missing_spread_counts_as_the_narrowest_band() -> None:
    base = medians()
    noise = np.full(base.size, np.nan)
    assert runner_speed(base * 1.25, base, noise) == pytest.approx(1.25)


def run_speeds(series: np.ndarray) -> np.ndarray | None:
    """Each run's speed in ``series`` (tests x runs, the last column this run), as the
    comparison takes them: the baseline's runs and this one against the tests' levels
    over the baseline's runs."""
    if series.shape[0] < MIN_FOR_SPEED or not series.size:
        return None
    baseline = series[:, :-1]
    levels = log_centres(baseline)
    now = current_speed(series[:, -1].tolist(), levels.tolist())
    return np.array([*column_speeds(baseline, levels), now])


def series_with_speeds(speeds: list[float], tests: int = 60, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Half a second to three: every test long enough for a step to count (min_duration).
    levels = np.exp(rng.uniform(np.log(0.5), np.log(3.0), tests))[:, None]
    noise = np.exp(rng.normal(0.0, 0.01, (tests, len(speeds))))
    result: np.ndarray = levels * np.asarray(speeds)[None, :] * noise
    return result


def test_each_runs_speed_is_its_tests_median_ratio_to_their_own_median() -> None:
    speeds = run_speeds(series_with_speeds([1.0, 1.0, 1.0, 1.5, 1.0, 1.0]))
    assert speeds is not None
    assert speeds[3] / np.median(speeds) == pytest.approx(1.5, rel=0.03)
    assert speeds[0] == pytest.approx(1.0)  # within 2% of the series' own level: 1


def test_a_run_with_fewer_than_twenty_tests_sampled_has_speed_one() -> None:
    series = series_with_speeds([1.0, 1.0, 1.6, 1.0])
    series[MIN_FOR_SPEED - 5 :, 2] = np.nan  # the third run sampled only 15 tests
    speeds = run_speeds(series)
    assert speeds is not None
    assert speeds[2] == 1.0


def test_a_series_of_too_few_tests_has_no_speeds() -> None:
    assert run_speeds(series_with_speeds([1.0, 1.4], tests=MIN_FOR_SPEED - 1)) is None
    assert run_speeds(np.zeros((MIN_FOR_SPEED, 0))) is None


def test_zero_seconds_are_left_out_of_the_speed_not_taken_as_infinitely_fast() -> None:
    series = series_with_speeds([1.0, 1.0, 1.0, 1.0, 1.0])
    series[:5, 4] = 0.0
    speeds = run_speeds(series)
    assert speeds is not None
    assert np.all(np.isfinite(speeds))
    assert speeds[4] == pytest.approx(1.0)


RULE = ChangeRule(min_runs=3)


def test_a_step_every_test_took_with_the_runner_is_explained_away() -> None:
    # Runs 6.. on a machine 1.5x slower: every test's series steps, and so do the speeds.
    series = series_with_speeds([1.0] * 6 + [1.5] * 6)
    measured_only = unexplained_steps(series, RULE, None)
    assert measured_only.found.all()  # seen as measured, each test stepped
    steps = unexplained_steps(series, RULE, run_speeds(series))
    assert not steps.found.any()
    assert np.all(steps.runs == 0)
    assert np.all(np.isnan(steps.before))
    assert np.all(np.isnan(steps.after))


def test_a_test_that_stepped_on_its_own_is_still_found_and_its_levels_are_as_measured() -> None:
    series = series_with_speeds([1.0] * 12)
    series[7, 6:] *= 2.0
    speeds = run_speeds(series)
    steps = unexplained_steps(series, RULE, speeds)
    assert np.flatnonzero(steps.found).tolist() == [7]
    assert steps.runs[7] == 6
    assert steps.after[7] / steps.before[7] == pytest.approx(2.0, rel=0.05)
    assert steps.before[7] == pytest.approx(float(np.median(series[7, :6])), rel=0.02)


def test_a_test_that_slowed_against_a_runner_that_sped_up_is_not_found_backwards() -> None:
    # The runner got 1.6x faster at run 6 and this test 1.6x slower as measured: with
    # the speed divided out it slowed 2.56x; both agree it slowed, so it is found.
    speeds_given = [1.0] * 6 + [1 / 1.6] * 6
    series = series_with_speeds(speeds_given)
    series[3, 6:] *= 1.6 * 1.6
    steps = unexplained_steps(series, RULE, run_speeds(series))
    assert steps.found[3]
    assert steps.after[3] > steps.before[3]
    assert math.isclose(steps.after[3] / steps.before[3], 1.6, rel_tol=0.05)


def test_only_the_steps_found_as_measured_are_searched_again_with_the_speeds_out() -> None:
    # Every row is searched on its own, so searching only the rows found as measured
    # must give what searching every row gives: measured, corrected, the same way.
    series = series_with_speeds([1.0] * 6 + [1.3] * 6, tests=80, seed=5)
    series[3, 8:] *= 2.0
    series[11, 5:] /= 2.0
    series[40, 6:] *= 1.3  # with the runner: explained away
    speeds = run_speeds(series)
    assert speeds is not None
    measured, corrected = find_steps(series, RULE), find_steps(series / speeds[None, :], RULE)
    same_way = np.sign(measured.after - measured.before) == np.sign(
        corrected.after - corrected.before
    )
    expected = measured.found & corrected.found & same_way
    steps = unexplained_steps(series, RULE, speeds)
    assert expected.any()
    assert steps.found.tolist() == expected.tolist()
    assert steps.runs.tolist() == np.where(expected, measured.runs, 0).tolist()
    assert np.array_equal(steps.before, np.where(expected, measured.before, np.nan), equal_nan=True)


@pytest.mark.parametrize("count", [MIN_FOR_SPEED + 2, 301, 400])  # some too few, even, odd
@pytest.mark.parametrize("scale", [1.0, 0.8, 1.3])
@pytest.mark.parametrize("holes", [False, True])
def test_the_speeds_over_arrays_are_the_speeds_over_lists_to_the_last_bit(
    count: int, scale: float, holes: bool
) -> None:
    # The full comparison takes numpy's way, the quiet one the lists' way: one number.
    rng = np.random.default_rng(count)
    then = medians(count, seed=count)
    now = then * scale * np.exp(rng.normal(0.0, 0.05, count))
    noise = rng.uniform(0.0, 0.3, count)
    if holes:  # no sample now, none before, no spread known
        for values in (now, then, noise):
            values[rng.choice(count, count // 10, replace=False)] = np.nan
    now[:3] = 0.0  # too fast for the clock: no log
    levels = np.log(then)
    by_arrays = runner_speed_of_arrays(now, then, noise)
    assert by_arrays == runner_speed(now.tolist(), then.tolist(), noise.tolist())
    now_speed = current_speed_of_arrays(now, levels)
    assert now_speed == current_speed(now.tolist(), levels.tolist())
    if scale != 1.0 and count > 300:
        assert by_arrays == pytest.approx(scale, rel=0.05)
        assert now_speed == pytest.approx(scale, rel=0.05)


def test_too_few_usable_tests_give_no_speed_over_arrays_either() -> None:
    then = medians(MIN_FOR_SPEED + 1)
    now = then * 1.5
    now[:2] = np.nan
    assert runner_speed_of_arrays(now, then, np.full(len(then), 0.02)) is None
    assert current_speed_of_arrays(now, np.log(then)) == 1.0
