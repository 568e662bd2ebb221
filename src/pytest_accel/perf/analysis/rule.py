"""The single-run regression rule: one timing against its own history, on numpy arrays.

A timing regresses only when every gate holds (docs/regressions.md explains why):

- ``current >= min_duration`` and ``current - median >= min_delta`` (too small to matter);
- ``current > median * threshold`` (too small a change to act on);
- with at least ``min_samples`` samples and a non-zero spread: the robust z-score of
  ``log(current)`` against ``log(samples)`` exceeds ``mad_k`` (``mad_k * large_k_factor``
  for a change of ``large_ratio`` or more).  Durations are multiplicative and
  right-skewed, so their logs are close to symmetric; the median, and a spread taken
  only from samples near it, ignore the odd outlier in the history.

Improvements use the mirrored rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation of a normal sample
CLIP_MADS = 3.5  # residuals beyond this many scaled MADs do not enter the spread
LOG_FLOOR = 1e-6  # seconds: a zero timing's stand-in, so that every value has a log
# Fewer samples than this cannot tell an outlier from noise, nor estimate the noise: two
# of three runs within a millisecond make a MAD of almost nothing (a z-score of 395 on
# an unchanged test).  Their spread is the plain standard deviation of all of them,
# never below SHORT_NOISE_FLOOR (10% in log seconds: CI timing noise is 3-30% per test).
SHORT_HISTORY = 5
SHORT_NOISE_FLOOR = 0.1


@dataclass(frozen=True)
class Rule:
    """The regression rule; defaults tuned by ``bench/signal_quality.py`` (docs/regressions.md)."""

    threshold: float = 1.2
    min_delta: float = 0.05
    min_duration: float = 0.1
    min_samples: int = 3
    mad_k: float = 4.5
    normalize: bool = True
    # A large change needs less evidence: at or beyond ``large_ratio`` the z-score must
    # exceed ``mad_k * large_k_factor`` instead of ``mad_k``.
    large_ratio: float = 1.5
    large_k_factor: float = 0.6
    # The z-score's scale: "clipped" is the standard deviation of the (log) samples
    # within CLIP_MADS scaled MADs of the median, as robust to outliers as the MAD and
    # far less noisy with 20 samples; "mad" is 1.4826 x MAD.
    spread: str = "clipped"
    log_space: bool = True  # the z-score of log durations (True) or of seconds (False)
    # What a timing is: "execution" (JAX compilation taken out, ``timings.judged_on``)
    # or "wall" (as measured).
    time: str = "execution"
    # A test's peak device memory grew (MEMORY): at least this many times its most in
    # the baseline, and this many bytes more (``perf.analysis.memory``).
    memory_threshold: float = 1.25
    memory_min_delta: int = 64 * 2**20


@dataclass(frozen=True)
class Judgement:
    median: FloatArray
    count: FloatArray
    z: FloatArray  # NaN where the z gate does not apply
    spread: FloatArray  # the z-score's scale, in log seconds with log_space
    regressed: npt.NDArray[np.bool_]
    improved: npt.NDArray[np.bool_]
    # Slower by every gate that applies, on fewer than ``min_samples`` samples: not a
    # regression yet (docs/regressions.md, "Short baselines"), said as "learning".
    learning: npt.NDArray[np.bool_]


def pad(samples: Sequence[Sequence[float]]) -> FloatArray:
    """Ragged sample lists as one NaN-padded 2-D array."""
    import numpy as np

    lengths = np.fromiter(map(len, samples), dtype=np.int64, count=len(samples))
    width = int(lengths.max(initial=0)) or 1
    out = np.full((len(samples), width), np.nan)
    total = int(lengths.sum())
    flat = np.fromiter(chain.from_iterable(samples), dtype=np.float64, count=total)
    rows = np.repeat(np.arange(len(samples)), lengths)
    cols = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = flat
    return out


def row_median(values: FloatArray) -> FloatArray:
    """Median of each row, ignoring NaN padding (NaN for an all-NaN row).

    One sort instead of ``np.nanmedian``, which falls back to masked arrays on padded input.
    """
    import numpy as np

    ordered = np.sort(values, axis=1)  # NaN sorts last
    counts = np.sum(~np.isnan(values), axis=1)
    rows = np.arange(len(values))
    low = ordered[rows, np.maximum(counts - 1, 0) // 2]
    high = ordered[rows, np.minimum(counts // 2, values.shape[1] - 1)]
    median = np.where(counts % 2 == 1, low, (low + high) / 2)
    return np.where(counts > 0, median, np.nan)


def sample_spread(samples: FloatArray, rule: Rule) -> tuple[FloatArray, FloatArray]:
    """Each row's centre and spread (the z-score's location and scale): of the log
    samples with ``log_space``, NaN for a row without samples."""
    import numpy as np

    with np.errstate(all="ignore"):
        values = np.log(np.maximum(samples, LOG_FLOOR)) if rule.log_space else samples
        centre = row_median(values)
        spread = MAD_SCALE * row_median(np.abs(values - centre[:, None]))
        if rule.spread == "clipped":
            inside = np.abs(values - centre[:, None]) <= CLIP_MADS * spread[:, None]
            kept = np.where(inside, values, 0.0)
            n = inside.sum(axis=1)
            mean = kept.sum(axis=1) / np.maximum(n, 1)
            squares = np.where(inside, (values - mean[:, None]) ** 2, 0.0).sum(axis=1)
            clipped = np.sqrt(squares / np.maximum(n - 1, 1))
            spread = np.where(n >= 3, clipped, spread)
        count = np.sum(~np.isnan(values), axis=1)
        short = (count > 0) & (count < SHORT_HISTORY)
        if short.any():
            mean = np.nansum(values, axis=1) / np.maximum(count, 1)
            squares = np.nansum((values - mean[:, None]) ** 2, axis=1)
            plain = np.sqrt(squares / np.maximum(count - 1, 1))  # 0 for one sample
            floor = SHORT_NOISE_FLOOR if rule.log_space else SHORT_NOISE_FLOOR * np.abs(centre)
            spread = np.where(short, np.fmax(plain, floor), spread)
    return centre, spread


def plain_spread(logs: Sequence[float]) -> float:
    """The standard deviation of ``logs`` (0 for fewer than two), without numpy."""
    count = len(logs)
    if count < 2:
        return 0.0
    mean = sum(logs) / count
    deviation: float = (sum((v - mean) ** 2 for v in logs) / (count - 1)) ** 0.5
    return deviation


def judge(
    current: FloatArray,
    samples: FloatArray,
    rule: Rule,
    *,
    threshold: FloatArray | float | None = None,
    min_delta: FloatArray | float | None = None,
    median: FloatArray | None = None,
    spread: tuple[FloatArray, FloatArray] | None = None,
    count: FloatArray | None = None,
) -> Judgement:
    """Apply the rule row by row: ``current[i]`` against the samples in ``samples[i]``.
    ``median``, ``spread`` (``sample_spread``'s centre and spread) and ``count`` (each
    row's samples): the samples' own, when the caller has them already (they do not
    depend on ``current``; ``changes.current_level`` gives them for fewer samples of a
    row than ``samples`` has)."""
    import numpy as np

    threshold = rule.threshold if threshold is None else threshold
    min_delta = rule.min_delta if min_delta is None else min_delta
    if count is None:
        count = np.sum(~np.isnan(samples), axis=1).astype(np.float64)
    if not samples.size:
        nothing = np.zeros(len(current), dtype=bool)
        unknown = np.full(len(current), np.nan)
        return Judgement(np.zeros(len(current)), count, unknown, unknown, nothing, nothing, nothing)
    with np.errstate(all="ignore"):
        median = row_median(samples) if median is None else median
        centre, scale = sample_spread(samples, rule) if spread is None else spread
        now = np.log(np.maximum(current, LOG_FLOOR)) if rule.log_space else current
        z = (now - centre) / scale
    z_applies = (count >= rule.min_samples) & (scale > 0)
    z = np.where(z_applies, z, np.nan)
    large_k = rule.mad_k * rule.large_k_factor
    needed_up = np.where(current >= median * rule.large_ratio, large_k, rule.mad_k)
    needed_down = np.where(current * rule.large_ratio <= median, large_k, rule.mad_k)
    regressed = (
        (current >= rule.min_duration)
        & (current - median >= min_delta)
        & (current > median * threshold)
        & (~z_applies | (z > needed_up))
    )
    improved = (
        (median >= rule.min_duration)
        & (median - current >= min_delta)
        & (current * threshold < median)
        & (~z_applies | (z < -needed_down))
    )
    # One or two samples cannot tell a slowdown from the noise of a new baseline: a
    # verdict needs ``min_samples`` of them.
    enough = count >= rule.min_samples
    learning = regressed & (count > 0) & ~enough
    return Judgement(median, count, z, scale, regressed & enough, improved & enough, learning)
