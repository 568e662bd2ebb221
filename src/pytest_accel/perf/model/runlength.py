"""A record's text columns as runs of equal values, as version 3 writes them where
that is shorter (docs/format.md): ``{"values": [...], "counts": [...]}``.

A class's tests run one after another, a module's too, and most tests pass: the
outcome, class, module and worker columns of 100,000 tests are a few thousand runs.
As lists they were 400,000 strings to parse, nearly half the record's bytes and a
third of its parse time; as runs they are a few thousand, and the tests of a class
share one string.  A column whose values change at almost every test (the worker, with xdist)
stays a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, groupby, repeat
from typing import Any, TypeVar

from pytest_accel.files import InputError

T = TypeVar("T")


def runs(column: Iterable[T]) -> tuple[list[T], list[int]]:
    """``column``'s runs of equal values: each run's value and how many entries it has."""
    values: list[T] = []
    counts: list[int] = []
    for value, group in groupby(column):
        values.append(value)
        counts.append(len(list(group)))
    return values, counts


def as_runs(column: Sequence[T]) -> list[T] | dict[str, list[Any]]:
    """``column`` as runs of equal values, or as the list it is when the runs would
    be no shorter (two numbers a run against one entry a test) or it is empty."""
    values, counts = runs(column)
    if not values or 2 * len(values) > len(column):
        return list(column)
    return {"values": values, "counts": counts}


def runs_of(path: str, where: str, column: Any, length: int) -> tuple[list[Any], list[int]]:
    """A column of runs checked: its values (for the caller to check, a few of them)
    and its counts, whole numbers from 1 that add up to ``length``."""
    values, counts = column.get("values"), column.get("counts")
    if not isinstance(values, list) or not isinstance(counts, list):
        raise InputError(path, f"{where}: expected a list, or runs as lists values and counts")
    if len(values) != len(counts):
        raise InputError(path, f"{where}: {len(values)} values for {len(counts)} counts")
    if not set(map(type, counts)) <= {int} or min(counts, default=1) < 1:
        bad = next(c for c in counts if type(c) is not int or c < 1)
        raise InputError(path, f"{where}.counts: expected a whole number from 1, got {bad!r:.60}")
    if sum(counts) != length:
        raise InputError(path, f"{where}: runs of {sum(counts)} entries for {length} ids")
    return values, counts


def expanded(values: list[Any], counts: list[int]) -> list[Any]:
    """The runs as one entry per test; the tests of a run share its value's object."""
    return list(chain.from_iterable(map(repeat, values, counts)))
