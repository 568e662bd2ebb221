"""How an option's value is read, through a real pytest config: the command line over
the environment over the ini file, flags, repeatable options, choices; and the command
line tool's argument types, whose errors quote the value."""

from __future__ import annotations

import argparse

import pytest

from pytest_accel.cli.common import cli_flag, non_negative_float, percentage, positive_int
from pytest_accel.flaky.options import OPTIONS as FLAKY_OPTIONS
from pytest_accel.hardware.options import ENV_ACCEL
from pytest_accel.hardware.options import OPTIONS as SESSION_OPTIONS
from pytest_accel.settings import (
    OptionSpec,
    list_setting,
    parse_choice,
    raw_setting,
    spec_in,
    text_setting,
)
from tests.configs import parsed

ACCEL = spec_in(SESSION_OPTIONS.specs, "--accel")
ONLY = spec_in(SESSION_OPTIONS.specs, "--accel-only")
ONLY_RERUN = spec_in(FLAKY_OPTIONS.specs, "--flaky-only-rerun")


def test_a_specs_destination_is_its_flag_in_snake_case() -> None:
    assert OptionSpec("--perf-new-slow", "help").dest == "perf_new_slow"


def test_the_command_line_wins_over_the_environment_and_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ACCEL, "rocm")
    config = parsed(pytester, "--accel=tpu", ini="accel = cuda")
    assert raw_setting(config, ACCEL) == "tpu"


def test_the_environment_wins_over_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ACCEL, "rocm")
    config = parsed(pytester, ini="accel = cuda")
    assert raw_setting(config, ACCEL) == "rocm"
    assert raw_setting(config, ACCEL, environ={}) == "cuda"  # without it, the ini


def test_an_empty_environment_variable_counts_as_unset(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ACCEL, "")
    config = parsed(pytester, ini="accel = cuda")
    assert raw_setting(config, ACCEL) == "cuda"


def test_nothing_given_is_none_and_an_empty_ini_value_too(pytester: pytest.Pytester) -> None:
    assert text_setting(parsed(pytester), ACCEL) is None
    assert text_setting(parsed(pytester, ini="accel ="), ACCEL) is None


def test_a_flag_is_true_from_the_command_line_or_the_ini(pytester: pytest.Pytester) -> None:
    assert raw_setting(parsed(pytester), ONLY) is False
    assert raw_setting(parsed(pytester, "--accel-only"), ONLY) is True
    assert raw_setting(parsed(pytester, ini="accel_only = true"), ONLY) is True


def test_a_repeatable_option_takes_every_value_or_the_ini_lines(
    pytester: pytest.Pytester,
) -> None:
    given = parsed(pytester, "--flaky-only-rerun=Timeout", "--flaky-only-rerun=OSError")
    assert list_setting(given, ONLY_RERUN) == ["Timeout", "OSError"]
    from_ini = parsed(pytester, ini="flaky_only_rerun =\n    Timeout\n    ConnectionError")
    assert list_setting(from_ini, ONLY_RERUN) == ["Timeout", "ConnectionError"]
    assert list_setting(parsed(pytester), ONLY_RERUN) == []


def test_a_choice_is_case_insensitive_and_a_wrong_one_lists_the_others() -> None:
    assert parse_choice("--accel-pin", " AUTO ", ("auto", "off"), "auto") == "auto"
    assert parse_choice("--accel-pin", None, ("auto", "off"), "off") == "off"
    with pytest.raises(pytest.UsageError) as raised:
        parse_choice("--accel-pin", "sometimes", ("auto", "off"), "auto")
    assert str(raised.value) == "--accel-pin: invalid choice 'sometimes' (choose from auto, off)"


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (positive_int, "3", 3),
        (non_negative_float, "0", 0.0),
        (non_negative_float, "2.5", 2.5),
        (percentage, "5", 5.0),
        (percentage, "100", 100.0),
    ],
)
def test_the_command_line_tools_argument_types_accept_what_they_say(
    parse: object, text: str, expected: float
) -> None:
    assert parse(text) == expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (positive_int, "0", "'0' is not a positive integer"),
        (positive_int, "²", "'²' is not a positive integer"),
        (non_negative_float, "-1", "'-1' is not a number of seconds >= 0"),
        (non_negative_float, "nan", "'nan' is not a number of seconds >= 0"),
        (non_negative_float, "1e999", "'1e999' is not a number of seconds >= 0"),
        (percentage, "101", "'101' is not a percentage between 0 and 100"),
        (percentage, "five", "'five' is not a percentage between 0 and 100"),
    ],
)
def test_the_command_line_tools_argument_types_quote_a_bad_value(
    parse: object, text: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        parse(text)  # type: ignore[operator]
    assert str(raised.value) == message


def test_the_tool_spells_the_rule_options_without_the_perf_prefix() -> None:
    assert cli_flag("--perf-threshold") == "--threshold"
    assert cli_flag("--perf-min-delta") == "--min-delta"
