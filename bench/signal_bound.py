"""The best any single-run rule can do on ``signal_quality.py --mode single``'s tests.

An oracle that knows each test's true median and noise (log-normal, sigma uniform on
the simulation's 3-30%) and judges one run: for each test the most powerful test of
"unchanged" against "2x" is a threshold on ``log(current / median)`` (Neyman-Pearson),
and across tests the thresholds that catch the most 2x slowdowns for a given share of
false alarms are ``t(sigma) = L/2 + sigma**2 * ln(lambda) / L`` with ``L = ln 2`` (a
Lagrange multiplier ``lambda`` prices a false alarm).  A real rule estimates the median
and noise from 20 samples with outliers, so it can only do worse; the duration floors
only take flags away.

    python bench/signal_bound.py --false-alarms 0.0047 --caught 0.8663
"""

from __future__ import annotations

import argparse
from math import e, erfc, log, sqrt

STEP = log(2.0)
SIGMAS = [0.03 + 0.27 * (i + 0.5) / 2000 for i in range(2000)]


def tail(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * erfc(z / sqrt(2.0))


def frontier(price: float) -> tuple[float, float]:
    """(false alarms, 2x caught), averaged over the tests, at the price ``price``."""
    false_alarms = caught = 0.0
    for sigma in SIGMAS:
        threshold = STEP / 2 + sigma**2 * log(price) / STEP
        false_alarms += tail(threshold / sigma)
        caught += tail((threshold - STEP) / sigma)
    return false_alarms / len(SIGMAS), caught / len(SIGMAS)


def solve(measure: int, target: float) -> tuple[float, float]:
    """The frontier's point where its ``measure`` (0: false alarms, 1: caught) is
    ``target``: bisection on log(price); both measures fall as the price rises."""
    low, high = 0.0, 12.0
    for _ in range(60):
        middle = (low + high) / 2
        if frontier(e**middle)[measure] > target:
            low = middle
        else:
            high = middle
    return frontier(e ** ((low + high) / 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--false-alarms", type=float, default=0.0047, help="today's rate")
    parser.add_argument("--caught", type=float, default=0.8663, help="speedguard's rate")
    args = parser.parse_args()
    at_rate = solve(0, args.false_alarms)
    for_caught = solve(1, args.caught)
    print("| oracle (true median and noise of every test) | false alarms | 2x caught |")
    print("| --- | ---: | ---: |")
    print(f"| at {args.false_alarms:.2%} false alarms | {at_rate[0]:.3%} | {at_rate[1]:.2%} |")
    print(f"| catching {args.caught:.2%} | {for_caught[0]:.3%} | {for_caught[1]:.2%} |")


if __name__ == "__main__":
    main()
