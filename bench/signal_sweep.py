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
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import signal_runs
from bench.signal_quality import Array, scenario, scenario_rates
from pytest_accel.perf.analysis.changes import ChangeRule
from pytest_accel.perf.analysis.rule import Rule, row_median, sample_spread

SINGLE: list[dict[str, Any]] = [
    {},
    {"large_k_factor": 0.5},
    {"large_k_factor": 0.45},
    {"large_k_factor": 0.4},
    {"large_ratio": 1.4, "large_k_factor": 0.5},
]
# The oracle's shape (bench/signal_bound.py) with the noise estimated: a regression at
# ``a + b * spread**2`` log seconds or 4.5 spreads, the floors as the rule's.
SHAPED = [(0.36, 4.0), (0.38, 4.0), (0.36, 4.5), (0.33, 3.5)]
SHORT: list[dict[str, Any]] = [
    {},
    {"short_floor": 0.17},
    {"short_floor": 0.2},
    {"margin": 0.6},
]


def shaped_flags(current: Array, samples: Array, a: float, b: float) -> npt.NDArray[np.bool_]:
    rule = Rule()
    centre, spread = sample_spread(samples, rule)
    median = row_median(samples)
    rise = np.log(current) - centre
    floors = (
        (current >= rule.min_duration)
        & (current - median >= rule.min_delta)
        & (current > median * rule.threshold)
    )
    flags: npt.NDArray[np.bool_] = floors & (
        (rise > rule.mad_k * spread) | (rise > a + b * spread**2)
    )
    return flags


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
    for a, b in SHAPED:
        groups = [scenario(seed) for seed in seeds]
        flagged = {
            name: 100 * float(np.mean([shaped_flags(*g[name], a, b).mean() for g in groups]))
            for name in ("unchanged", "2x")
        }
        print(
            f"| oracle-shaped, a={a} b={b} | {flagged['unchanged']:.2f}% | {flagged['2x']:.2f}% | |"
        )
    print()
    print("| short tier | false changes a run | 2x named within three runs | spike as a change |")
    print("| --- | ---: | ---: | ---: |")
    for settings in SHORT:
        found = [signal_runs.short_history(seed, Rule(), ChangeRule(**settings)) for seed in seeds]
        mean = {k: 100 * float(np.mean([f[k] for f in found])) for k in found[0]}
        print(
            f"| {settings or 'as released'}"
            f" | {mean['unchanged tests reported as slowed by a change, per run']:.2f}%"
            f" | {mean['2x slower named as a change within three runs']:.2f}%"
            f" | {mean['one-run 2x spike reported as a change']:.2f}% |"
        )


if __name__ == "__main__":
    main()
