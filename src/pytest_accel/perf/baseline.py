"""Baselines: past timings per hardware key, read from three formats, updated safely.

Accepted inputs for ``--perf-baseline``:

- a baseline file (``schema: pytest-accel/baseline``): rolling windows of samples;
- a record (``schema: pytest-accel/record``): one sample per passing test, under the
  record's ``env.key``;
- a pytest-split ``.test_durations`` map ``{nodeid: seconds}``: one sample per test,
  valid for any hardware key (it has none), compared with test totals since that is
  what pytest-split stores.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from pytest_accel.files import (
    InputError,
    all_plausible,
    check_version,
    expect_object,
    expect_seconds,
    read_json,
    update_locked,
)
from pytest_accel.perf.record import (
    RECORD_SCHEMA,
    Timings,
    check_record,
    current_from_record,
)

BASELINE_SCHEMA = "pytest-accel/baseline"
BASELINE_VERSION = 1
DEFAULT_WINDOW = 20
ANY_ENV = "*"  # the key of a pytest-split map: it applies to whatever hardware runs
GROUPS = ("tests", "classes", "modules")


@dataclass
class EnvSamples:
    """Samples of one hardware key: ``{group: {id: [seconds, ...]}}``."""

    tests: dict[str, list[float]] = field(default_factory=dict)
    classes: dict[str, list[float]] = field(default_factory=dict)
    modules: dict[str, list[float]] = field(default_factory=dict)
    test_metric: str = "call"  # what a test sample measures: "call" or "total"

    def group(self, name: str) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = getattr(self, name)
        return samples


@dataclass
class Baseline:
    envs: dict[str, EnvSamples]
    window: int = DEFAULT_WINDOW
    source: str = "baseline"  # "baseline", "record" or "durations"

    def for_key(self, key: str) -> EnvSamples | None:
        return self.envs.get(key) or self.envs.get(ANY_ENV)


def _samples(path: str, where: str, value: Any) -> list[float]:
    if not isinstance(value, list):
        raise InputError(path, f"{where}: expected a list of seconds, got {type(value).__name__}")
    for index, sample in enumerate(value):
        expect_seconds(path, f"{where}[{index}]", sample)
    return [float(s) for s in value]


def _bulk_samples(path: str, where: str, entries: dict[str, Any]) -> dict[str, list[float]]:
    """``{id: {"samples": [...]}}`` validated in bulk: a baseline holds millions of numbers.

    The common case (all valid) costs a few vectorised passes; only a bad value is
    located one by one, to name it.
    """
    lists: list[list[Any]] = []
    for ident, entry in entries.items():
        if type(entry) is not dict:
            raise InputError(
                path, f"{where}[{ident!r}]: expected an object, got {type(entry).__name__}"
            )
        samples = entry.get("samples")
        # _samples raises for anything but a list, naming it
        lists.append(
            samples
            if isinstance(samples, list)
            else _samples(path, f"{where}[{ident!r}].samples", samples)
        )
    flat = list(chain.from_iterable(lists))
    if not (set(map(type, flat)) <= {float, int} and all_plausible(flat)):
        for ident, samples in zip(entries, lists, strict=True):  # find and name the bad one
            _samples(path, f"{where}[{ident!r}].samples", samples)
    return dict(zip(entries, lists, strict=True))


def _parse_baseline(path: str, data: dict[str, Any]) -> Baseline:
    check_version(path, data, BASELINE_VERSION)
    window = data.get("window", DEFAULT_WINDOW)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise InputError(path, f"window: expected a positive integer, got {window!r}")
    envs: dict[str, EnvSamples] = {}
    for key, raw_env in expect_object(path, "envs", data.get("envs")).items():
        env = expect_object(path, f"envs[{key!r}]", raw_env)
        parsed = EnvSamples()
        for group in GROUPS:
            where = f"envs[{key!r}].{group}"
            entries = expect_object(path, where, env.get(group, {}))
            parsed.group(group).update(_bulk_samples(path, where, entries))
        envs[str(key)] = parsed
    return Baseline(envs, window, "baseline")


def _parse_record(path: str, data: dict[str, Any]) -> Baseline:
    key = check_record(path, data)["env"]["key"]
    return Baseline({key: samples_from_record(path, data)}, DEFAULT_WINDOW, "record")


def median_durations(env: EnvSamples) -> dict[str, float]:
    """Each test's median sample: its expected duration, for planning shards."""
    return {test: statistics.median(samples) for test, samples in env.tests.items() if samples}


def samples_of(timings: Timings, test_metric: str = "call") -> EnvSamples:
    """Timings as one sample per test, class and module, ready to fold into a baseline."""
    parsed = EnvSamples(test_metric=test_metric)
    for group in GROUPS:
        parsed.group(group).update({i: [v] for i, v in timings.get(group, {}).items()})
    return parsed


def samples_from_record(
    path: str, data: Mapping[str, Any], test_metric: str = "call"
) -> EnvSamples:
    """A record as one sample per test, class and module (see ``current_from_record``)."""
    return samples_of(current_from_record(data, test_metric), test_metric)


def _parse_durations(path: str, data: dict[str, Any]) -> Baseline:
    parsed = EnvSamples(test_metric="total")
    for ident, seconds in data.items():
        parsed.tests[ident] = [expect_seconds(path, f"[{ident!r}]", seconds)]
    return Baseline({ANY_ENV: parsed}, DEFAULT_WINDOW, "durations")


def parse_baseline(path: str, data: Any) -> Baseline:
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema == BASELINE_SCHEMA:
        return _parse_baseline(path, data)
    if schema == RECORD_SCHEMA:
        return _parse_record(path, data)
    if schema is not None:
        raise InputError(
            path,
            f"schema {schema!r} is not one this plugin reads"
            f" ({BASELINE_SCHEMA!r}, {RECORD_SCHEMA!r} or a pytest-split durations map)",
        )
    return _parse_durations(path, data)


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    return parse_baseline(os.fspath(path), read_json(path))


def to_json(baseline: Baseline) -> dict[str, Any]:
    return {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_VERSION,
        "window": baseline.window,
        "envs": {
            key: {
                group: {ident: {"samples": s} for ident, s in env.group(group).items()}
                for group in GROUPS
            }
            for key, env in sorted(baseline.envs.items())
        },
    }


def add_run(baseline: Baseline, key: str, run: EnvSamples, window: int) -> None:
    """Append one run's samples under ``key``, keeping the last ``window`` of each."""
    baseline.window = window
    env = baseline.envs.setdefault(key, EnvSamples())
    for group in GROUPS:
        target = env.group(group)
        for ident, samples in run.group(group).items():
            kept = target.get(ident, []) + samples
            target[ident] = kept[-window:]
    for group in GROUPS:  # a smaller window trims the history too
        for ident, samples in env.group(group).items():
            env.group(group)[ident] = samples[-window:]


def update_baseline_file(
    path: str | os.PathLike[str], runs: Iterable[tuple[str, EnvSamples]], window: int
) -> Baseline:
    """Fold runs into the baseline at ``path`` under a file lock; create it if missing.

    Read, add and atomic replace all happen while holding ``PATH.lock``, so parallel
    jobs updating one baseline lose no sample.
    """

    def load_own(target: str) -> Baseline:
        baseline = load_baseline(target)
        if baseline.source != "baseline":
            raise InputError(
                target,
                f"is a {baseline.source} file, not a baseline; give --perf-baseline a"
                " baseline path to update (it is created on first use)",
            )
        return baseline

    def fold_runs(baseline: Baseline) -> None:
        for key, samples in runs:
            add_run(baseline, key, samples, window)

    return update_locked(path, load_own, lambda: Baseline({}, window), fold_runs, to_json)
