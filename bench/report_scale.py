"""The HTML report at scale: a 10,000-test record against a 20-run baseline, with a
50-run flaky history, through ``pytest-accel report``.  Wall time and peak RSS of the
process, and the page's size.  Target (issue 14): under 5 MB, under 2 s.

    python bench/report_scale.py [--tests 10000] [--repeat 5]
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
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory, add_run
from pytest_accel.perf.formats.record import check_record, timings
from pytest_accel.perf.offline import baseline_json

KEY = "tpu/TPU v6 lite/x8"


def write_inputs(directory: Path, tests: int, runs: int = 20) -> list[str]:
    """Record, baseline (built run by run, as a nightly job does) and flaky history."""
    rng = np.random.default_rng(5)
    medians = np.exp(rng.uniform(np.log(0.01), np.log(5.0), tests))
    ids = [
        f"tests/test_mod_{i // 100:04d}.py::TestC{i % 3}::test_{i}[case-{i % 7}]"
        for i in range(tests)
    ]
    groups = {i: (i.rsplit("::", 1)[0], i.split("::")[0]) for i in ids}
    env = EnvHistory()
    for index in range(runs):
        factor = np.exp(0.1 * rng.standard_normal(tests))
        factor[: tests // 200] *= 2.0 if index >= runs - 3 else 1.0  # some changes
        data = synthetic.record(
            dict(zip(ids, (medians * factor).tolist(), strict=True)),
            key=KEY,
            groups=groups,
            started=synthetic.STARTED + 3600 * index,
        )
        data["run"]["commit"] = f"{index:07x}abc"
        add_run(env, timings(check_record("r.json", data)), runs)
    current = medians * np.exp(0.1 * rng.standard_normal(tests))
    current[: tests // 200] *= 2.0
    current[tests // 200 : tests // 100] *= 2.5  # some regressions
    record = synthetic.record(dict(zip(ids, current.tolist(), strict=True)), key=KEY, groups=groups)
    letters = np.where(rng.random((tests, 50)) < 0.002, "F", "P")
    history = {
        "schema": "pytest-accel/flaky-history",
        "version": 1,
        "window": 50,
        "envs": {
            KEY: {
                "platform": "tpu",
                "runs": [{"started": "2026-11-01T00:00:00Z"}] * 50,
                "tests": {i: "".join(row) for i, row in zip(ids, letters.tolist(), strict=True)},
            }
        },
    }
    paths = [directory / "record.json", directory / "baseline.json", directory / "history.json"]
    paths[0].write_bytes(orjson.dumps(record))
    paths[1].write_bytes(orjson.dumps(baseline_json(Baseline({KEY: env}))))
    paths[2].write_bytes(orjson.dumps(history))
    return [str(p) for p in paths]


def measure(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``command``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    assert os.waitstatus_to_exitcode(status) == 0, command
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        record, baseline, history = write_inputs(Path(tmp), args.tests)
        out = Path(tmp) / "report.html"
        command = [
            sys.executable, "-m", "pytest_accel", "report", record,
            "--baseline", baseline, "--history", history, "-o", str(out),
        ]  # fmt: skip
        walls, rss = zip(*(measure(command) for _ in range(args.repeat)), strict=True)
        size = out.stat().st_size
    print(f"pytest-accel report: {args.tests} tests, 20-run baseline, 50-run flaky history,")
    print(f"{args.repeat} runs\n")
    print("| tests | median wall (s) | peak RSS (MB) | page (MB) |")
    print("| ---: | ---: | ---: | ---: |")
    print(
        f"| {args.tests} | {statistics.median(walls):.2f} | {statistics.median(rss):.0f} |"
        f" {size / 1e6:.2f} |"
    )


if __name__ == "__main__":
    main()
