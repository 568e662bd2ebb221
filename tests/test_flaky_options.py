"""The flaky feature's options, resolved once through a real pytest config: defaults,
the rerun policy they make, and the usage errors that quote the bad value.  (The same
options in real runs are in test_flaky.py and test_flaky_ci.py.)"""

from __future__ import annotations

import pytest

from pytest_accel.flaky.options import resolve
from tests.configs import parsed, usage_error


def test_nothing_given_is_switched_off(pytester: pytest.Pytester) -> None:
    options = resolve(parsed(pytester))
    assert not options.enabled
    assert options.reruns == 0
    assert options.window == 50
    assert options.max_pct is None
    assert options.new_runs == 1
    policy = options.policy
    assert (policy.budget, policy.mass_failure, policy.delay) == (None, 30.0, 0.0)
    assert policy.only == policy.never == ()


def test_each_option_reaches_the_policy(pytester: pytest.Pytester) -> None:
    options = resolve(
        parsed(
            pytester,
            "--flaky-reruns=2",
            "--flaky-rerun-budget=10",
            "--flaky-mass-failure=50",
            "--flaky-rerun-delay=0.5",
            "--flaky-only-rerun=Timeout",
            "--flaky-rerun-except=AssertionError",
            "--flaky-history=h.json",
            "--flaky-new-runs=3",
            "--flaky-max-pct=5",
            "--flaky-window=20",
        )
    )
    assert options.enabled
    assert (options.reruns, options.window, options.max_pct, options.new_runs) == (2, 20, 5.0, 3)
    policy = options.policy
    assert (policy.reruns, policy.budget, policy.mass_failure, policy.delay) == (2, 10, 50.0, 0.5)
    assert policy.allows("TimeoutError: slow")
    assert not policy.allows("AssertionError: Timeout")


def test_a_percentage_limit_alone_switches_the_feature_on(pytester: pytest.Pytester) -> None:
    assert resolve(parsed(pytester, "--flaky-max-pct=0")).enabled


def test_repeatable_filters_come_from_the_ini_too(pytester: pytest.Pytester) -> None:
    options = resolve(parsed(pytester, ini="flaky_only_rerun =\n    ConnectionError\n    OSError"))
    assert [p.pattern for p in options.policy.only] == ["ConnectionError", "OSError"]


def test_new_runs_need_a_history_to_know_what_is_new(pytester: pytest.Pytester) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        resolve(parsed(pytester, "--flaky-new-runs=3"))
    assert str(raised.value).startswith("--flaky-new-runs needs --flaky-history PATH")


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("--flaky-reruns=-1", "--flaky-reruns: '-1' is not a non-negative integer"),
        ("--flaky-reruns=²", "--flaky-reruns: '²' is not a non-negative integer"),
        ("--flaky-max-pct=101", "--flaky-max-pct: '101' is above 100; give a percentage"),
        ("--flaky-mass-failure=150", "--flaky-mass-failure: '150' is above 100"),
        ("--flaky-rerun-delay=soon", "--flaky-rerun-delay: 'soon' is not a non-negative number"),
        ("--flaky-window=0", "--flaky-window: '0' is not a positive integer"),
        ("--flaky-rerun-budget=x", "--flaky-rerun-budget: 'x' is not a non-negative integer"),
        ("--flaky-only-rerun=(", "--flaky-only-rerun: '(' is not a regular expression"),
    ],
)
def test_a_bad_value_is_a_usage_error_that_quotes_it(
    pytester: pytest.Pytester, arg: str, message: str
) -> None:
    assert usage_error(resolve, parsed(pytester, arg)).startswith(message)
