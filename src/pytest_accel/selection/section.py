"""The record's ``selection`` section, its one reader and writer: what change-aware
selection did in a run (``SelectionSection``, built once by the run, encoded only when
a record is written or a worker hands it on), read back and checked (one line naming
the record and the field when it is wrong), and the sums over runs that
``pytest-accel selection`` reports (the share of tests run, the recall of shadow runs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_accel.fields import expect_int, expect_object, expect_text, finite_number
from pytest_accel.files import InputError


@dataclass(frozen=True)
class MapOfRun:
    """The map a run decided from, as it stood then."""

    commit: str | None  # None: made outside git
    branch: str | None
    updated: str | None
    age_days: float | None  # when the run decided (below 0: a clock that runs ahead)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "branch": self.branch,
            "updated": self.updated,
            "age_days": self.age_days,
        }


@dataclass(frozen=True)
class Saved:
    """What the tests left out did not spend, by their expected durations."""

    device_seconds: float = 0.0
    usd: float | None = None
    tests_with_durations: int = 0  # 0: no durations known, no figure to give

    def to_json(self) -> dict[str, Any]:
        return {
            "device_seconds": self.device_seconds,
            "usd": self.usd,
            "tests_with_durations": self.tests_with_durations,
        }


@dataclass(frozen=True)
class SelectionSection:
    """What selection did in a run: its decision (each test kept, deselected or cut by
    the budget, and why; the valves that fired; what it did without), the map it read,
    and, once the run is over, the tests that failed and what it saved."""

    mode: str  # "changed", "programs" or "shadow"
    kept: Mapping[str, str]
    deselected: Mapping[str, str]
    cut: Mapping[str, str]
    valves: tuple[tuple[str, str], ...] = ()  # (name, detail)
    notes: tuple[str, ...] = ()
    map: MapOfRun | None = None
    failed: tuple[str, ...] = ()
    saved: Saved | None = None

    @property
    def left_out(self) -> dict[str, str]:
        """The tests that did not run: deselected, or cut (shadow mode: none)."""
        return {} if self.mode == "shadow" else {**self.deselected, **self.cut}

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "mode": self.mode,
            "kept": dict(self.kept),
            "deselected": dict(self.deselected),
            "cut": dict(self.cut),
            "valves": [{"name": name, "detail": detail} for name, detail in self.valves],
            "notes": list(self.notes),
        }
        if self.map is not None:
            found["map"] = self.map.to_json()
        if self.saved is not None:
            found["failed"] = list(self.failed)
            found["saved"] = self.saved.to_json()
        return found


def section_of(path: str, raw: Any) -> SelectionSection:
    """A ``selection`` section (a record's, or a worker's) checked and typed; an
    InputError naming ``path`` and the field where it is wrong."""
    found = check_selection(path, raw)
    recorded_map = found.get("map")
    recorded_saved = found.get("saved")
    age = None if recorded_map is None else recorded_map.get("age_days")
    return SelectionSection(
        found["mode"],
        found["kept"],
        found["deselected"],
        found["cut"],
        tuple((v["name"], v["detail"]) for v in found["valves"]),
        tuple(found.get("notes", [])),
        None
        if recorded_map is None
        else MapOfRun(
            recorded_map.get("commit"),
            recorded_map.get("branch"),
            recorded_map.get("updated"),
            None if age is None else float(age),
        ),
        tuple(found.get("failed", [])),
        None
        if recorded_saved is None
        else Saved(
            float(recorded_saved.get("device_seconds", 0.0)),
            None if recorded_saved.get("usd") is None else float(recorded_saved["usd"]),
            int(recorded_saved.get("tests_with_durations", 0)),
        ),
    )


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
    section = section_of(path, raw)
    return RunSelection(
        path,
        section.mode,
        section.kept,
        section.deselected,
        section.cut,
        tuple(name for name, _ in section.valves),
        frozenset(section.failed),
        0.0 if section.saved is None else section.saved.device_seconds,
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
