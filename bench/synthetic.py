"""Synthetic records for benchmarks and tests, written by the plugin's own encoder.

Building them through ``TimingTable`` and ``encode_record`` keeps them in the exact format
a real run writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import orjson

from pytest_accel.hardware.detection import Detection
from pytest_accel.perf.formats.record import RunInfo, encode_record, record_head
from pytest_accel.perf.model.samples import KINDS
from pytest_accel.perf.model.table import TimingTable

STARTED = datetime(2026, 11, 22, tzinfo=timezone.utc).timestamp()


def record(
    calls: Mapping[str, float],
    *,
    key: str = "cpu/x1",
    groups: Mapping[str, tuple[str | None, str | None]] | None = None,
    outcome: str = "passed",
    shard: str | None = None,
    started: float = STARTED,
    warmup: bool = False,
) -> dict[str, Any]:
    """A record whose tests took ``calls[nodeid]`` seconds in their call phase.

    ``groups`` maps a node id to its (class, module); by default the module is the
    node id's file and there is no class.  With ``warmup`` the tests get start times, so
    the first one is marked as the one that paid the process's warm-up, as in a real run.
    """
    table = TimingTable()
    clock = started
    for nodeid, call in calls.items():
        row, _ = table.row(nodeid)
        cls, module = (groups or {}).get(nodeid, (None, nodeid.split("::")[0]))
        table.class_ids[row], table.module_ids[row] = cls, module
        start, stop = (clock, clock + call) if warmup else (0.0, 0.0)
        table.add(row, "setup", "passed", 0.0, start=start, stop=start)
        table.add(row, "call", outcome, call, start=start, stop=stop)
        table.add(row, "teardown", "passed", 0.0, start=stop, stop=stop)
        clock += call
    platform, *rest = key.split("/")
    detection = Detection(
        platform, int(rest[-1].lstrip("x")) if rest else 1, "/".join(rest[:-1]) or platform
    )
    run = RunInfo(started, clock - started, "abc123", "main", shard, 0, 0)
    head = record_head(run, detection, key, {}, "9.0.0")
    data: dict[str, Any] = orjson.loads(b"".join(encode_record(table, head)))
    return data


def as_version_2(data: dict[str, Any]) -> dict[str, Any]:
    """A record with every test column a list (version 3's runs of equal values
    expanded), as version 2: the same tests, for a tree from before version 3."""
    tests = dict(data["tests"])
    for name, column in tests.items():
        if isinstance(column, dict) and "counts" in column:
            pairs = zip(column["values"], column["counts"], strict=True)
            tests[name] = [value for value, count in pairs for _ in range(count)]
    return {**data, "version": 2, "tests": tests}


def as_baseline_version_3(data: dict[str, Any]) -> dict[str, Any]:
    """A version 4 baseline with its hexadecimal columns in base64, as version 3: the
    same samples, for a tree from before version 4."""
    import base64

    envs = {}
    for key, env in data["envs"].items():
        runs = [
            {
                name: base64.b64encode(bytes.fromhex(value)).decode()
                if name in KINDS and isinstance(value, str)
                else value
                for name, value in run.items()
            }
            for run in env["runs"]
        ]
        envs[key] = {**env, "runs": runs}
    return {**data, "version": 3, "envs": envs}
