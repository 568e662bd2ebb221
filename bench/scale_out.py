"""Scaling-out costs: merging 64 shard records of 5,000 tests, and planning 100,000 tests
into 64 shards, with the plan's imbalance next to pytest-split's two algorithms on the
same durations (when pytest-split is installed, as in build/bench-venv).

    build/bench-venv/bin/python bench/scale_out.py
    build/bench-venv/bin/python bench/scale_out.py --repeat 9 --against ../before

``--against DIR`` (a checkout of another commit) also times ``merge`` with that tree's
source on the same records as version 2, paired: alternating rounds, and the median of
the rounds' ratios.
"""

from __future__ import annotations

import argparse
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


def measure_merge(
    directory: Path, repeat: int, against: Path | None
) -> tuple[list[float], list[float], list[float], list[float]]:
    """``merge`` of the shard records: walls and peak RSS with this tree, and with
    ``against``'s (the same records as version 2), paired round by round."""
    rng = random.Random(5)
    paths, listed = [], []
    for index in range(SHARDS):
        data = shard_record(index, rng)
        path = directory / f"shard{index:02d}.json"
        path.write_bytes(orjson.dumps(data))
        paths.append(str(path))
        if against is not None:
            old = directory / f"shard{index:02d}.v2.json"
            old.write_bytes(orjson.dumps(synthetic.as_version_2(data)))
            listed.append(str(old))
    now: tuple[list[float], list[float]] = ([], [])
    then: tuple[list[float], list[float]] = ([], [])
    then_env = {**os.environ, "PYTHONPATH": str(against.resolve() / "src")} if against else None
    for round_ in range(repeat):
        pair = [(now, paths, None), (then, listed, then_env)] if against else [(now, paths, None)]
        for into, inputs, env in pair if round_ % 2 == 0 else reversed(pair):
            out = str(directory / "m.json")
            command = [sys.executable, "-m", "pytest_accel", "merge", "-o", out, *inputs]
            start = time.perf_counter()
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(process.pid, 0)
            into[0].append(time.perf_counter() - start)
            into[1].append(usage.ru_maxrss / 1024)
            assert os.waitstatus_to_exitcode(status) == 0
    return (*now, *then)


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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="a checkout to time merge against, paired"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        walls, rss, then_walls, then_rss = measure_merge(Path(tmp), args.repeat, args.against)
    median = statistics.median
    print(
        f"pytest-accel merge of {SHARDS} records x {PER_SHARD} tests (median of {args.repeat}):\n"
    )
    print("| wall (s) | peak RSS (MB) |\n| ---: | ---: |")
    print(f"| {median(walls):.2f} | {median(rss):.0f} |")
    if args.against:
        wall = median(a / b for a, b in zip(walls, then_walls, strict=True))
        memory = median(a / b for a, b in zip(rss, then_rss, strict=True))
        print(
            f"\nagainst {args.against}: {median(then_walls):.2f} s, {median(then_rss):.0f} MB;"
            f" paired wall ratio {wall:.3f}x, paired RSS ratio {memory:.3f}x"
        )
    measure_plan()


if __name__ == "__main__":
    main()
