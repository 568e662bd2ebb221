"""Merging the records of CI shards (or of separate runs) into one record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pytest_accel.records import RECORD_SCHEMA, RECORD_VERSION, utc_timestamp
from pytest_accel.storage import InputError, finite_number


class MergeError(Exception):
    """The records cannot be merged as asked; the message says why and what to do."""


@dataclass
class Merged:
    key: str
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _started(path: str, data: dict[str, Any]) -> float:
    text = data.get("run", {}).get("started")
    try:
        moment = datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise InputError(path, f"run.started: {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    return moment.replace(tzinfo=timezone.utc).timestamp()


def check_record(path: str, data: Any) -> dict[str, Any]:
    """Enough validation to merge: the shape of run, env and every test."""
    if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise InputError(path, f"is not a pytest-accel record (schema {schema!r})")
    if data.get("version") != RECORD_VERSION:
        raise InputError(path, f"version {data.get('version')!r} is not {RECORD_VERSION}")
    for section in ("run", "env", "tests"):
        if not isinstance(data.get(section), dict):
            raise InputError(path, f"{section}: expected an object")
    if not isinstance(data["env"].get("key"), str):
        raise InputError(path, "env.key: expected a string")
    for nodeid, test in data["tests"].items():
        if not isinstance(test, dict):
            raise InputError(path, f"tests[{nodeid!r}]: expected an object")
        for name in ("setup", "call", "teardown", "total"):
            if not finite_number(test.get(name)) or test[name] < 0:
                raise InputError(
                    path, f"tests[{nodeid!r}].{name}: expected seconds, got {test.get(name)!r}"
                )
    _started(path, data)
    return data


def _groups(
    tests: dict[str, dict[str, Any]],
    source: dict[str, str],
    records: dict[str, dict[str, Any]],
    kind: str,
) -> dict[str, dict[str, float | int]]:
    field_name, section = ("class", "classes") if kind == "class" else ("module", "modules")
    members: dict[str, list[str]] = {}
    for nodeid, test in tests.items():
        group = test.get(field_name)
        if isinstance(group, str):
            members.setdefault(group, []).append(nodeid)
    result: dict[str, dict[str, float | int]] = {}
    for group, nodeids in members.items():
        total = sum(float(tests[n]["total"]) for n in nodeids)
        # A group that ran in several shards ran in parallel: its span is the longest one.
        spans = [
            float(records[path].get(section, {}).get(group, {}).get("span", 0.0))
            for path in sorted({source[n] for n in nodeids})
        ]
        result[group] = {"tests": len(nodeids), "total": total, "span": max(spans, default=total)}
    return result


def _merge_key(key: str, inputs: Sequence[tuple[str, dict[str, Any]]]) -> Merged:
    merged = Merged(key, {})
    ordered = sorted(enumerate(inputs), key=lambda item: (_started(*item[1]), item[0]))
    tests: dict[str, dict[str, Any]] = {}
    source: dict[str, str] = {}
    records = dict(inputs)
    for _, (path, data) in ordered:
        for nodeid, test in data["tests"].items():
            if nodeid in tests:
                merged.notes.append(
                    f"{nodeid}: in {source[nodeid]} and {path}; kept {path} (the later run)"
                )
            tests[nodeid] = test
            source[nodeid] = path
    starts = [_started(path, data) for path, data in inputs]
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
        "classes": _groups(tests, source, records, "class"),
        "modules": _groups(tests, source, records, "module"),
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
