"""``pytest-accel flaky`` at scale: a history of 100,000 tests x 50 runs, through the CLI,
with a quarantine proposal written.  Reports wall time and peak RSS of the process.

    python bench/flaky_scale.py [--tests 100000] [--runs 50] [--repeat 3]

The history is realistic in shape: most tests always pass, 2% flip now and then,
0.5% are broken, and a few passed only after a rerun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson


def write_history(path: Path, tests: int, runs: int) -> None:
    rng = np.random.default_rng(5)
    failure_rate = np.zeros(tests)
    failure_rate[: tests // 50] = rng.uniform(0.05, 0.5, tests // 50)  # flaky
    failure_rate[tests // 50 : tests // 50 + tests // 200] = 1.0  # broken
    failures = rng.random((tests, runs)) < failure_rate[:, None]
    letters = np.where(failures, ord("F"), ord("P")).astype(np.uint8)
    reruns = rng.random((tests, runs)) < 0.001
    letters[reruns & ~failures] = ord("K")
    ids = [f"tests/test_mod_{i // 100:04d}.py::TestC::test_{i}[case-{i % 7}]" for i in range(tests)]
    history = {
        "schema": "pytest-accel/flaky-history",
        "version": 1,
        "window": runs,
        "envs": {
            "tpu/TPU v6 lite/x8": {
                "platform": "tpu",
                "runs": [{"started": f"2026-10-{1 + r % 28:02d}T02:00:00Z"} for r in range(runs)],
                "tests": {i: row.tobytes().decode() for i, row in zip(ids, letters, strict=True)},
            }
        },
    }
    path.write_bytes(orjson.dumps(history))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp) / "history.json"
        write_history(history, args.tests, args.runs)
        command = [
            sys.executable,
            "-m",
            "pytest_accel",
            "flaky",
            str(history),
            "--format",
            "json",
            "--write-quarantine",
            str(Path(tmp) / "quarantine.json"),
        ]
        walls, rss = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(process.pid, 0)
            walls.append(time.perf_counter() - start)
            rss.append(usage.ru_maxrss / 1024)
            if os.waitstatus_to_exitcode(status) != 0:
                stderr = process.stderr.read().decode() if process.stderr else ""
                raise SystemExit(f"flaky failed: {stderr}")
        entries = len(orjson.loads((Path(tmp) / "quarantine.json").read_bytes())["entries"])
        print(
            f"pytest-accel flaky: {args.tests} tests x {args.runs} runs"
            f" ({history.stat().st_size / 1e6:.0f} MB of JSON), {entries} flaky tests"
            f" proposed for quarantine, {args.repeat} runs\n"
        )
        print("| median wall (s) | peak RSS (MB) |\n| ---: | ---: |")
        print(f"| {statistics.median(walls):.2f} | {statistics.median(rss):.0f} |")


if __name__ == "__main__":
    main()
