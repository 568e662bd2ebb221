"""The record's ``selection`` section: what change-aware selection did in a run, read
back and checked (one line naming the record and the field when it is wrong), and the
sums over runs that ``pytest-accel selection`` reports (the share of tests run, the
recall of shadow runs).  Written by ``plugin.SelectionReport`` as plain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_accel.fields import expect_int, expect_object, expect_text, finite_number
from pytest_accel.files import InputError


@dataclass(frozen=True)
class RunSelection:
    """One run's selection, as its record keeps it."""

    path: str
    mode: str
    kept: Mapping[str, str]
    deselected: Mapping[str, str]
    cut: Mapping[str, str]
    valves: tuple[str, ...]
    failed: frozenset[str]
    device_seconds: float

    @property
    def collected(self) -> int:
        return len(self.kept) + len(self.deselected) + len(self.cut)

    @property
    def share(self) -> float:
        """The share of the collected tests run (shadow mode: that would have run)."""
        return len(self.kept) / self.collected if self.collected else 1.0

    @property
    def faulty(self) -> bool:
        """Some test failed: the change (or the run) was faulty."""
        return bool(self.failed)

    @property
    def missed(self) -> list[str]:
        """Failing tests selection left out (only shadow mode can see them)."""
        return sorted(t for t in self.failed if t in self.deselected or t in self.cut)

    @property
    def caught(self) -> bool:
        """A faulty run where selection kept every failing test (one it left out is a
        miss, whatever else it kept)."""
        return self.faulty and not self.missed


def selection_of(path: str, record: Mapping[str, Any]) -> RunSelection | None:
    """A checked record's selection section (None: the run did not select)."""
    raw = record.get("selection")
    if raw is None:
        return None
    section = check_selection(path, raw)
    seconds = section.get("saved", {}).get("device_seconds", 0.0)
    return RunSelection(
        path,
        section["mode"],
        section["kept"],
        section["deselected"],
        section["cut"],
        tuple(valve["name"] for valve in section["valves"]),
        frozenset(section.get("failed", [])),
        float(seconds),
    )


def check_selection(path: str, raw: Any) -> dict[str, Any]:
    """A record's ``selection`` section checked field by field, as the record's schema
    has it: every reader (the page, ``merge``, ``selection``) reads what this passed.
    A problem is an InputError naming the record and the field."""
    section = expect_object(path, "selection", raw)
    mode = section.get("mode")
    if mode not in ("changed", "programs", "shadow"):
        raise InputError(path, f"selection.mode: {mode!r:.40} is not changed, programs or shadow")
    for name in ("kept", "deselected", "cut"):
        _reasons(path, name, section.get(name))
    valves = section.get("valves")
    if not isinstance(valves, list) or not all(
        isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("detail"), str)
        for v in valves
    ):
        raise InputError(path, "selection.valves: expected a list of {name, detail} texts")
    for name in ("notes", "failed"):
        found = section.get(name, [])
        if not isinstance(found, list) or not all(isinstance(t, str) for t in found):
            raise InputError(path, f"selection.{name}: expected a list of texts")
    if "map" in section:
        found_map = expect_object(path, "selection.map", section["map"])
        for name in ("commit", "branch", "updated"):
            expect_text(path, f"selection.map.{name}", found_map.get(name), optional=True)
        # A map written on a machine whose clock runs ahead is younger than 0 days.
        age = found_map.get("age_days")
        _number(path, "selection.map.age_days", age, optional=True, negative=True)
    if "saved" in section:
        saved = expect_object(path, "selection.saved", section["saved"])
        _number(path, "selection.saved.device_seconds", saved.get("device_seconds", 0.0))
        _number(path, "selection.saved.usd", saved.get("usd"), optional=True)
        expect_int(
            path,
            "selection.saved.tests_with_durations",
            saved.get("tests_with_durations", 0),
            minimum=0,
        )
    return section


def _reasons(path: str, name: str, value: Any) -> dict[str, str]:
    found = expect_object(path, f"selection.{name}", value)
    if not all(isinstance(why, str) for why in found.values()):
        raise InputError(path, f"selection.{name}: expected node id -> reason (text)")
    return found


def _number(
    path: str, where: str, value: Any, *, optional: bool = False, negative: bool = False
) -> None:
    if value is None and optional:
        return
    if not finite_number(value) or (value < 0 and not negative):
        kind = "a number" if negative else "a number of at least 0"
        raise InputError(path, f"{where}: expected {kind}, got {value!r:.40}")


@dataclass(frozen=True)
class SelectionSums:
    """Over runs: the share of tests run, and the recall of the faulty shadow runs."""

    runs: int
    mean_share: float
    faulty: int  # shadow runs where a test failed
    caught: int  # of those, runs where selection would have kept every failing test
    missed: Mapping[str, Sequence[str]]  # record -> failing tests it would have left out
    device_seconds: float  # not spent, over the runs that were not shadow

    @property
    def recall(self) -> float | None:
        return self.caught / self.faulty if self.faulty else None


def sums(runs: Sequence[RunSelection]) -> SelectionSums:
    shadow = [run for run in runs if run.mode == "shadow" and run.faulty]
    return SelectionSums(
        runs=len(runs),
        mean_share=sum(run.share for run in runs) / len(runs) if runs else 0.0,
        faulty=len(shadow),
        caught=sum(run.caught for run in shadow),
        missed={run.path: run.missed for run in runs if run.missed},
        device_seconds=sum(run.device_seconds for run in runs if run.mode != "shadow"),
    )


DECISION = ("mode", "kept", "deselected", "cut", "valves", "notes")


def merged_selection(sections: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The selection sections of a run's shards as the merged record's: one decision
    (each shard made the same, over the whole suite), the union of the failures; None
    when the shards decided differently."""
    first = sections[0]
    if any(
        {k: s.get(k) for k in DECISION} != {k: first.get(k) for k in DECISION} for s in sections
    ):
        return None
    failed = sorted({t for s in sections for t in s.get("failed", [])})
    return {**first, "failed": failed}
