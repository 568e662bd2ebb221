"""The single-run rule, gate by gate, on hand-made samples."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_accel.perf.analysis.rule import Rule, judge, pad, row_median

QUIET = [0.50, 0.51, 0.49, 0.50, 0.52, 0.48, 0.50, 0.51, 0.49, 0.50]  # about 2% noise


def verdict(current: float, samples: list[float], rule: Rule | None = None) -> tuple[bool, bool]:
    result = judge(np.array([current]), pad([samples]), rule or Rule())
    return bool(result.regressed[0]), bool(result.improved[0])


def test_a_clear_slowdown_of_a_quiet_test_regresses_and_the_mirror_improves() -> None:
    assert verdict(1.0, QUIET) == (True, False)
    assert verdict(0.25, QUIET) == (False, True)
    assert verdict(0.505, QUIET) == (False, False)


def test_every_gate_must_hold() -> None:
    # Under min_duration (0.1 s), however large the ratio.
    assert verdict(0.09, [0.01] * 10) == (False, False)
    # Under min_delta (0.05 s): 0.12 s against 0.08 s is 1.5x but only 40 ms.
    assert verdict(0.12, [0.08] * 10) == (False, False)
    # Under the threshold (1.2x): 0.58 s against 0.50 s is 1.16x, far outside the noise.
    assert verdict(0.58, QUIET) == (False, False)
    # Within the test's own noise: 1.3x of a test that wobbles by 30%.
    noisy = [0.5 * f for f in (1.0, 1.3, 0.7, 1.2, 0.8, 1.35, 0.75, 1.1, 0.9, 1.25)]
    assert verdict(0.65, noisy) == (False, False)


def test_an_outlier_in_the_history_does_not_widen_the_spread() -> None:
    assert verdict(1.0, [*QUIET, 1.5]) == (True, False)


def test_with_too_few_samples_a_slowdown_is_learning_not_a_regression() -> None:
    # 2 < min_samples samples: the ratio gates hold, but two runs of a new baseline
    # cannot tell a slowdown from their noise.
    assert verdict(0.65, [0.5, 0.5]) == (False, False)
    result = judge(np.array([0.65, 0.52]), pad([[0.5, 0.5], [0.5, 0.5]]), Rule())
    assert result.learning.tolist() == [True, False]
    assert np.isnan(result.z[0])
    # With as many as it asks for, they are judged: against the short-history noise
    # floor (10%), 1.3x is noise and 2x is not.
    assert verdict(0.65, [0.5, 0.5], Rule(min_samples=2)) == (False, False)
    assert verdict(1.0, [0.5, 0.5], Rule(min_samples=2)) == (True, False)
    assert verdict(0.65, [0.5] * 10) == (True, False)  # zero spread: no z gate


def test_a_large_change_needs_less_evidence() -> None:
    noisy = [0.5 * f for f in (1.0, 1.2, 0.8, 1.1, 0.9, 1.2, 0.85, 1.15, 0.95, 1.05)]
    z_for_1_6x = judge(np.array([0.8]), pad([noisy]), Rule()).z[0]
    assert Rule().mad_k * Rule().large_k_factor < z_for_1_6x < Rule().mad_k
    assert verdict(0.8, noisy) == (True, False)
    assert verdict(0.8, noisy, Rule(large_k_factor=1.0)) == (False, False)


def test_ragged_histories_are_padded_and_their_medians_ignore_the_padding() -> None:
    samples = pad([[1.0, 3.0, 2.0], [5.0], []])
    assert samples.shape == (3, 3)
    assert np.isnan(samples[1, 1:]).all()
    medians = row_median(samples)
    assert medians[:2].tolist() == [2.0, 5.0]
    assert np.isnan(medians[2])
    result = judge(np.array([9.0, 9.0, 9.0]), samples, Rule())
    assert result.regressed.tolist() == [True, False, False]  # no samples: never a finding
    assert result.learning.tolist() == [False, True, False]  # one sample: too few yet


def test_per_test_thresholds_and_deltas_override_the_rule() -> None:
    current, samples = np.array([1.0, 1.0]), pad([QUIET, QUIET])
    loose = judge(current, samples, Rule(), threshold=np.array([1.2, 3.0]))
    assert loose.regressed.tolist() == [True, False]
    wide = judge(current, samples, Rule(), min_delta=np.array([0.05, 0.6]))
    assert wide.regressed.tolist() == [True, False]


def test_an_empty_baseline_judges_nothing() -> None:
    result = judge(np.array([1.0]), np.zeros((1, 0)), Rule())
    assert result.regressed.tolist() == [False]
    assert result.count.tolist() == [0.0]


@pytest.mark.parametrize("log_space", [True, False])
def test_linear_and_log_spaces_agree_on_clear_cases(log_space: bool) -> None:
    rule = Rule(log_space=log_space)
    assert verdict(1.0, QUIET, rule) == (True, False)
    assert verdict(0.5, QUIET, rule) == (False, False)
