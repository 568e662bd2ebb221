"""Signal quality over runs, by seeded simulation: what a CI user sees run after run.

Each test has a median, log-normal noise of 4-25% (uniform per test) and, in every run,
a 4% chance of being 3x slower (a noisy neighbour, a cold cache).  A nightly job runs the
suite 20 times to fill the baseline, then 10 more; every run is judged against the
baseline's last 20 runs and then folded in (the rolling window of ``--perf-update-baseline``).
Scenarios: unchanged tests; persistent steps of 2x, +50% and +30% and the mirrored
improvements, starting at the first judged run; and a one-run 2x spike.

Reported, per the targets of issue 13:

- unchanged tests reported as slowed (a regression or a slowdown change), per run;
- steps found (a finding in the right direction) within 3 runs (2x) or 5 runs;
- spikes reported as a change in the runs after them;
- for 2x steps found as changes, whether ``since`` names the run where the step began.

    python bench/signal_quality.py --mode runs --seed 1000 --seeds 10
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pytest_accel.perf.analysis.changes import ChangeRule, current_level, find_steps
from pytest_accel.perf.analysis.rule import Rule, judge, row_median, sample_spread

Array = npt.NDArray[np.float64]
WINDOW, JUDGED, OUTLIER_RATE, OUTLIER = 20, 10, 0.04, 3.0
SIGMA = (0.04, 0.25)

# (scenario, factor from the first judged run on, runs within which it should be found)
STEPS = (
    ("2x slower", 2.0, 3),
    ("+50% slower", 1.5, 5),
    ("+30% slower", 1.3, 5),
    ("2x faster", 0.5, 3),
    ("+50% faster", 1 / 1.5, 5),
    ("+30% faster", 1 / 1.3, 5),
)


@dataclass
class Outcome:
    # Per test and run: unchanged tests reported as slowed by a change, by any finding.
    unchanged_changed: float = 0.0
    unchanged_flagged: float = 0.0
    # Per step scenario: found as a change within its runs; found by any finding.
    as_change: dict[str, float] = field(default_factory=dict)
    found: dict[str, float] = field(default_factory=dict)
    spike_as_change: float = 0.0
    since_right: float = 0.0  # of 2x slowdowns found as changes


def series(rng: np.random.Generator, count: int, factors: Array) -> Array:
    """``count`` tests x (WINDOW + JUDGED) runs of seconds; ``factors`` per run."""
    runs = WINDOW + JUDGED
    medians = np.exp(rng.uniform(np.log(0.15), np.log(5.0), count))
    sigma = rng.uniform(*SIGMA, count)
    noise = np.exp(sigma[:, None] * rng.standard_normal((count, runs)))
    outliers = np.where(rng.random((count, runs)) < OUTLIER_RATE, OUTLIER, 1.0)
    return medians[:, None] * noise * outliers * factors[None, :]


def judge_run(
    history: Array, run: int, rule: Rule, change_rule: ChangeRule
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Judge run ``run`` against the WINDOW runs before it: (regressed, improved, change
    runs: + slower, - faster, 0 none)."""
    window = history[:, run - WINDOW : run]
    verdict = judge(history[:, run], window, rule)
    steps = find_steps(history[:, run - WINDOW : run + 1], change_rule)
    direction = np.nan_to_num(np.sign(steps.after - steps.before)).astype(np.int64)
    signed = np.where(steps.found, steps.runs * direction, 0)
    return verdict.regressed, verdict.improved, signed


def simulate(seed: int, rule: Rule, change_rule: ChangeRule, count: int = 2000) -> Outcome:
    rng = np.random.default_rng(seed)
    outcome = Outcome()
    runs = WINDOW + JUDGED
    history = series(rng, count * 5, np.ones(runs))
    changed = flagged = 0
    for run in range(WINDOW, runs):
        regressed, _, change = judge_run(history, run, rule, change_rule)
        changed += int(np.sum(change > 0))
        flagged += int(np.sum(regressed | (change > 0)))
    outcome.unchanged_changed = changed / (count * 5 * JUDGED)
    outcome.unchanged_flagged = flagged / (count * 5 * JUDGED)
    for name, factor, within in STEPS:
        factors = np.ones(runs)
        factors[WINDOW:] = factor
        history = series(rng, count, factors)
        as_change = np.zeros(count, dtype=bool)
        found = np.zeros(count, dtype=bool)
        since_right = since_total = 0
        slower = factor > 1
        for offset in range(within):
            regressed, improved, change = judge_run(history, WINDOW + offset, rule, change_rule)
            change_hit = (change > 0) if slower else (change < 0)
            if name == "2x slower":
                first = change_hit & ~as_change
                since_total += int(first.sum())
                # The step began at run WINDOW; `runs` counts it, this run included.
                since_right += int(np.sum(first & (np.abs(change) == offset + 1)))
            as_change |= change_hit
            found |= change_hit | (regressed if slower else improved)
        outcome.as_change[name] = float(as_change.mean())
        outcome.found[name] = float(found.mean())
        if name == "2x slower":
            outcome.since_right = since_right / since_total if since_total else float("nan")
    # A one-run 2x spike at the first judged run: does a change that holds it follow?
    factors = np.ones(runs)
    factors[WINDOW] = 2.0
    history = series(rng, count * 5, factors)
    spike_changes = np.zeros(count * 5, dtype=bool)
    for offset in range(1, JUDGED):
        _, _, change = judge_run(history, WINDOW + offset, rule, change_rule)
        spike_changes |= change > offset  # the change's cut lies at or before the spike
    outcome.spike_as_change = float(spike_changes.mean())
    return outcome


def average(outcomes: list[Outcome]) -> Outcome:
    names = [name for name, _, _ in STEPS]
    return Outcome(
        unchanged_changed=float(np.mean([o.unchanged_changed for o in outcomes])),
        unchanged_flagged=float(np.mean([o.unchanged_flagged for o in outcomes])),
        as_change={n: float(np.mean([o.as_change[n] for o in outcomes])) for n in names},
        found={n: float(np.mean([o.found[n] for o in outcomes])) for n in names},
        spike_as_change=float(np.mean([o.spike_as_change for o in outcomes])),
        since_right=float(np.nanmean([o.since_right for o in outcomes])),
    )


TARGETS = {
    "2x slower": 0.95,
    "+50% slower": 0.80,
    "+30% slower": 0.60,
    "2x faster": 0.95,
    "+50% faster": 0.80,
    "+30% faster": 0.60,
}


def table(outcome: Outcome) -> str:
    lines = [
        "| measure | target | changes alone | any finding (regression or change) |",
        "| --- | ---: | ---: | ---: |",
        f"| unchanged tests reported as slowed, per run | at most 0.3% |"
        f" {outcome.unchanged_changed:.3%} | {outcome.unchanged_flagged:.2%} |",
    ]
    for name, _, within in STEPS:
        lines.append(
            f"| {name} found within {within} runs | at least {TARGETS[name]:.0%} |"
            f" {outcome.as_change[name]:.1%} | {outcome.found[name]:.1%} |"
        )
    lines += [
        f"| one-run 2x spike reported as a change | at most 3% | {outcome.spike_as_change:.2%} | |",
        f"| `since` names the right run (2x steps found as changes) | at least 90% |"
        f" {outcome.since_right:.1%} | |",
    ]
    return "\n".join(lines)


def ideal_t_test(seed: int, count: int = 200_000, alpha: float = 0.003) -> str:
    """An upper bound for any detector on these sequences: a t-test told where the step
    began, on data without outliers, looking once, at the false-alarm rate ``alpha``.
    Rows: the step, the runs it has had; columns: with the level and noise known, the
    level estimated from the WINDOW runs before, and both estimated (the t-test)."""
    from math import erfc, log, sqrt

    rng = np.random.default_rng(seed)
    sigmas = np.linspace(*SIGMA, 2000)
    normal_cut = 2.7478  # one-sided, 0.3%

    def tail(z: Array) -> float:
        return float(np.mean([0.5 * erfc((-value) / sqrt(2)) for value in z]))

    def t_values(shift: float, runs: int) -> Array:
        sigma = rng.choice(sigmas, count)[:, None]
        before = rng.standard_normal((count, WINDOW)) * sigma
        after = rng.standard_normal((count, runs)) * sigma + shift
        residuals = np.concatenate(
            [before - before.mean(1, keepdims=True), after - after.mean(1, keepdims=True)], 1
        )
        spread = np.sqrt((residuals**2).sum(1) / (WINDOW + runs - 2))
        values: Array = (after.mean(1) - before.mean(1)) / (spread * sqrt(1 / runs + 1 / WINDOW))
        return values

    lines = [
        "| step | runs | level and noise known | level estimated | both estimated (t-test) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, factor, runs in (("2x", 2.0, 3), ("+50%", 1.5, 5), ("+30%", 1.3, 5)):
        shift = log(factor)
        known = tail(shift * sqrt(runs) / sigmas - normal_cut)
        level = tail(shift / (sigmas * sqrt(1 / runs + 1 / WINDOW)) - normal_cut)
        cut = float(np.quantile(t_values(0.0, runs), 1 - alpha))
        both = float(np.mean(t_values(shift, runs) > cut))
        lines.append(f"| {name} | {runs} | {known:.1%} | {level:.1%} | {both:.1%} |")
    return "\n".join(lines)


SHORT_BASELINE = 3  # runs, as docs/ci.md builds a baseline
SHORT_JUDGED = 4  # runs judged after it, each folded in (a history of 4 to 7 runs)


def short_history(
    seed: int, rule: Rule, change_rule: ChangeRule, count: int = 10_000, short_tier: bool = True
) -> dict[str, float]:
    """A baseline of SHORT_BASELINE runs, then SHORT_JUDGED runs each judged against
    every run before it and folded in: the short tier of the change detector.  Rates:
    unchanged tests reported as slowed per run (by a change; by any alarm), steps named
    as a change within three runs and found by anything within two, a one-run 2x
    spike followed by a change.  ``short_tier``: False judges as 0.3 did, every sample
    in (its pending step is part of the short tier)."""
    rng = np.random.default_rng(seed)
    runs = SHORT_BASELINE + SHORT_JUDGED

    def judged(history: Array, run: int) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        samples = history[:, :run]
        if short_tier:  # as the comparison judges: since a change, without a pending step
            count, median, spread, _, _ = current_level(
                samples, row_median(samples), sample_spread(samples, rule), rule
            )
            verdict = judge(
                history[:, run], samples, rule, median=median, spread=spread, count=count
            )
        else:
            verdict = judge(history[:, run], samples, rule)
        steps = find_steps(history[:, : run + 1], change_rule)
        direction = np.nan_to_num(np.sign(steps.after - steps.before)).astype(np.int64)
        return verdict.regressed, np.where(steps.found, steps.runs * direction, 0)

    rates: dict[str, float] = {}
    history = series(rng, count, np.ones(WINDOW + JUDGED))[:, :runs]
    changed = alarmed = 0
    for run in range(SHORT_BASELINE, runs):
        regressed, change = judged(history, run)
        changed += int(np.sum(change > 0))
        alarmed += int(np.sum(regressed | (change > 0)))
    rates["unchanged tests reported as slowed by a change, per run"] = changed / (
        count * SHORT_JUDGED
    )
    rates["unchanged tests reported as slowed by any alarm, per run"] = alarmed / (
        count * SHORT_JUDGED
    )
    for name, factor in (("2x", 2.0), ("+50%", 1.5)):
        factors = np.ones(WINDOW + JUDGED)
        factors[SHORT_BASELINE:] = factor
        history = series(rng, count, factors)[:, :runs]
        first, _ = judged(history, SHORT_BASELINE)
        second, change = judged(history, SHORT_BASELINE + 1)
        _, third = judged(history, SHORT_BASELINE + 2)
        rates[f"{name} slower found by any alarm within two runs"] = float(
            np.mean(first | second | (change > 0))
        )
        rates[f"{name} slower found on its first run and reported on its second"] = float(
            np.mean(second[first] | (change[first] > 0)) if first.any() else 0.0
        )
        rates[f"{name} slower named as a change within three runs"] = float(
            np.mean((change > 0) | (third > 0))
        )
    factors = np.ones(WINDOW + JUDGED)
    factors[SHORT_BASELINE] = 2.0
    history = series(rng, count, factors)[:, :runs]
    spiked = np.zeros(count, dtype=bool)
    for run in range(SHORT_BASELINE + 1, runs):
        _, change = judged(history, run)
        spiked |= change >= run - SHORT_BASELINE + 1  # the change's cut at or before it
    rates["one-run 2x spike reported as a change"] = float(spiked.mean())
    return rates
