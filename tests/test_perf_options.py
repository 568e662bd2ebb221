"""The timing feature's options, resolved once through a real pytest config: defaults,
values from the command line and the ini file, the regression rule they make, and the
usage errors that quote the bad value.  (The same options in real runs are in
test_records.py and test_comparison.py.)"""

from __future__ import annotations

import pytest

from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.options import DEFAULT_TOP, DEFAULT_WINDOW, resolve, rule_from
from tests.configs import parsed, usage_error


def test_nothing_given_is_switched_off_with_the_defaults(pytester: pytest.Pytester) -> None:
    options = resolve(parsed(pytester))
    assert not options.enabled
    assert (options.record, options.baseline) == (None, None)
    assert (options.top, options.window, options.new_slow) == (DEFAULT_TOP, DEFAULT_WINDOW, 1.0)
    assert not options.fail
    assert not options.update_baseline
    assert options.rule == Rule()


def test_values_from_the_command_line(pytester: pytest.Pytester) -> None:
    options = resolve(
        parsed(
            pytester,
            "--perf-record=r.json",
            "--perf-baseline=b.json",
            "--perf-update-baseline",
            "--perf-fail",
            "--perf-top=5",
            "--perf-window=30",
            "--perf-new-slow=2.5",
            "--perf-threshold=1.5",
            "--perf-normalize=off",
        )
    )
    assert options.enabled
    assert (options.record, options.baseline) == ("r.json", "b.json")
    assert options.update_baseline
    assert options.fail
    assert (options.top, options.window, options.new_slow) == (5, 30, 2.5)
    assert options.rule.threshold == 1.5
    assert options.rule.normalize is False


def test_values_from_the_ini_file(pytester: pytest.Pytester) -> None:
    options = resolve(parsed(pytester, ini="perf_record = build/r.json\nperf_min_delta = 0.2"))
    assert options.record == "build/r.json"
    assert options.rule.min_delta == 0.2


def test_updating_needs_a_baseline_to_update(pytester: pytest.Pytester) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        resolve(parsed(pytester, "--perf-update-baseline"))
    assert str(raised.value) == "--perf-update-baseline needs --perf-baseline PATH to update"


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("--perf-top=0", "--perf-top: '0' is not a positive integer"),
        ("--perf-window=²", "--perf-window: '²' is not a positive integer"),
        ("--perf-new-slow=-1", "--perf-new-slow: '-1' is not a non-negative number"),
        ("--perf-threshold=0.5", "--perf-threshold"),
        ("--perf-normalize=maybe", "--perf-normalize"),
        ("--perf-min-samples=x", "--perf-min-samples"),
    ],
)
def test_a_bad_value_is_a_usage_error_that_quotes_it(
    pytester: pytest.Pytester, arg: str, message: str
) -> None:
    assert usage_error(resolve, parsed(pytester, arg)).startswith(message)


def test_the_command_line_tool_builds_the_same_rule_from_the_same_values() -> None:
    rule = rule_from({"--perf-threshold": "1.3", "--perf-min-samples": "7"})
    assert rule.threshold == 1.3
    assert rule.min_samples == 7
    assert rule_from({}) == Rule()
    with pytest.raises(pytest.UsageError) as raised:
        rule_from({"--perf-threshold": "zero"}, shown=lambda flag: flag.replace("perf-", ""))
    assert str(raised.value).startswith("--threshold")
