"""User data in what we print: a test id can hold anything a parametrize id can, and no
value may break a log line, start a workflow command, end a Markdown cell or a Mermaid
string.  Each escaper is checked against the input that would abuse it."""

from __future__ import annotations

import re

import pytest

from pytest_accel.github import (
    Location,
    annotation,
    escape_cell,
    escape_data,
    escape_property,
    in_github_actions,
    mermaid_line_chart,
)
from pytest_accel.text import line_start, one_line, plain, shown

HOSTILE = [
    "t.py::test[::error::pwned]",
    "t.py::test[a\nb]",
    "t.py::test[100%0A]",
    "t.py::test[\x1b[31mred]",
    "t.py::test[\u2028line]",
    "t.py::test[a|b]",
    "t.py::test[<script>]",
    "t.py::test[\r\n::warning::x]",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_one_line_never_leaves_a_control_character_or_line_break(text: str) -> None:
    escaped = one_line(text)
    assert escaped.isprintable()
    assert "\n" not in escaped
    assert "\r" not in escaped
    assert "\u2028" not in escaped


def test_one_line_shows_control_characters_as_python_writes_them() -> None:
    assert one_line("a\nb\tc\x1bd") == "a\\nb\\tc\\x1bd"
    assert one_line("plain text, é and 中") == "plain text, é and 中"


def test_a_line_that_would_start_with_two_colons_is_prefixed() -> None:
    assert line_start("::error::x") == "./::error::x"
    assert line_start(":one colon") == ":one colon"
    assert line_start("\n::warning::x") == "\\n::warning::x"  # escaped first: no longer "::"


def test_shown_quotes_and_cuts_long_values() -> None:
    assert shown("abc") == "'abc'"
    long = "9" * 5000
    assert shown(long) == repr("9" * 40 + "...")
    assert len(shown(long, most=10)) == len(repr("9" * 10 + "..."))


def test_plain_leaves_simple_values_and_quotes_the_rest() -> None:
    assert plain("tpu:8") == "tpu:8"
    assert plain("1/4") == "1/4"
    assert plain("two words") == "'two words'"
    assert plain("a\nb") == repr("a\nb")
    assert plain("x" * 61) == shown("x" * 61, 60)


def test_workflow_command_data_escapes_percent_and_line_breaks() -> None:
    assert escape_data("100%\r\n") == "100%25%0D%0A"
    assert escape_data("%0A") == "%250A"  # an escape in the data stays data


def test_workflow_command_properties_also_escape_colon_and_comma() -> None:
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


@pytest.mark.parametrize("text", HOSTILE)
def test_an_annotation_is_one_line_and_one_command_whatever_the_test_id(text: str) -> None:
    line = annotation("warning", f"{text} is 2x slower", Location(text, 3), f"slower: {text}")
    assert "\n" not in line
    assert "\r" not in line
    # One "::" pair opens the command and one ends the properties; no other.
    head, separator, _message = line.partition("::warning ")[2].partition("::")
    assert separator == "::"
    assert re.fullmatch(r"file=[^:,]*,line=3,title=[^:,]*", head), head


def test_an_annotation_without_a_location_has_only_a_title() -> None:
    assert annotation("error", "m", None, "t") == "::error title=t::m"
    assert annotation("error", "m", Location("a.py", None), "t") == "::error file=a.py,title=t::m"


@pytest.mark.parametrize("text", HOSTILE)
def test_a_markdown_cell_cannot_end_the_cell_the_row_or_open_html(text: str) -> None:
    cell = escape_cell(text)
    assert "\n" not in cell
    assert "\r" not in cell
    assert "<" not in cell
    assert ">" not in cell
    assert re.search(r"(?<!\\)\|", cell) is None  # every pipe escaped


def test_markdown_markup_is_escaped_not_interpreted() -> None:
    assert escape_cell("*bold* _it_ `code` [link](x) #h ~s~ !") == (
        "\\*bold\\* \\_it\\_ \\`code\\` \\[link\\](x) \\#h \\~s\\~ \\!"
    )
    assert escape_cell("a & b") == "a &amp; b"


def test_github_actions_is_recognised_only_by_its_own_variable() -> None:
    assert in_github_actions({"GITHUB_ACTIONS": "true"})
    assert not in_github_actions({"GITHUB_ACTIONS": "false"})
    assert not in_github_actions({"CI": "true"})


def test_a_mermaid_chart_is_one_fenced_block_with_every_label_made_safe() -> None:
    lines = mermaid_line_chart(
        'suite "total"', ['run 1"]', "run\n2", "```"], [1.0, 2.5, 0.25], "seconds"
    )
    assert lines[0] == "```mermaid"
    assert lines[-1] == "```"
    assert [line for line in lines if "```" in line] == ["```mermaid", "```"]
    assert lines[2] == '    title "suite _total_"'
    assert lines[3] == '    x-axis ["run 1__", "run_2", "___"]'
    assert lines[4] == '    y-axis "seconds" 0 --> 2.75'
    assert lines[5] == "    line [1.000, 2.500, 0.250]"


def test_a_mermaid_chart_without_values_still_has_an_axis() -> None:
    lines = mermaid_line_chart("t", [], [], "s")
    assert '    y-axis "s" 0 --> 1' in lines
    assert "    line []" in lines


def test_mermaid_labels_are_cut_to_eighty_characters() -> None:
    lines = mermaid_line_chart("x" * 200, [], [], "s")
    assert lines[2] == f'    title "{"x" * 80}"'
