"""False alarms of pytest-accel on a real suite, unchanged, from collect.sh's records.

    python bench/real_suite/analyse.py RUNS OUT [execution|wall|old]

``old``: the release in the worktree at $OLD_SRC (its ``src``) on the same records.

Baselines (rounds 1-5: 5 runs each; BASE_FROM=3: rounds 3-5, the 3 runs docs/ci.md
builds): serial, xdist 2, 2 merged shards, and a mixed history (the three
interleaved).  Judged: rounds 6-8 of each layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RUNS = Path(sys.argv[1])
OUT = Path(sys.argv[2])
TIME = sys.argv[3] if len(sys.argv) > 3 else "execution"
BASE = range(int(os.environ.get("BASE_FROM", "1")), 6)
JUDGED = range(6, 9)
CLI = [sys.executable, "-m", "pytest_accel"]
OLD = TIME == "old"  # the release before compile-aware timing, from a worktree
if OLD:
    CLI = ["env", f"PYTHONPATH={os.environ['OLD_SRC']}", sys.executable, "-m", "pytest_accel"]
TIMEFLAG = [] if OLD else ["--time", TIME]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)


OUT.mkdir(exist_ok=True)
for i in [*BASE, *JUDGED]:
    merged = RUNS / f"shards{i}.json"
    if not merged.exists():
        done = run(
            "merge", "-o", str(merged), str(RUNS / f"s1_{i}.json"), str(RUNS / f"s2_{i}.json")
        )
        assert done.returncode == 0, done.stderr


def baseline(name: str, records: list[Path]) -> Path:
    path = OUT / f"{name}-{len(BASE)}runs-{TIME}.json"
    path.unlink(missing_ok=True)
    done = run("baseline", *map(str, records), "--into", str(path), *TIMEFLAG)
    assert done.returncode == 0, done.stderr
    return path


layouts = {
    "serial": "serial{}",
    "xdist 2": "xdist{}",
    "2 merged shards": "shards{}",
    "shard 1/2, in-run": "s1_{}",
    "shard 2/2, in-run": "s2_{}",
}
baselines = {
    "serial": baseline("serial", [RUNS / f"serial{i}.json" for i in BASE]),
    "xdist 2": baseline("xdist", [RUNS / f"xdist{i}.json" for i in BASE]),
    "2 merged shards": baseline("shards", [RUNS / f"shards{i}.json" for i in BASE]),
    "mixed": baseline(
        "mixed",
        [
            RUNS / p.format(i)
            for i in BASE
            for p in ("serial{}.json", "xdist{}.json", "shards{}.json")
        ],
    ),
}


def judge(record: Path, against: Path) -> dict[str, Any]:
    done = run("compare", str(record), "--baseline", str(against), "--format", "json", *TIMEFLAG)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


rows = []
for layout, pattern in layouts.items():
    own = "2 merged shards" if layout.startswith("shard ") else layout
    for against in ("serial", own, "mixed") if layout != "serial" else ("serial", "mixed"):
        cells = []
        for i in JUDGED:
            c = judge(RUNS / (pattern.format(i) + ".json"), baselines[against])
            slow = [x for x in c["changes"] if x["after"] > x["before"]]
            recompiled = c.get("recompiled", [])
            alarms = len(c["regressions"]) + len(slow) + len(recompiled)
            named = {x["id"] for x in c["regressions"] + slow + recompiled if x["kind"] == "test"}
            share = 100 * len(named) / max(c["compared"], 1)
            cells.append(f"{alarms} ({share:.1f}%, changes {len(c['changes'])})")
            if alarms:
                for x in c["regressions"]:
                    print(
                        "   ",
                        layout,
                        "vs",
                        against,
                        i,
                        "REG",
                        x["kind"] + (" tracing" if x.get("tracing") else ""),
                        x["id"][-60:],
                        x["ratio"],
                        x.get("z"),
                        x.get("compiling"),
                    )
                for x in slow:
                    print(
                        "   ",
                        layout,
                        "vs",
                        against,
                        i,
                        "CHG",
                        x["kind"] + (" tracing" if x.get("tracing") else ""),
                        x["id"][-60:],
                        x["ratio"],
                        x["runs"],
                    )
                for x in recompiled:
                    print(
                        "   ",
                        layout,
                        "vs",
                        against,
                        i,
                        "RECOMP",
                        x["id"][-60:],
                        x["current"],
                        x["baseline"],
                    )
        rows.append(f"| {layout} | {against} | {' / '.join(cells)} | {c['compared']} |")
print(f"time = {TIME}, baselines of {len(BASE)} runs")
print("| run layout | baseline | alarms per run (tests flagged, changes) | compared |")
print("| --- | --- | --- | ---: |")
print("\n".join(rows))
