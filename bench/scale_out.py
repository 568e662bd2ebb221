"""Scaling-out costs: merging 64 shard records of 5,000 tests, and planning 100,000 tests
into 64 shards, with the plan's imbalance next to pytest-split's two algorithms on the
same durations (when pytest-split is installed, as in build/bench-venv).

    build/bench-venv/bin/python bench/scale_out.py
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import synthetic
from pytest_accel.scaleout.sharding import make_units, plan, weights_for

SHARDS, PER_SHARD, PLAN_TESTS = 64, 5_000, 100_000


def shard_record(index: int, rng: random.Random) -> dict[str, Any]:
    calls, groups = {}, {}
    for t in range(PER_SHARD):
        module = f"tests/test_m{index:02d}_{t // 250:02d}.py"
        nodeid = f"{module}::TestC{t // 50}::test_{t}"
        calls[nodeid] = rng.lognormvariate(-2, 1.2)
        groups[nodeid] = (f"{module}::TestC{t // 50}", module)
    return synthetic.record(
        calls, key="tpu/TPU v6 lite/x8", groups=groups, shard=f"{index + 1}/{SHARDS}"
    )


def measure_merge(directory: Path) -> tuple[float, float]:
    rng = random.Random(5)
    paths = []
    for index in range(SHARDS):
        path = directory / f"shard{index:02d}.json"
        path.write_bytes(orjson.dumps(shard_record(index, rng)))
        paths.append(str(path))
    walls, rss = [], []
    for _ in range(3):
        start = time.perf_counter()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest_accel",
                "merge",
                "-o",
                str(directory / "m.json"),
                *paths,
            ],
            stdout=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(process.pid, 0)
        walls.append(time.perf_counter() - start)
        rss.append(usage.ru_maxrss / 1024)
        assert os.waitstatus_to_exitcode(status) == 0
    return statistics.median(walls), statistics.median(rss)


class FakeItem(NamedTuple):
    nodeid: str


def measure_plan() -> None:
    rng = random.Random(9)
    nodeids = [
        f"tests/test_m{i // 500:03d}.py::TestC{i // 25}::test_{i}" for i in range(PLAN_TESTS)
    ]
    durations = {n: rng.lognormvariate(-2, 1.2) for n in nodeids}
    groups = {n: n.rsplit("::", 1)[0] for n in nodeids}
    rows = []
    for by in ("test", "class"):
        start = time.perf_counter()
        weights = weights_for(nodeids, durations)
        result = plan(make_units(nodeids, groups, weights, by), SHARDS)
        elapsed = time.perf_counter() - start
        rows.append((f"pytest-accel (by {by})", elapsed, result.imbalance()))
    try:
        from pytest_split.algorithms import Algorithms  # type: ignore[import-not-found]
    except ImportError:
        print("(pytest-split not installed: its rows are left out)")
    else:
        items = [FakeItem(n) for n in nodeids]
        total = sum(durations.values())
        for algorithm in (Algorithms.least_duration, Algorithms.duration_based_chunks):
            start = time.perf_counter()
            groups_out = algorithm.value(SHARDS, items, durations)
            elapsed = time.perf_counter() - start
            loads = [g.duration for g in groups_out]
            rows.append((f"pytest-split {algorithm.name}", elapsed, max(loads) / (total / SHARDS)))
    print(f"\nplanning {PLAN_TESTS} tests into {SHARDS} shards (log-normal durations):\n")
    print("| planner | time (s) | largest shard / ideal |\n| --- | ---: | ---: |")
    for name, elapsed, imbalance in rows:
        print(f"| {name} | {elapsed:.3f} | {imbalance:.4f} |")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wall, rss = measure_merge(Path(tmp))
    print(f"pytest-accel merge of {SHARDS} records x {PER_SHARD} tests (median of 3):\n")
    print("| wall (s) | peak RSS (MB) |\n| ---: | ---: |")
    print(f"| {wall:.2f} | {rss:.0f} |")
    measure_plan()


if __name__ == "__main__":
    main()
