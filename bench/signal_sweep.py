"""The single-run rule's and the short tier's settings swept over the simulations of
``signal_quality.py`` (the same seeds): what catching more 2x slowdowns, or fewer spikes
as changes, would cost in false alarms.  docs/benchmarks.md has the tables.

    python bench/signal_sweep.py --seed 1000 --seeds 10
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import signal_runs
from bench.signal_quality import scenario_rates
from pytest_accel.perf.analysis.changes import ChangeRule
from pytest_accel.perf.analysis.rule import Rule

SINGLE: list[dict[str, Any]] = [
    {},
    {"large_k_factor": 0.5},
    {"large_k_factor": 0.45},
    {"large_k_factor": 0.4},
    {"large_ratio": 1.4, "large_k_factor": 0.5},
]
SHORT: list[dict[str, Any]] = [
    {},
    {"short_floor": 0.17},
    {"short_floor": 0.2},
    {"margin": 0.6},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    seeds = range(args.seed, args.seed + args.seeds)
    print("| single-run rule | unchanged flagged | 2x caught | speedguard: unchanged, 2x |")
    print("| --- | ---: | ---: | ---: |")
    for settings in SINGLE:
        rates = [scenario_rates(seed, replace(Rule(), **settings)) for seed in seeds]
        ours = {k: 100 * float(np.mean([r[k][0] for r in rates])) for k in rates[0]}
        theirs = {k: 100 * float(np.mean([r[k][1] for r in rates])) for k in rates[0]}
        print(
            f"| {settings or 'as released'} | {ours['unchanged']:.2f}% | {ours['2x']:.2f}% |"
            f" {theirs['unchanged']:.2f}%, {theirs['2x']:.2f}% |"
        )
    print()
    print("| short tier | false changes a run | 2x named on its second run | spike as a change |")
    print("| --- | ---: | ---: | ---: |")
    for settings in SHORT:
        found = [signal_runs.short_history(seed, Rule(), ChangeRule(**settings)) for seed in seeds]
        mean = {k: 100 * float(np.mean([f[k] for f in found])) for k in found[0]}
        print(
            f"| {settings or 'as released'}"
            f" | {mean['unchanged tests reported as slowed by a change, per run']:.2f}%"
            f" | {mean['2x slower named as a change on its second run']:.2f}%"
            f" | {mean['one-run 2x spike reported as a change']:.2f}% |"
        )


if __name__ == "__main__":
    main()
