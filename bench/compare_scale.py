"""The offline comparison at scale: a 100,000-test baseline (20 samples each) against a
100,000-test record, through the CLI.  Reports wall time and peak RSS of the process.

    python bench/compare_scale.py [--tests 100000] [--repeat 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import synthetic


def write_inputs(directory: Path, tests: int, samples: int = 20) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)
    medians = np.exp(rng.uniform(np.log(0.01), np.log(5.0), tests))
    history = medians[:, None] * np.exp(0.1 * rng.standard_normal((tests, samples)))
    current = medians * np.exp(0.1 * rng.standard_normal(tests))
    current[: tests // 100] *= 2  # some regressions to report
    ids = [f"tests/test_mod_{i // 100:04d}.py::TestC::test_{i}[case-{i % 7}]" for i in range(tests)]
    key = "tpu/TPU v6 lite/x8"
    baseline = {
        "schema": "pytest-accel/baseline",
        "version": 1,
        "window": samples,
        "envs": {
            key: {
                "tests": {i: {"samples": h} for i, h in zip(ids, history.tolist(), strict=True)},
                "classes": {},
                "modules": {},
            }
        },
    }
    record = synthetic.record(
        dict(zip(ids, current.tolist(), strict=True)),
        key=key,
        groups={i: (i.rsplit("::", 1)[0], i.split("::")[0]) for i in ids},
    )
    base_path, record_path = directory / "baseline.json", directory / "record.json"
    base_path.write_bytes(orjson.dumps(baseline))
    record_path.write_bytes(orjson.dumps(record))
    return base_path, record_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base, record = write_inputs(Path(tmp), args.tests)
        walls, rss = [], []
        command = [
            sys.executable,
            "-m",
            "pytest_accel",
            "compare",
            str(record),
            "--baseline",
            str(base),
            "--format",
            "json",
        ]
        for _ in range(args.repeat):
            start = time.perf_counter()
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(process.pid, 0)
            walls.append(time.perf_counter() - start)
            rss.append(usage.ru_maxrss / 1024)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit("compare failed")
        print(
            f"pytest-accel compare: {args.tests} tests x 20 samples against a {args.tests}-test"
            f" record ({base.stat().st_size / 1e6:.0f} MB + {record.stat().st_size / 1e6:.0f} MB"
            f" of JSON), {args.repeat} runs\n"
        )
        print("| median wall (s) | peak RSS (MB) |\n| ---: | ---: |")
        print(f"| {statistics.median(walls):.2f} | {statistics.median(rss):.0f} |")


if __name__ == "__main__":
    main()
