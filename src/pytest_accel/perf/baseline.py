"""Baselines: the last runs' timings per hardware key, read, validated, updated and
written only here.

Version 2 (docs/regressions.md, "The baseline file") keeps, per hardware key, the runs
its samples came from, oldest first (commit, branch, start time), and per run one list
of seconds for each kind (tests, classes, modules), aligned with that kind's ids
(``null``: no sample in that run).  Lists of numbers parse several times faster than an
object per test.  ``--perf-baseline`` also accepts a version 1 baseline, a record (one
run) and a pytest-split ``.test_durations`` map (one run, test totals, any key).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_accel.files import (
    InputError,
    check_version,
    expect_int,
    expect_object,
    expect_seconds,
    expect_text,
    parse_utc_timestamp,
    read_json,
)
from pytest_accel.locking import update_locked
from pytest_accel.perf.record import RECORD_SCHEMA, check_record, timings
from pytest_accel.perf.timings import RunIdentity, RunTimings

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

BASELINE_SCHEMA = "pytest-accel/baseline"
BASELINE_VERSION = 2
DEFAULT_WINDOW = 20
ANY_ENV = "*"  # the key of a pytest-split map: it applies to whatever hardware runs
# Per run: tests; the tests that ran first in their process (``warmup``: judged apart);
# classes and modules.
KINDS = ("tests", "warmup", "classes", "modules")
METRICS = ("call", "total")

Values = list[float | None]


@dataclass
class Run:
    identity: RunIdentity
    values: dict[str, Values]  # per kind, aligned with the ids (a shorter list: no more)
    layout: str | None = None  # how the run spread its tests (``timings.layout_of``)
    # The values of each kind as a float array (NaN: no sample), kept from validation
    # while ``values`` is unchanged; a kind absent here is converted when needed.
    arrays: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class EnvHistory:
    """One hardware key: its ids per kind and its runs, oldest first."""

    test_metric: str = "call"  # what a test's sample measures: "call" or "total"
    ids: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    runs: list[Run] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)  # changes accepted, for review
    _matrices: dict[str, tuple[int, list[Run], Any]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _positions: dict[str, tuple[list[str], dict[str, int]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def matrix(self, kind: str) -> tuple[list[str], npt.NDArray[np.float64]]:
        """The ids of ``kind`` and their samples: one row per id, one column per run.

        Built once per kind and set of runs (a comparison asks several times); read-only.
        """
        import numpy as np

        ids = self.ids[kind]
        width = len(ids)
        cached = self._matrices.get(kind)
        if (
            cached is not None
            and cached[0] == width
            and len(cached[1]) == len(self.runs)
            and all(a is b for a, b in zip(cached[1], self.runs, strict=True))
        ):
            return ids, cached[2]
        if not self.runs or not width:
            built = np.zeros((width, len(self.runs)))
        else:
            built = np.full((width, len(self.runs)), np.nan)
            for column, run in enumerate(self.runs):
                values = run.arrays.get(kind)
                if values is None:
                    values = np.array(run.values[kind], dtype=np.float64)
                built[: len(values), column] = values
        built.flags.writeable = False
        self._matrices[kind] = (width, list(self.runs), built)
        return ids, built

    def positions(self, kind: str) -> dict[str, int]:
        """Each id of ``kind`` and its row in ``matrix(kind)`` (built once per id list)."""
        ids = self.ids[kind]
        cached = self._positions.get(kind)
        if cached is not None and cached[0] is ids and len(cached[1]) == len(ids):
            return cached[1]
        index = {ident: row for row, ident in enumerate(ids)}
        self._positions[kind] = (ids, index)
        return index

    def samples(self, kind: str) -> dict[str, list[float]]:
        """Each id's samples, oldest first (for sharding, reports and tests)."""
        result: dict[str, list[float]] = {ident: [] for ident in self.ids[kind]}
        ids = self.ids[kind]
        for run in self.runs:
            for ident, value in zip(ids, run.values[kind], strict=False):
                if value is not None:
                    result[ident].append(value)
        return {ident: values for ident, values in result.items() if values}


@dataclass
class Baseline:
    envs: dict[str, EnvHistory]
    window: int = DEFAULT_WINDOW
    source: str = "baseline"  # "baseline", "record" or "durations"

    def for_key(self, key: str) -> EnvHistory | None:
        return self.envs.get(key) or self.envs.get(ANY_ENV)


def expected_durations(env: EnvHistory) -> dict[str, float]:
    """Each test's median sample: its expected duration, for planning shards."""
    import numpy as np

    from pytest_accel.perf.rule import row_median

    ids, matrix = env.matrix("tests")
    if not ids or not matrix.size:
        return {}
    medians = row_median(matrix)
    return {i: float(m) for i, m in zip(ids, medians.tolist(), strict=True) if not np.isnan(m)}


# --- reading -------------------------------------------------------------------------

_SAMPLE_TYPES = {float, int, type(None)}


def parse_baseline(path: str, data: Any) -> Baseline:
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema == BASELINE_SCHEMA:
        version = check_version(path, data, BASELINE_VERSION)
        window = expect_int(path, "window", data.get("window", DEFAULT_WINDOW), minimum=1)
        envs = expect_object(path, "envs", data.get("envs"))
        parse = _parse_env if version == 2 else _parse_env_version_1
        return Baseline({key: parse(path, f"envs[{key!r}]", e) for key, e in envs.items()}, window)
    if schema == RECORD_SCHEMA:
        record = timings(check_record(path, data))
        env = EnvHistory()
        add_run(env, record, DEFAULT_WINDOW)
        return Baseline({record.key: env}, DEFAULT_WINDOW, "record")
    if schema is not None:
        raise InputError(
            path,
            f"schema {schema!r} is not one this plugin reads"
            f" ({BASELINE_SCHEMA!r}, {RECORD_SCHEMA!r} or a pytest-split durations map)",
        )
    return _parse_durations(path, data)


def _parse_env(path: str, where: str, value: Any) -> EnvHistory:
    raw = expect_object(path, where, value)
    metric = raw.get("test_metric", "call")
    if metric not in METRICS:
        raise InputError(path, f"{where}.test_metric: expected call or total, got {metric!r:.60}")
    env = EnvHistory(metric)
    for kind in KINDS:
        ids = raw.get(kind, [])
        if not isinstance(ids, list) or not set(map(type, ids)) <= {str}:
            raise InputError(path, f"{where}.{kind}: expected a list of ids (strings)")
        env.ids[kind] = ids
    runs = raw.get("runs", [])
    if not isinstance(runs, list):
        raise InputError(path, f"{where}.runs: expected a list, got {type(runs).__name__}")
    for index, entry in enumerate(runs):
        env.runs.append(_parse_run(path, f"{where}.runs[{index}]", entry, env.ids))
    accepted = raw.get("accepted", [])
    if not isinstance(accepted, list) or not all(isinstance(a, dict) for a in accepted):
        raise InputError(path, f"{where}.accepted: expected a list of objects")
    env.accepted = accepted
    return env


def _parse_run(path: str, where: str, value: Any, ids: Mapping[str, list[str]]) -> Run:
    entry = expect_object(path, where, value)
    for name in ("commit", "branch"):
        expect_text(path, f"{where}.{name}", entry.get(name), optional=True)
    started = expect_text(path, f"{where}.started", entry.get("started"), optional=True)
    if started is not None:
        parse_utc_timestamp(path, f"{where}.started", started)
    identity = RunIdentity(entry.get("commit"), entry.get("branch"), started)
    layout = expect_text(path, f"{where}.layout", entry.get("layout"), optional=True)
    values: dict[str, Values] = {}
    arrays: dict[str, Any] = {}
    for kind in KINDS:
        column = entry.get(kind, [])
        if not isinstance(column, list):
            raise InputError(path, f"{where}.{kind}: expected a list, got {type(column).__name__}")
        if len(column) > len(ids[kind]):
            raise InputError(
                path, f"{where}.{kind}: {len(column)} values for {len(ids[kind])} {kind}"
            )
        seconds = _seconds_array(column)
        if seconds is None:
            for ident, sample in zip(ids[kind], column, strict=False):  # name the bad one
                if sample is not None:
                    expect_seconds(path, f"{where}.{kind}[{ident!r}]", sample)
        else:
            arrays[kind] = seconds
        values[kind] = column
    return Run(identity, values, layout, arrays)


def _seconds_array(column: list[Any]) -> npt.NDArray[np.float64] | None:
    """The column as a float array (NaN for null) when every value is a number of
    seconds or null, checked in bulk; None when one is not (the slow path names it)."""
    import numpy as np

    if not set(map(type, column)) <= _SAMPLE_TYPES:
        return None
    try:
        seconds = np.array(column, dtype=np.float64)
    except OverflowError:  # an integer beyond any float
        return None
    with np.errstate(invalid="ignore"):
        if np.any(seconds < 0) or np.any(seconds > 1e6):
            return None
    return seconds


def _parse_env_version_1(path: str, where: str, value: Any) -> EnvHistory:
    """Samples without runs: a test's last sample is taken to be from the newest run."""
    raw = expect_object(path, where, value)
    env = EnvHistory()
    series: dict[str, dict[str, list[float]]] = {}
    for kind in KINDS:
        entries = expect_object(path, f"{where}.{kind}", raw.get(kind, {}))
        series[kind] = {}
        for ident, entry in entries.items():
            samples = expect_object(path, f"{where}.{kind}[{ident!r}]", entry).get("samples")
            if not isinstance(samples, list):
                raise InputError(path, f"{where}.{kind}[{ident!r}].samples: expected a list")
            for index, sample in enumerate(samples):
                expect_seconds(path, f"{where}.{kind}[{ident!r}].samples[{index}]", sample)
            series[kind][ident] = [float(s) for s in samples]
    depth = max((len(s) for kinds in series.values() for s in kinds.values()), default=0)
    env.runs = [Run(RunIdentity(), {k: [] for k in KINDS}) for _ in range(depth)]
    for kind, entries in series.items():
        env.ids[kind] = list(entries)
        for run_index, run in enumerate(env.runs):
            back = depth - run_index  # 1 = the newest run
            run.values[kind] = [s[-back] if back <= len(s) else None for s in entries.values()]
    return env


def _parse_durations(path: str, data: dict[str, Any]) -> Baseline:
    env = EnvHistory(test_metric="total")
    env.ids["tests"] = list(data)
    values = [expect_seconds(path, f"[{ident!r}]", seconds) for ident, seconds in data.items()]
    env.runs = [Run(RunIdentity(), {k: [] for k in KINDS} | {"tests": list(values)})]
    return Baseline({ANY_ENV: env}, DEFAULT_WINDOW, "durations")


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    return parse_baseline(os.fspath(path), read_json(path))


# --- changing and writing ----------------------------------------------------------------


def add_run(env: EnvHistory, run: RunTimings, window: int) -> None:
    """Append one run's comparable timings (see ``RunTimings``), keep the last ``window``
    runs, and drop ids that no kept run has a sample of."""
    current = {
        "tests": run.comparable(env.test_metric),
        "warmup": run.comparable(env.test_metric, warmup=True),
        "classes": run.classes.comparable(),
        "modules": run.modules.comparable(),
    }
    values: dict[str, Values] = {}
    for kind, timings_of_kind in current.items():
        ids = env.ids[kind]
        index = {ident: i for i, ident in enumerate(ids)}
        for ident in timings_of_kind:
            if ident not in index:
                index[ident] = len(ids)
                ids.append(ident)
        column: Values = [None] * len(ids)
        for ident, seconds in timings_of_kind.items():
            column[index[ident]] = round(seconds, 6)
        values[kind] = column
    env.runs.append(Run(run.identity, values, run.layout))
    del env.runs[:-window]
    _compact(env)
    env._matrices.clear()


def _compact(env: EnvHistory) -> None:
    """Ids without a sample in any kept run go; trailing empty entries are not written."""
    for kind in KINDS:
        ids = env.ids[kind]
        alive = [False] * len(ids)
        for run in env.runs:
            for i, value in enumerate(run.values[kind]):
                if value is not None:
                    alive[i] = True
        if all(alive):
            continue
        keep = [i for i, live in enumerate(alive) if live]
        env.ids[kind] = [ids[i] for i in keep]
        for run in env.runs:
            column = run.values[kind]
            run.values[kind] = [column[i] if i < len(column) else None for i in keep]
            run.arrays.pop(kind, None)


def accept(env: EnvHistory, kind: str, ident: str, runs: int, note: dict[str, Any]) -> None:
    """Accept a change: the samples of ``ident`` before its last ``runs`` runs go, so the
    new level is the baseline and the alarm stops.  ``note`` is kept for review."""
    at = env.ids[kind].index(ident)
    for run in env.runs[: max(len(env.runs) - runs, 0)]:
        if at < len(run.values[kind]):
            run.values[kind][at] = None
            run.arrays.pop(kind, None)
    env.accepted.append(note)
    env._matrices.clear()  # the samples changed in place


def to_json(baseline: Baseline) -> dict[str, Any]:
    return {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_VERSION,
        "window": baseline.window,
        "envs": {key: _env_json(env) for key, env in sorted(baseline.envs.items())},
    }


def _env_json(env: EnvHistory) -> dict[str, Any]:
    data: dict[str, Any] = {"test_metric": env.test_metric, **env.ids}
    data["runs"] = [
        {
            **run.identity.to_json(),
            "layout": run.layout,
            **{kind: _trimmed(run.values[kind]) for kind in KINDS},
        }
        for run in env.runs
    ]
    if env.accepted:
        data["accepted"] = env.accepted
    return data


def _trimmed(values: Values) -> Values:
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    return values[:end]


def update_baseline_file(
    path: str | os.PathLike[str], runs: Iterable[RunTimings], window: int
) -> Baseline:
    """Add runs to the baseline at ``path`` (created if missing) under a file lock:
    read, add and atomic replace happen while holding it, so parallel jobs lose nothing."""

    def load_own(target: str) -> Baseline:
        baseline = load_baseline(target)
        if baseline.source != "baseline":
            raise InputError(
                target,
                f"is a {baseline.source} file, not a baseline; give --perf-baseline a"
                " baseline path to update (it is created on first use)",
            )
        return baseline

    def add_runs(baseline: Baseline) -> None:
        baseline.window = window
        for run in runs:
            add_run(baseline.envs.setdefault(run.key, EnvHistory()), run, window)
        for env in baseline.envs.values():  # a smaller window trims every key
            del env.runs[:-window]
            _compact(env)

    return update_locked(path, load_own, lambda: Baseline({}, window), add_runs, to_json)
