"""Merging the records of CI shards (or of separate runs) into one record.

Tests are taken from every record; a test in two records keeps the later run's (by
``run.started``, then by argument order), and a note says so.  Classes and modules are
recomputed from the merged tests: a class split over shards, deselected in each, ran
whole across them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.fields import MAX_SECONDS, utc_timestamp
from pytest_accel.outcomes import EXIT_INTERRUPTED, OUTCOME_RANK, interrupted
from pytest_accel.perf.formats.record import (
    COMPILE_MAPS,
    DEVICE_MEMORY,
    DEVICE_MEMORY_BOUNDED,
    GROUP_SECTIONS,
    PAUSES,
    PLATFORM_SKIPS,
    QUARANTINED,
    RECORD_SCHEMA,
    RECORD_VERSION,
    SECONDS,
    TEXTS,
    THREADS_WAIT,
    WAITS,
    started,
)
from pytest_accel.perf.model.timings import merged_run_id, whole_groups

TEST_COLUMNS = ("outcome", *SECONDS, *TEXTS)


class MergeError(Exception):
    """The records cannot be merged as asked; the message says why and what to do."""


@dataclass
class Merged:
    key: str
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def merge_records(
    inputs: Sequence[tuple[str, dict[str, Any]]], *, by_env: bool = False
) -> list[Merged]:
    """Merge checked records (``record.check_record``); one result, or one per hardware
    key with ``by_env``."""
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


def join_hosts(inputs: Sequence[tuple[str, dict[str, Any]]]) -> Merged:
    """The records of one multi-host run's hosts (``run.host``), joined: every host ran
    the suite, so a test failed if it failed on any host (its worst outcome), and its
    times are its slowest host's.  A host the run has (``run.slice.hosts``) that left no
    record is named, and the joined run is incomplete: marked interrupted (it adds
    nothing to a baseline, and no gate passes on it)."""
    if not inputs:
        raise MergeError("no records to join")
    keys = sorted({data["env"]["key"] for _, data in inputs})
    if len(keys) > 1:
        raise MergeError(f"the hosts' records are of different hardware keys: {', '.join(keys)}")
    hosts: dict[int, str] = {}
    for path, data in inputs:
        host = data["run"].get("host")
        if host is None:
            raise MergeError(f"{path}: no run.host: not a record of one host of several")
        if host in hosts:
            raise MergeError(f"{path} and {hosts[host]} are both host {host}")
        hosts[host] = path
    names = {data["run"].get("slice", {}).get("name") for _, data in inputs}
    if len(names) > 1:
        raise MergeError(f"the records name different runs: {', '.join(map(str, names))}")
    rows: dict[str, tuple[int, int]] = {}  # test -> its slowest host's (input, row)
    worst: dict[str, str] = {}
    seen: dict[str, list[int]] = {}
    for position, (_, data) in enumerate(inputs):
        tests = data["tests"]
        for row, nodeid in enumerate(tests["id"]):
            outcome = tests["outcome"][row]
            if OUTCOME_RANK[outcome] > OUTCOME_RANK.get(worst.get(nodeid, "passed"), 0):
                worst[nodeid] = outcome
            worst.setdefault(nodeid, outcome)
            seen.setdefault(nodeid, []).append(data["run"]["host"])
            kept = rows.get(nodeid)
            if kept is None or tests["total"][row] > inputs[kept[0]][1]["tests"]["total"][kept[1]]:
                rows[nodeid] = (position, row)
    merged = _merge_key(keys[0], inputs, rows, worst)
    merged.notes = [
        f"{nodeid}: ran on host(s) {', '.join(map(str, sorted(on)))} only"
        for nodeid, on in seen.items()
        if len(on) < len(hosts)
    ]
    expected = max((d["run"].get("slice", {}).get("hosts") or 0 for _, d in inputs), default=0)
    missing = [host for host in range(expected) if host not in hosts]
    run = merged.record["run"]
    run["hosts"] = [{"host": h, "path": hosts[h]} for h in sorted(hosts)]
    run["slice"] = {"name": names.pop(), "hosts": expected or None}
    if missing:
        run["missing_hosts"] = missing
        run["exitstatus"] = EXIT_INTERRUPTED
        merged.notes.append(
            f"host(s) {', '.join(map(str, missing))} of {expected} never reported: an"
            " infrastructure failure (the host, its pod or its runner); the joined run is"
            " incomplete, marked interrupted"
        )
    return merged


def _merge_key(
    key: str,
    inputs: Sequence[tuple[str, dict[str, Any]]],
    chosen: Mapping[str, tuple[int, int]] | None = None,
    outcomes: Mapping[str, str] | None = None,
) -> Merged:
    """One key's records merged: each test from the later run that has it, or from
    ``chosen`` (test -> (input, row)), with ``outcomes`` over its own where given."""
    merged = Merged(key, {})
    order = sorted(range(len(inputs)), key=lambda i: (started(*inputs[i]), i))
    rows: dict[str, tuple[int, int]] = {}  # test -> (input, row in it)
    if chosen is not None:
        rows = dict(chosen)
    for position in order if chosen is None else ():
        path, data = inputs[position]
        for row, nodeid in enumerate(data["tests"]["id"]):
            if nodeid in rows:
                earlier = inputs[rows[nodeid][0]][0]
                merged.notes.append(
                    f"{nodeid}: in {earlier} and {path}; kept {path} (the later run)"
                )
            rows[nodeid] = (position, row)
    tests: dict[str, Any] = {"id": list(rows)}
    for name in TEST_COLUMNS:
        tests[name] = [
            (inputs[i][1]["tests"].get(name) or [None] * (r + 1))[r] for i, r in rows.values()
        ]
    if outcomes is not None:
        tests["outcome"] = [
            outcomes.get(nodeid, o) for nodeid, o in zip(rows, tests["outcome"], strict=True)
        ]
    tests[PAUSES] = [
        (inputs[i][1]["tests"].get(PAUSES) or [0.0] * (r + 1))[r] for i, r in rows.values()
    ]
    if any(WAITS in d["tests"] for _, d in inputs):  # a shard that measured none: 0 s
        tests[WAITS] = [
            (inputs[i][1]["tests"].get(WAITS) or [0.0] * (r + 1))[r] for i, r in rows.values()
        ]
    warm = {n for _, d in inputs for n in d["tests"].get("warmup", ())}
    tests["warmup"] = [n for n in rows if n in warm]
    quarantined_in = [set(d["tests"].get(QUARANTINED, ())) for _, d in inputs]
    tests[QUARANTINED] = [n for n, (i, _) in rows.items() if n in quarantined_in[i]]
    # The per-test maps, each test's from the record whose run it keeps.
    for name in ("attempts", PLATFORM_SKIPS, *COMPILE_MAPS, DEVICE_MEMORY):
        if name != "attempts" and not any(name in d["tests"] for _, d in inputs):
            continue  # no input has it (no JAX): the merge has none either
        tests[name] = {
            nodeid: inputs[i][1]["tests"][name][nodeid]
            for nodeid, (i, _) in rows.items()
            if nodeid in inputs[i][1]["tests"].get(name, {})
        }
    if any(DEVICE_MEMORY_BOUNDED in d["tests"] for _, d in inputs):
        bounded_in = [set(d["tests"].get(DEVICE_MEMORY_BOUNDED, ())) for _, d in inputs]
        tests[DEVICE_MEMORY_BOUNDED] = [n for n, (i, _) in rows.items() if n in bounded_in[i]]
    starts = [started(path, data) for path, data in inputs]
    ends = [s + float(d["run"]["duration"]) for s, (_, d) in zip(starts, inputs, strict=True)]
    commits = sorted({str(d["run"]["commit"]) for _, d in inputs if d["run"].get("commit")})
    if len(commits) > 1:
        merged.notes.append(f"records are from {len(commits)} commits: {', '.join(commits)}")
    for path, data in inputs:
        if interrupted(data):
            merged.notes.append(
                f"{path}: an interrupted run (exit status 2): the merged record is marked"
                " interrupted too, and adds nothing to a baseline or a history"
            )
    first = inputs[order[0]][1]
    merged_id = merged_run_id([d["run"].get("id") for _, d in inputs])
    merged.record = {
        "schema": RECORD_SCHEMA,
        "version": RECORD_VERSION,
        "run": {
            "started": utc_timestamp(min(starts)),
            **({"id": merged_id} if merged_id else {}),
            "duration": round(max(ends) - min(starts), 6),
            "commit": commits[0] if len(commits) == 1 else first["run"].get("commit"),
            "branch": first["run"].get("branch"),
            "shard": None,
            "workers": sum(int(d["run"].get("workers", 0)) for _, d in inputs),
            "exitstatus": _exit_status(inputs),
            **_merged_threads(inputs),
            "merged_from": [
                {
                    "path": path,
                    **({"id": d["run"]["id"]} if d["run"].get("id") else {}),
                    "shard": d["run"].get("shard"),
                    "tests": len(d["tests"]["id"]),
                    "seconds": round(sum(d["tests"]["total"]), 6),
                }
                for path, d in inputs
            ],
        },
        "env": first["env"],
        **_merged_judgement(inputs, rows, merged.notes),
        "tests": tests,
        **{section: _merged_groups(section, tests, warm, inputs) for section in GROUP_SECTIONS},
    }
    compilation = _merged_compilation(inputs, tests["total"])
    if compilation is not None:
        merged.record["compilation"] = compilation
    return merged


def _merged_judgement(
    inputs: Sequence[tuple[str, dict[str, Any]]],
    rows: dict[str, tuple[int, int]],
    notes: list[str],
) -> dict[str, Any]:
    """The rule the records' runs were judged by, where they agree, as ``judgement``
    (each test's ``@pytest.mark.perf`` override from the record whose run it keeps): a
    command then judges the merged run as the shards were.  Where one record keeps none
    (from before 0.4) or the rules differ, none, and a note says so."""
    judgements: list[dict[str, Any]] = [data.get("judgement") or {} for _, data in inputs]
    if not any(judgements):  # records from before 0.4 only: nothing is lost
        return {}
    if not all(judgements):
        path = next(p for (p, _), j in zip(inputs, judgements, strict=True) if not j)
        notes.append(
            f"{path} keeps no rule its run was judged by (a record from before 0.4): the"
            " merged record keeps none, and commands judge it by the default rule"
        )
        return {}
    ruled = [(j.get("rule"), j.get("new_slow")) for j in judgements]
    if any(other != ruled[0] for other in ruled[1:]):
        differing = next(i for i, other in enumerate(ruled) if other != ruled[0])
        notes.append(
            f"{inputs[0][0]} and {inputs[differing][0]} were judged by different rules: the"
            " merged record keeps none, and commands judge it by the default rule"
        )
        return {}
    overrides = [j.get("overrides") or {} for j in judgements]
    kept = {
        nodeid: overrides[i][nodeid] for nodeid, (i, _) in rows.items() if nodeid in overrides[i]
    }
    rule, new_slow = ruled[0]
    return {"judgement": {"rule": rule, "new_slow": new_slow, "overrides": kept}}


COMPILATION_SUMS = ("count", "seconds", "cache_hits", "cache_misses", "recompiles")


def _merged_compilation(
    inputs: Sequence[tuple[str, dict[str, Any]]], totals: Sequence[float]
) -> dict[str, float | int] | None:
    """The shards' JAX compilation summed, its share of the merged tests' time
    recomputed (None where no shard used JAX)."""
    sections = [d["compilation"] for _, d in inputs if isinstance(d.get("compilation"), dict)]
    if not sections:
        return None
    summed: dict[str, float | int] = {}
    for name in COMPILATION_SUMS:
        values = [v.get(name, 0) for v in sections]
        # What a damaged shard holds instead of seconds or a count is left out: an
        # absurd figure summed in would be a number no JSON writer can hold.
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if name == "seconds":
            summed[name] = round(sum(v for v in numbers if 0 <= v <= MAX_SECONDS), 6)
        else:
            summed[name] = sum(v for v in numbers if isinstance(v, int) and 0 <= v <= 2**53)
    whole = sum(totals)
    summed["share"] = round(float(summed["seconds"]) / whole, 4) if whole > 0 else 0.0
    return summed


def _exit_status(inputs: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """An interrupted shard makes the whole interrupted (a part of the suite is missing);
    else the highest status, as pytest's own statuses rank."""
    if any(interrupted(data) for _, data in inputs):
        return EXIT_INTERRUPTED
    return max(int(data["run"].get("exitstatus", 0)) for _, data in inputs)


def _merged_groups(
    section: str,
    tests: dict[str, Any],
    warm: set[str],
    inputs: Sequence[tuple[str, dict[str, Any]]],
) -> dict[str, list[Any]]:
    """A section's groups from the merged tests: totals and counts recomputed; a group
    ran whole when the merged tests cover what each shard collected of it; its span is
    the longest of the shards' (they ran in parallel)."""
    column = tests["class" if section == "classes" else "module"]
    warmup = [nodeid in warm for nodeid in tests["id"]]
    counts: dict[str, int] = {}
    for group in column:
        if group is not None:
            counts[group] = counts.get(group, 0) + 1
    collected: dict[str, int] = {}
    spans: dict[str, float] = {}
    for _, data in inputs:
        groups = data.get(section, {"id": []})
        for at, group in enumerate(groups["id"]):
            ran = groups.get("tests", [0] * len(groups["id"]))[at]
            skipped = groups.get("deselected", [0] * len(groups["id"]))[at]
            collected[group] = max(collected.get(group, 0), ran + skipped)
            spans[group] = max(spans.get(group, 0.0), groups["span"][at])
    deselected = {g: max(collected.get(g, n) - n, 0) for g, n in counts.items()}
    partial = frozenset(g for g, n in deselected.items() if n)
    merged = whole_groups(column, tests["outcome"], warmup, tests["total"], partial)
    return {
        "id": merged.ids,
        "tests": [counts[g] for g in merged.ids],
        "total": [round(t, 6) for t in merged.total],
        "span": [spans.get(g, t) for g, t in zip(merged.ids, merged.total, strict=True)],
        "deselected": [deselected[g] for g in merged.ids],
        "whole": merged.whole,
    }


def _merged_threads(inputs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The shards' threads' CPU time and waits, summed, where every shard measured them."""
    found = [d["run"].get(THREADS_WAIT) for _, d in inputs]
    if not found or any(part is None for part in found):
        return {}
    return {
        THREADS_WAIT: {
            name: round(sum(float(part[name]) for part in found), 6) for name in ("ran", "waited")
        }
    }
