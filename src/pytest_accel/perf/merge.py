"""Merging the records of CI shards (or of separate runs) into one record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.files import utc_timestamp
from pytest_accel.perf.record import RECORD_SCHEMA, RECORD_VERSION, started


class MergeError(Exception):
    """The records cannot be merged as asked; the message says why and what to do."""


@dataclass
class Merged:
    key: str
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _merged_groups(
    duplicates: bool,
    tests: dict[str, dict[str, Any]],
    source: dict[str, str],
    records: dict[str, dict[str, Any]],
    *,
    field_name: str,
    section: str,
) -> dict[str, dict[str, float | int]]:
    """Each record's own aggregates, combined; recomputed from the tests after duplicates.

    Without duplicates a group's tests are exactly the union of its tests in each record,
    so adding counts and totals (and taking the longest span) is the same as recomputing,
    at the cost of the groups rather than of every test.
    """
    if duplicates:  # recompute from the merged tests, in one pass
        counts: dict[str, int] = {}
        totals: dict[str, float] = {}
        sources: dict[str, set[str]] = {}
        for nodeid, test in tests.items():
            group = test.get(field_name)
            if isinstance(group, str):
                counts[group] = counts.get(group, 0) + 1
                totals[group] = totals.get(group, 0.0) + float(test["total"])
                sources.setdefault(group, set()).add(source[nodeid])
        # A group that ran in several shards ran in parallel: its span is the longest one.
        return {
            group: {
                "tests": count,
                "total": totals[group],
                "span": max(
                    float(records[path].get(section, {}).get(group, {}).get("span", 0.0))
                    for path in sources[group]
                ),
            }
            for group, count in counts.items()
        }
    result: dict[str, dict[str, float | int]] = {}
    for data in records.values():
        for group, value in data.get(section, {}).items():
            seen = result.get(group)
            if seen is None:
                result[group] = {
                    "tests": int(value["tests"]),
                    "total": float(value["total"]),
                    "span": float(value["span"]),
                }
            else:
                seen["tests"] = int(seen["tests"]) + int(value["tests"])
                seen["total"] = float(seen["total"]) + float(value["total"])
                seen["span"] = max(float(seen["span"]), float(value["span"]))
    return result


def _merge_key(key: str, inputs: Sequence[tuple[str, dict[str, Any]]]) -> Merged:
    merged = Merged(key, {})
    ordered = sorted(enumerate(inputs), key=lambda item: (started(*item[1]), item[0]))
    tests: dict[str, dict[str, Any]] = {}
    source: dict[str, str] = {}
    records = dict(inputs)
    duplicates = False
    for _, (path, data) in ordered:
        for nodeid, test in data["tests"].items():
            if nodeid in tests:
                duplicates = True
                merged.notes.append(
                    f"{nodeid}: in {source[nodeid]} and {path}; kept {path} (the later run)"
                )
            tests[nodeid] = test
            source[nodeid] = path
    starts = [started(path, data) for path, data in inputs]
    ends = [
        s + float(data["run"].get("duration") or 0.0)
        for s, (_, data) in zip(starts, inputs, strict=True)
    ]
    commits = sorted({str(d["run"].get("commit")) for _, d in inputs if d["run"].get("commit")})
    if len(commits) > 1:
        merged.notes.append(f"records are from {len(commits)} commits: {', '.join(commits)}")
    first = ordered[0][1][1]
    merged.record = {
        "schema": RECORD_SCHEMA,
        "version": RECORD_VERSION,
        "run": {
            "started": utc_timestamp(min(starts)),
            "duration": max(ends) - min(starts),
            "commit": commits[0] if len(commits) == 1 else first["run"].get("commit"),
            "branch": first["run"].get("branch"),
            "shard": None,
            "workers": sum(int(d["run"].get("workers") or 0) for _, d in inputs),
            "exitstatus": max(int(d["run"].get("exitstatus") or 0) for _, d in inputs),
            "merged_from": [
                {"path": path, "shard": d["run"].get("shard"), "tests": len(d["tests"])}
                for path, d in inputs
            ],
        },
        "env": first["env"],
        "tests": tests,
        "classes": _merged_groups(
            duplicates, tests, source, records, field_name="class", section="classes"
        ),
        "modules": _merged_groups(
            duplicates, tests, source, records, field_name="module", section="modules"
        ),
    }
    return merged


def merge_records(
    inputs: Sequence[tuple[str, dict[str, Any]]], *, by_env: bool = False
) -> list[Merged]:
    """Merge validated records; one result, or one per hardware key with ``by_env``."""
    if not inputs:
        raise MergeError("no records to merge")
    keyed: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path, data in inputs:
        keyed.setdefault(data["env"]["key"], []).append((path, data))
    if len(keyed) > 1 and not by_env:
        listing = "; ".join(
            f"{key!r}: {', '.join(p for p, _ in group)}" for key, group in keyed.items()
        )
        raise MergeError(
            f"the records are from different hardware ({listing}); timings of different"
            " hardware must not be mixed: pass --by-env to write one merged record per key"
        )
    return [_merge_key(key, group) for key, group in keyed.items()]
