"""Signal quality of the regression rule, by seeded simulation (no timing involved).

Baselines of 20 samples per test with per-test log-normal noise between 3% and 30% and
an occasional 3x outlier in the history; a current run of 10,000 unchanged tests plus
groups slowed by 2x, +50% and +30%.  This project's rule and pytest-speedguard's
published rule (flag when current > 1.5 x median and > median + 3 x 1.4826 x MAD,
floor 50 ms) are applied to the same data.  Then a runner 30% slower overall, with ten
tests truly 2x slower, through the full comparison (runner-speed correction included).

    python bench/signal_quality.py [--seed 7] [--runs 5]

It also prints an upper bound for any rule on this data: an oracle that knows each
test's true noise sigma and the true median, and flags a test when its log ratio
exceeds a per-sigma cut.  By the Neyman-Pearson lemma the cut that catches the most 2x
slowdowns at a given false-alarm rate is ``sigma**2 * c / ln 2 + ln 2 / 2``, with ``c``
chosen so that the mean false-alarm rate over the sigmas is the target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from pytest_accel.perf.comparison import compare
from pytest_accel.perf.rule import MAD_SCALE, Rule, judge

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


def scenario_rates(seed: int, rule: Rule) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    rates: dict[str, tuple[float, float]] = {}
    for name, factor, count in GROUPS:
        medians = np.exp(rng.uniform(np.log(0.15), np.log(5.0), count))
        sigma = rng.uniform(0.03, 0.30, count)
        samples = history(rng, medians, sigma)
        current = medians * factor * np.exp(sigma * rng.standard_normal(count))
        ours = judge(current, samples, rule).regressed
        rates[name] = (float(ours.mean()), float(speedguard_flags(current, samples).mean()))
    return rates


def slower_runner(seed: int, rule: Rule) -> tuple[float, int, bool, float]:
    """Every test 30% slower, ten truly 2x slower: (unchanged flag rate, caught, suite, speed)."""
    rng = np.random.default_rng(seed)
    count = UNCHANGED + 10
    medians = np.exp(rng.uniform(np.log(0.15), np.log(5.0), count))
    sigma = rng.uniform(0.03, 0.30, count)
    samples = history(rng, medians, sigma)
    factor = np.full(count, 1.3)
    factor[UNCHANGED:] *= 2.0
    current = medians * factor * np.exp(sigma * rng.standard_normal(count))
    ids = [f"t{i:05d}" for i in range(count)]
    result = compare(
        "sim",
        {"tests": dict(zip(ids, current.tolist(), strict=True))},
        {"tests": dict(zip(ids, samples.tolist(), strict=True))},
        rule,
    )
    flagged = {f.id for f in result.regressions if f.kind == "test"}
    slowed = set(ids[UNCHANGED:])
    unchanged_rate = len(flagged - slowed) / UNCHANGED
    suite = sum(f.kind == "session" for f in result.regressions) == 1
    return unchanged_rate, len(flagged & slowed), suite, result.speed


def oracle_2x_power(alpha: float) -> float:
    """The most 2x slowdowns any rule can catch at mean false-alarm rate ``alpha``."""
    from math import erfc, log, sqrt

    sigma = np.linspace(0.03, 0.30, 2000)
    ln2 = log(2.0)
    tail = np.vectorize(lambda z: 0.5 * erfc(z / sqrt(2.0)))
    low, high = -50.0, 50.0
    for _ in range(80):  # bisect c
        cut = sigma**2 * ((low + high) / 2) / ln2 + ln2 / 2
        if tail(cut / sigma).mean() > alpha:
            low = (low + high) / 2
        else:
            high = (low + high) / 2
    cut = sigma**2 * high / ln2 + ln2 / 2
    return float(tail((cut - ln2) / sigma).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5, help="seeds averaged")
    parser.add_argument("--mad-k", type=float, default=Rule().mad_k)
    parser.add_argument("--threshold", type=float, default=Rule().threshold)
    parser.add_argument(
        "--space", choices=("log", "linear"), default="log" if Rule().log_space else "linear"
    )
    parser.add_argument("--large-k-factor", type=float, default=Rule().large_k_factor)
    parser.add_argument("--spread", choices=("mad", "clipped"), default=Rule().spread)
    parser.add_argument("--large-ratio", type=float, default=Rule().large_ratio)
    args = parser.parse_args()
    rule = Rule(
        spread=args.spread,
        mad_k=args.mad_k,
        threshold=args.threshold,
        log_space=args.space == "log",
        large_k_factor=args.large_k_factor,
        large_ratio=args.large_ratio,
    )
    totals: dict[str, list[float]] = {name: [0.0, 0.0] for name, _, _ in GROUPS}
    for run in range(args.runs):
        for name, (ours, theirs) in scenario_rates(args.seed + run, rule).items():
            totals[name][0] += ours / args.runs
            totals[name][1] += theirs / args.runs
    print(
        f"rule: threshold {rule.threshold}, mad_k {rule.mad_k} (log space); "
        f"{args.runs} seeds from {args.seed}\n"
    )
    print("| tests | count | flagged by pytest-accel | flagged by speedguard's rule |")
    print("| --- | ---: | ---: | ---: |")
    for name, _, count in GROUPS:
        ours, theirs = totals[name]
        print(f"| {name} | {count} | {ours:.2%} | {theirs:.2%} |")
    print(
        "\n| slower runner (x1.3), seed | unchanged flagged | of 10 truly 2x caught |"
        " suite slowdown reported once | speed estimate |"
    )
    print("| --- | ---: | ---: | --- | ---: |")
    for run in range(args.runs):
        rate, caught, suite, speed = slower_runner(args.seed + run, rule)
        print(
            f"| {args.seed + run} | {rate:.2%} | {caught} | {'yes' if suite else 'no'} |"
            f" {speed:.3f} |"
        )


if __name__ == "__main__":
    main()
