"""The regression rule: robust, per-test noise-aware, computed over numpy arrays.

A timing regresses only when every gate holds (docs/regressions.md explains why):

- ``current >= min_duration`` and ``current - median >= min_delta`` (too small to matter);
- ``current > median * threshold`` (too small a change to act on);
- with at least ``min_samples`` samples and a non-zero spread: the robust z-score of
  ``log(current)`` against ``log(samples)`` exceeds ``mad_k`` (``mad_k * large_k_factor``
  for a change of ``large_ratio`` or more).  Durations are multiplicative and
  right-skewed, so their logs are close to symmetric; the median, and a spread taken
  only from samples near it, ignore the odd outlier in the history.

Improvements use the mirrored rule.  With at least ``MIN_FOR_SPEED`` tests compared, the
median ratio estimates the runner's speed and per-test, per-class and per-module timings
are divided by it; the suite total is judged without that correction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


class PerfRegressionWarning(UserWarning):
    """A test, class, module or the suite got slower than its baseline."""


MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation of a normal sample
MIN_FOR_SPEED = 20
CLIP_MADS = 3.5
_LOG_FLOOR = 1e-6


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


@dataclass(frozen=True)
class Override:
    """A ``perf(threshold=..., min_delta=..., ignore=...)`` marker on one test."""

    threshold: float | None = None
    min_delta: float | None = None
    ignore: bool = False


@dataclass(frozen=True)
class Finding:
    kind: str  # "test", "class", "module" or "session"
    id: str
    baseline: float  # median of the samples (the sum of medians for the session)
    current: float
    ratio: float  # current / baseline, before any runner-speed correction
    samples: int
    z: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "baseline": round(self.baseline, 6),
            "current": round(self.current, 6),
            "ratio": round(self.ratio, 4),
            "samples": self.samples,
            "z": None if self.z is None else round(self.z, 2),
        }


@dataclass
class Comparison:
    env: str
    regressions: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    compared: int = 0
    speed: float = 1.0  # the runner's speed estimate applied (1.0: none)
    available_envs: list[str] = field(default_factory=list)  # set when env was not found

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "regressions": [f.to_json() for f in self.regressions],
            "improvements": [f.to_json() for f in self.improvements],
            "new": self.new,
            "missing": self.missing,
            "compared": self.compared,
            "speed": round(self.speed, 4),
            "available_envs": self.available_envs,
        }


@dataclass(frozen=True)
class Judgement:
    median: FloatArray
    count: FloatArray
    z: FloatArray  # NaN where the z gate does not apply
    regressed: npt.NDArray[np.bool_]
    improved: npt.NDArray[np.bool_]


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


def judge(
    current: FloatArray,
    samples: FloatArray,
    rule: Rule,
    *,
    threshold: FloatArray | float | None = None,
    min_delta: FloatArray | float | None = None,
    median: FloatArray | None = None,
) -> Judgement:
    """Apply the rule row by row: ``current[i]`` against the samples in ``samples[i]``."""
    import numpy as np

    threshold = rule.threshold if threshold is None else threshold
    min_delta = rule.min_delta if min_delta is None else min_delta
    count = np.sum(~np.isnan(samples), axis=1).astype(np.float64)
    if not samples.size:
        nothing = np.zeros(len(current), dtype=bool)
        return Judgement(
            np.zeros(len(current)), count, np.full(len(current), np.nan), nothing, nothing
        )
    with np.errstate(all="ignore"):
        median = row_median(samples) if median is None else median
        if rule.log_space:
            values = np.log(np.maximum(samples, _LOG_FLOOR))
            now = np.log(np.maximum(current, _LOG_FLOOR))
        else:
            values, now = samples, current
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
        z = (now - centre) / spread
    z_applies = (count >= rule.min_samples) & (spread > 0)
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
    return Judgement(median, count, z, regressed & (count > 0), improved & (count > 0))


def _findings(
    kind: str,
    ids: list[str],
    raw: FloatArray,
    verdict: Judgement,
    mask: npt.NDArray[np.bool_],
) -> list[Finding]:
    import numpy as np

    found = []
    for index in np.flatnonzero(mask):
        median = float(verdict.median[index])
        z = float(verdict.z[index])
        found.append(
            Finding(
                kind,
                ids[index],
                median,
                float(raw[index]),
                float(raw[index]) / median if median > 0 else float("inf"),
                int(verdict.count[index]),
                None if np.isnan(z) else z,
            )
        )
    return found


def compare(
    key: str,
    current: Mapping[str, Mapping[str, float]],
    baseline: Mapping[str, Mapping[str, Sequence[float]]],
    rule: Rule,
    overrides: Mapping[str, Override] | None = None,
) -> Comparison:
    """Compare ``current[group][id]`` seconds with ``baseline[group][id]`` samples.

    Groups are ``tests``, ``classes`` and ``modules``.
    """
    import numpy as np

    overrides = overrides or {}
    result = Comparison(key)
    tests_now, tests_then = current.get("tests", {}), baseline.get("tests", {})
    result.new = sorted(i for i in tests_now if i not in tests_then)
    result.missing = sorted(i for i in tests_then if i not in tests_now)

    ignored = {i for i, o in overrides.items() if o.ignore}
    # In the current run's order: deterministic for the same input, and findings are
    # sorted by ratio at the end anyway.
    ids = [i for i in tests_now if tests_then.get(i) and i not in ignored]
    result.compared = len(ids)
    raw = np.array([tests_now[i] for i in ids], dtype=np.float64)
    samples = pad([tests_then[i] for i in ids])
    medians = row_median(samples) if ids else np.zeros(0)
    if rule.normalize and len(ids) >= MIN_FOR_SPEED:
        usable = medians > 0
        if usable.any():
            result.speed = float(np.median(raw[usable] / medians[usable]))
    speed = result.speed if result.speed > 0 else 1.0

    thresholds: FloatArray | None = None
    deltas: FloatArray | None = None
    if overrides:  # per-test arrays only when some test has a perf(...) marker
        none = Override()
        thresholds = np.array(
            [overrides.get(i, none).threshold or rule.threshold for i in ids], dtype=np.float64
        )
        deltas = np.array(
            [
                rule.min_delta
                if overrides.get(i, none).min_delta is None
                else overrides[i].min_delta
                for i in ids
            ],
            dtype=np.float64,
        )
    verdict = judge(
        raw / speed, samples, rule, threshold=thresholds, min_delta=deltas, median=medians
    )
    result.regressions += _findings("test", ids, raw, verdict, verdict.regressed)
    result.improvements += _findings("test", ids, raw, verdict, verdict.improved)

    for group, kind in (("classes", "class"), ("modules", "module")):
        now, then = current.get(group, {}), baseline.get(group, {})
        group_ids = sorted(i for i in now if then.get(i))
        group_raw = np.array([now[i] for i in group_ids], dtype=np.float64)
        group_verdict = judge(group_raw / speed, pad([then[i] for i in group_ids]), rule)
        result.regressions += _findings(
            kind, group_ids, group_raw, group_verdict, group_verdict.regressed
        )
        result.improvements += _findings(
            kind, group_ids, group_raw, group_verdict, group_verdict.improved
        )

    if ids:  # the suite total, judged on raw timings: a slower runner shows up here, once
        total_now, total_then = float(raw.sum()), float(medians.sum())
        session = judge(np.array([total_now]), np.array([[total_then]]), rule)
        ratio = total_now / total_then if total_then > 0 else float("inf")
        finding = Finding("session", "suite total", total_then, total_now, ratio, len(ids))
        if session.regressed[0]:
            result.regressions.append(finding)
        elif session.improved[0]:
            result.improvements.append(finding)
    result.regressions.sort(key=lambda f: (-f.ratio, f.kind, f.id))
    result.improvements.sort(key=lambda f: (f.ratio, f.kind, f.id))
    return result
