"""``pytest-accel baseline R1 ... RN --into B`` as N grows: the wall time of folding N
records (50 tests each, a window that keeps them all) into a new baseline, per N, and
each N's time over the smallest N's, against N over the smallest N (linear growth: the
two ratios alike).

    python bench/fold_scale.py --records 250,500,1000,2000 --repeat 3

The records come from the plugin's own encoder (``bench/synthetic.py``), each with its
own run id and start, a minute apart.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import synthetic

TESTS = 50


def write_records(directory: Path, count: int) -> list[str]:
    calls = {f"t.py::test_{i}": 0.01 + i * 1e-4 for i in range(TESTS)}
    paths = []
    for n in range(count):
        data = synthetic.record(calls, started=synthetic.STARTED + n * 60)
        data["run"]["id"] = f"{n:016x}"
        path = directory / f"r{n:05d}.json"
        path.write_bytes(orjson.dumps(data))
        paths.append(str(path))
    return paths


def fold(paths: list[str], into: Path) -> float:
    into.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest_accel", "baseline", *paths, "--into", str(into)]
    start = time.perf_counter()
    subprocess.run([*command, "--window", str(len(paths))], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", default="250,500,1000,2000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.records.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        paths = write_records(directory, max(sizes))
        medians = {
            n: statistics.median(fold(paths[:n], directory / "b.json") for _ in range(args.repeat))
            for n in sizes
        }
    first = sizes[0]
    print("| records | median wall (s) | time / smallest | records / smallest |")
    print("| ---: | ---: | ---: | ---: |")
    for n in sizes:
        print(f"| {n} | {medians[n]:.2f} | {medians[n] / medians[first]:.2f} | {n / first:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
