"""Signal quality of the regression rule and the change detector, by seeded simulation
(no timing involved).  docs/regressions.md shows the tables and says what they mean.

``--mode single``: one run against a baseline of 20 samples per test, with per-test
log-normal noise of 3-30% and an occasional 3x outlier in the history; 10,000 unchanged
tests plus groups slowed by 2x, +50% and +30%.  This project's rule and
pytest-speedguard's published rule (flag when current > 1.5 x median and > median + 3 x
1.4826 x MAD, floor 50 ms) see the same data.  Then two runner scenarios through the
full comparison: a runner 30% slower overall with ten tests truly 2x slower, and a run
where 40% of the tests got 0.6x faster for their own reasons (a warm compile cache) and
the rest did not change.

``--mode runs``: run sequences (``bench/signal_runs.py``), for the change detector.
``--mode short``: a 3-run baseline and 4 runs after it, each folded in: the change
detector's short tier against the rule without it (0.3's).

    python bench/signal_quality.py --mode single --seed 1000 --seeds 10
    python bench/signal_quality.py --mode runs --seed 1000 --seeds 10
    python bench/signal_quality.py --mode short --seed 1000 --seeds 10
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import signal_runs
from pytest_accel.perf.analysis.changes import ChangeRule
from pytest_accel.perf.analysis.comparison import compare
from pytest_accel.perf.analysis.rule import MAD_SCALE, Rule, judge
from pytest_accel.perf.formats.baseline import KINDS, EnvHistory, Run
from pytest_accel.perf.model.columns import Columns
from pytest_accel.perf.model.timings import Groups, RunIdentity, RunTimings

Array = npt.NDArray[np.float64]
UNCHANGED, PER_GROUP, WINDOW, OUTLIER_RATE = 10_000, 300, 20, 0.03
GROUPS = (
    ("unchanged", 1.0, UNCHANGED),
    ("2x", 2.0, PER_GROUP),
    ("+50%", 1.5, PER_GROUP),
    ("+30%", 1.3, PER_GROUP),
)


def history(rng: np.random.Generator, medians: Array, sigma: Array) -> Array:
    noise = np.exp(sigma[:, None] * rng.standard_normal((len(medians), WINDOW)))
    outliers = np.where(rng.random((len(medians), WINDOW)) < OUTLIER_RATE, 3.0, 1.0)
    return medians[:, None] * noise * outliers


def speedguard_flags(current: Array, samples: Array) -> npt.NDArray[np.bool_]:
    median = np.median(samples, axis=1)
    mad = np.median(np.abs(samples - median[:, None]), axis=1)
    flags: npt.NDArray[np.bool_] = (
        (current > 1.5 * median) & (current > median + 3 * MAD_SCALE * mad) & (current >= 0.05)
    )
    return flags


def scenario(seed: int) -> dict[str, tuple[Array, Array]]:
    """Each group's (current timings, 20-sample histories), from ``seed``."""
    rng = np.random.default_rng(seed)
    groups: dict[str, tuple[Array, Array]] = {}
    for name, factor, count in GROUPS:
        medians = np.exp(rng.uniform(np.log(0.15), np.log(5.0), count))
        sigma = rng.uniform(0.03, 0.30, count)
        samples = history(rng, medians, sigma)
        current = medians * factor * np.exp(sigma * rng.standard_normal(count))
        groups[name] = (current, samples)
    return groups


def scenario_rates(seed: int, rule: Rule) -> dict[str, tuple[float, float]]:
    rates: dict[str, tuple[float, float]] = {}
    for name, (current, samples) in scenario(seed).items():
        ours = judge(current, samples, rule).regressed
        rates[name] = (float(ours.mean()), float(speedguard_flags(current, samples).mean()))
    return rates


def as_comparison_inputs(samples: Array, current: Array) -> tuple[RunTimings, EnvHistory]:
    """Simulated tests as the comparison's inputs: one run, a baseline of its runs."""
    ids = [f"t{i:05d}" for i in range(len(current))]
    env = EnvHistory()
    env.ids["tests"] = ids
    empty: dict[str, list[float | None]] = {kind: [] for kind in KINDS}
    env.runs = [
        Run(RunIdentity(), Columns({**empty, "tests": column.tolist()})) for column in samples.T
    ]
    run = RunTimings(
        key="sim",
        identity=RunIdentity(),
        ids=ids,
        outcome=["passed"] * len(ids),
        call=current.tolist(),
        total=current.tolist(),
        cls=[None] * len(ids),
        module=[None] * len(ids),
        warmup=[False] * len(ids),
        classes=Groups(),
        modules=Groups(),
    )
    return run, env


def runner_scenario(
    seed: int, rule: Rule, factors: Array
) -> tuple[list[str], float, bool, int, int]:
    """Each test scaled by ``factors``; (flagged test ids, speed applied, suite reported,
    of them unchanged-but-flagged by a correction applied alone, compared)."""
    rng = np.random.default_rng(seed)
    count = len(factors)
    medians = np.exp(rng.uniform(np.log(0.15), np.log(5.0), count))
    sigma = rng.uniform(0.03, 0.30, count)
    samples = history(rng, medians, sigma)
    current = medians * factors * np.exp(sigma * rng.standard_normal(count))
    run, env = as_comparison_inputs(samples, current)
    result = compare(run, env, rule)
    flagged = [f.id for f in result.timing.regressions if f.kind == "test"]
    suite = any(f.kind == "session" for f in result.timing.regressions)
    # The 0.1 correction: divide by the median ratio and judge the corrected timing alone.
    ratio = float(np.median(current / np.median(samples, axis=1)))
    alone = judge(current / ratio, samples, rule).regressed
    unchanged = factors == 1.0
    return (
        flagged,
        result.timing.speed,
        suite,
        int(np.sum(alone & unchanged)),
        result.timing.compared,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("single", "runs", "short"), default="single")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=10, help="seeds averaged")
    for name in ("t", "t_per_run", "margin", "hold"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=None)
    args = parser.parse_args()
    rule = Rule()
    if args.mode == "short":
        tiers = {
            "short tier": (ChangeRule(), True),
            "named on the second run (0.4)": (ChangeRule(short_runs=2), False),
            "without it (0.3)": (ChangeRule(short_before=10**6), False),
        }
        found = {
            name: [
                signal_runs.short_history(args.seed + run, rule, tier, short_tier=pending)
                for run in range(args.seeds)
            ]
            for name, (tier, pending) in tiers.items()
        }
        print(f"3-run baselines, 4 runs judged and folded; {args.seeds} seeds from {args.seed}\n")
        print(f"| measure | {' | '.join(tiers)} |")
        print("| --- |" + " ---: |" * len(tiers))
        for measure in found["short tier"][0]:
            cells = [
                f"{sum(r[measure] for r in rates) / len(rates):.3%}" for rates in found.values()
            ]
            print(f"| {measure} | {' | '.join(cells)} |")
        return
    if args.mode == "runs":
        overrides = {
            name: getattr(args, name)
            for name in ("t", "t_per_run", "margin", "hold")
            if getattr(args, name) is not None
        }
        change_rule = ChangeRule(**overrides)
        outcomes = [
            signal_runs.simulate(args.seed + run, rule, change_rule) for run in range(args.seeds)
        ]
        print(f"change detector: {change_rule}; {args.seeds} seeds from {args.seed}\n")
        print(signal_runs.table(signal_runs.average(outcomes)))
        print("\nThe bound: an ideal t-test at 0.3% false alarms per run\n")
        print(signal_runs.ideal_t_test(args.seed))
        return
    totals: dict[str, list[float]] = {name: [0.0, 0.0] for name, _, _ in GROUPS}
    for run in range(args.seeds):
        for name, (ours, theirs) in scenario_rates(args.seed + run, rule).items():
            totals[name][0] += ours / args.seeds
            totals[name][1] += theirs / args.seeds
    print(f"rule: {rule}; {args.seeds} seeds from {args.seed}\n")
    print("| tests | count | flagged by pytest-accel | flagged by speedguard's rule |")
    print("| --- | ---: | ---: | ---: |")
    for name, _, count in GROUPS:
        ours, theirs = totals[name]
        print(f"| {name} | {count} | {ours:.2%} | {theirs:.2%} |")
    print(
        "\n| slower runner (x1.3), seed | unchanged flagged | of 10 truly 2x caught |"
        " suite total a regression | speed applied |"
    )
    print("| --- | ---: | ---: | --- | ---: |")
    for run in range(args.seeds):
        factors = np.full(UNCHANGED + 10, 1.3)
        factors[UNCHANGED:] *= 2.0
        flagged, speed, suite, _, _ = runner_scenario(args.seed + run, rule, factors)
        caught = sum(int(i[1:]) >= UNCHANGED for i in flagged)
        print(
            f"| {args.seed + run} | {(len(flagged) - caught) / UNCHANGED:.2%} | {caught} |"
            f" {'yes' if suite else 'no'} | {speed:.3f} |"
        )
    print(
        "\n| 40% of tests 0.6x faster on their own, seed | unchanged flagged |"
        " unchanged flagged by a correction alone (0.1) |"
    )
    print("| --- | ---: | ---: |")
    for run in range(args.seeds):
        factors = np.ones(UNCHANGED)
        factors[: UNCHANGED * 4 // 10] = 0.6
        flagged, _, _, alone, _ = runner_scenario(args.seed + run, rule, factors)
        unchanged = UNCHANGED - UNCHANGED * 4 // 10
        wrongly = sum(int(i[1:]) >= UNCHANGED * 4 // 10 for i in flagged)
        print(f"| {args.seed + run} | {wrongly / unchanged:.2%} | {alone / unchanged:.2%} |")


if __name__ == "__main__":
    main()
