"""Change detection over a history that switches layout (collect.sh's records), as
CI's --perf-update-baseline builds it: 8 serial runs, then 8 with -n 2, then 8 merged
2-shard runs, each compared with the runs before it (window 20) and then folded in.

    python bench/real_suite/rolling.py RUNS OUT [old]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUNS = Path(sys.argv[1])
OUT = Path(sys.argv[2])
OLD = len(sys.argv) > 3 and sys.argv[3] == "old"
CLI = (
    ["env", f"PYTHONPATH={os.environ['OLD_SRC']}", sys.executable, "-m", "pytest_accel"]
    if OLD
    else [sys.executable, "-m", "pytest_accel"]
)
OUT.mkdir(exist_ok=True)
baseline = OUT / "rolling.json"
baseline.unlink(missing_ok=True)
order = [f"{p}{i}.json" for p in ("serial", "xdist", "shards") for i in range(1, 9)]
changes_per_run, alarms_per_run = [], []
for name in order:
    record = RUNS / name
    if baseline.exists():
        done = subprocess.run(
            [*CLI, "compare", str(record), "--baseline", str(baseline), "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        )
        c = json.loads(done.stdout)
        slow = [x for x in c["changes"] if x["after"] > x["before"]]
        changes_per_run.append((name, len(c["changes"])))
        alarms_per_run.append(
            (name, len(c["regressions"]) + len(slow) + len(c.get("recompiled", [])))
        )
    subprocess.run(
        [*CLI, "baseline", str(record), "--into", str(baseline)], capture_output=True, check=True
    )
print("changes per run:", " ".join(f"{n.removesuffix('.json')}:{k}" for n, k in changes_per_run))
print("alarms per run: ", " ".join(f"{n.removesuffix('.json')}:{k}" for n, k in alarms_per_run))
print(
    "total changes",
    sum(k for _, k in changes_per_run),
    "total alarms",
    sum(k for _, k in alarms_per_run),
)
