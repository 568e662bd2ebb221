"""``pytest-accel export``'s format: one JSON object per test per run, one a line, for
a warehouse (BigQuery, ClickHouse, PostgreSQL's ``jsonb``).  Flat and typed the same in
every line: a column's type never depends on the run (docs/format.md, "Export")."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

EXPORT_VERSION = 1
FRAMEWORKS = ("jax", "jaxlib", "libtpu", "torch", "cuda", "rocm")  # null where not installed
# The record's per-test maps, as columns (seconds; null where the run has none).
_MAPS = ("compile_seconds", "trace_seconds", "call_compile_seconds")


def export_rows(record: Mapping[str, Any], source: str) -> Iterator[dict[str, Any]]:
    """One row per test of a checked record (``formats.record.check_record``), in the
    record's order; ``source``: where the record was read (a file, a store's URL)."""
    run, env, tests = record["run"], record["env"], record["tests"]
    frameworks = env.get("frameworks", {})
    shared = {
        "export_version": EXPORT_VERSION,
        "source": source,
        "run_id": run.get("id"),
        "started": run["started"],
        "duration": run.get("duration"),
        "commit": run.get("commit"),
        "branch": run.get("branch"),
        "shard": run.get("shard"),
        "workers": run.get("workers", 0),
        "exitstatus": run.get("exitstatus", 0),
        "interrupted": run.get("exitstatus", 0) == 2,
        "key": env["key"],
        "platform": env.get("platform"),
        "device_kind": env.get("device_kind"),
        "device_count": env.get("device_count"),
        "python": env.get("python"),
        "pytest": env.get("pytest"),
        **{name: frameworks.get(name) for name in FRAMEWORKS},
    }
    warmup = set(tests.get("warmup", ()))
    quarantined = set(tests.get("quarantined", ()))
    attempts = tests.get("attempts", {})
    memory = tests.get("device_memory", {})
    maps = {name: tests.get(name, {}) for name in _MAPS}
    compiles = tests.get("compiles", {})
    for row, ident in enumerate(tests["id"]):
        cpu_wait = tests.get("cpu_wait")
        yield {
            **shared,
            "test": ident,
            "module": tests["module"][row],
            "class": tests["class"][row],
            "outcome": tests["outcome"][row],
            "setup": tests["setup"][row],
            "call": tests["call"][row],
            "teardown": tests["teardown"][row],
            "total": tests["total"][row],
            "gc": tests["gc"][row],
            "cpu_wait": None if cpu_wait is None else cpu_wait[row],
            "worker": tests["worker"][row],
            "warmup": ident in warmup,
            "quarantined": ident in quarantined,
            "attempts": len(attempts.get(ident, ())) or 1,
            "compiles": compiles.get(ident),
            **{name: values.get(ident) for name, values in maps.items()},
            "device_memory_peak": max(memory[ident].values()) if memory.get(ident) else None,
        }
