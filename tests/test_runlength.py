"""A record's text columns as runs of equal values (``perf.model.runlength``): written where
that is shorter, read back as the list they stand for."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_accel.files import InputError
from pytest_accel.perf.model.runlength import as_runs, expanded, runs_of


def test_a_class_of_tests_run_together_is_one_run() -> None:
    column = ["t.py::TestA"] * 25 + [None] * 25 + ["t.py::TestB"] * 3
    runs = as_runs(column)
    assert runs == {"values": ["t.py::TestA", None, "t.py::TestB"], "counts": [25, 25, 3]}
    assert isinstance(runs, dict)
    assert expanded(runs["values"], runs["counts"]) == column


def test_values_that_change_at_almost_every_test_stay_a_list() -> None:
    workers = ["gw0", "gw1", "gw0", "gw1", "gw1"]  # four runs: no shorter than five entries
    assert as_runs(workers) == workers


def test_an_empty_column_stays_an_empty_list() -> None:
    assert as_runs([]) == []


def test_the_tests_of_a_run_share_its_value() -> None:
    values, counts = runs_of("r.json", "tests.class", {"values": ["m::C"], "counts": [3]}, 3)
    column = expanded(values, counts)
    assert column == ["m::C"] * 3
    assert all(entry is values[0] for entry in column)


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ({"values": ["a"], "counts": [2]}, "r.json: tests.class: runs of 2 entries for 3 ids"),
        ({"values": ["a", "b"], "counts": [3]}, "r.json: tests.class: 2 values for 1 counts"),
        ({"values": ["a"], "counts": [3.0]}, "tests.class.counts: expected a whole number"),
        ({"counts": [3]}, "r.json: tests.class: expected a list, or runs as lists values"),
    ],
)
def test_runs_that_do_not_make_the_column_are_named(runs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as raised:
        runs_of("r.json", "tests.class", runs, 3)
    assert message in str(raised.value)
