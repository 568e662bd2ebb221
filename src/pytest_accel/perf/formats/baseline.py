"""Baselines: the last runs' timings per hardware key, read, validated, updated and
written only here.

Version 4 (docs/format.md, "The baseline") keeps, per hardware key, the runs its
samples came from, oldest first (commit, branch, start time), and per run one column of
seconds for each kind (tests, warm-ups, classes, modules), aligned with that kind's ids:
the hexadecimal of doubles, NaN for no sample (``perf.model.columns`` says why).  Version 3
wrote the same columns in base64, version 2 as lists of numbers (``null``: no sample);
both are read as they are.
``--perf-baseline`` also accepts a version 1 baseline, a record (one run) and a
pytest-split ``.test_durations`` map (one run, test totals, any key).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from operator import is_not
from typing import Any

from pytest_accel.fields import (
    MAX_SECONDS,
    check_version,
    expect_int,
    expect_object,
    expect_seconds,
    expect_text,
    kind_of,
    parse_utc_timestamp,
)
from pytest_accel.files import InputError, read_json
from pytest_accel.locking import update_locked
from pytest_accel.perf.formats.record import RECORD_SCHEMA, check_record, timings
from pytest_accel.perf.model import DEFAULT_WINDOW, TIMES, columns
from pytest_accel.perf.model.columns import Values
from pytest_accel.perf.model.samples import (
    ANY_ENV,
    KINDS,
    METRICS,
    Baseline,
    EnvHistory,
    Run,
    Summary,
    has_sample,
)
from pytest_accel.perf.model.timings import RunIdentity, RunTimings, judged_on

__all__ = [
    "ANY_ENV",
    "DEFAULT_WINDOW",
    "KINDS",
    "Baseline",
    "EnvHistory",
    "Run",
]


BASELINE_SCHEMA = "pytest-accel/baseline"
BASELINE_VERSION = 4
_SAMPLE_TYPES = {float, int, type(None)}
_NUMBER_TYPES = {float, int}


def parse_baseline(path: str, data: Any) -> Baseline:
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema == BASELINE_SCHEMA:
        version = check_version(path, data, BASELINE_VERSION)
        window = expect_int(path, "window", data.get("window", DEFAULT_WINDOW), minimum=1)
        envs = expect_object(path, "envs", data.get("envs"))
        encoding = columns.HEX if version >= 4 else columns.BASE64
        parse = partial(_parse_env, encoding=encoding) if version >= 2 else _parse_env_version_1
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


def _parse_env(path: str, where: str, value: Any, encoding: str) -> EnvHistory:
    """A hardware key's ids, runs and summary; the runs' columns of samples as strings in
    ``encoding`` (``columns.HEX`` or ``columns.BASE64``) or lists of numbers."""
    raw = expect_object(path, where, value)
    metric = raw.get("test_metric", "call")
    if metric not in METRICS:
        raise InputError(path, f"{where}.test_metric: expected call or total, got {metric!r:.60}")
    env = EnvHistory(metric)
    for kind in KINDS:
        ids = raw.get(kind, [])
        try:  # interned: the flaky history names them too; and only a str can be
            env.ids[kind] = list(map(sys.intern, ids)) if isinstance(ids, list) else []
        except TypeError:
            ids = None
        if not isinstance(ids, list):
            raise InputError(path, f"{where}.{kind}: expected a list of ids (strings)")
    if "runs" not in raw:
        raise InputError(path, f"{where}.runs: missing (expected a list of runs)")
    runs = raw["runs"]
    if not isinstance(runs, list):
        raise InputError(path, f"{where}.runs: expected a list, got {kind_of(runs)}")
    if not runs and any(env.ids.values()):
        raise InputError(path, f"{where}.runs: no runs, but ids to hold their samples")
    for index, entry in enumerate(runs):
        env.runs.append(_parse_run(path, f"{where}.runs[{index}]", entry, env.ids, encoding))
    accepted = raw.get("accepted", [])
    if not isinstance(accepted, list) or not all(isinstance(a, dict) for a in accepted):
        raise InputError(path, f"{where}.accepted: expected a list of objects")
    env.accepted = accepted
    wall = raw.get("wall")
    if wall is not None:
        env.wall_raw = _parse_wall(path, f"{where}.wall", wall, env.ids["tests"])
    summary = raw.get("summary")
    if summary is not None:
        parsed = _parse_summary(path, f"{where}.summary", summary)
        # An older release's noise of a short history is not this one's: derived anew.
        if not isinstance(summary, dict) or summary.get("revision") == SUMMARY_REVISION:
            env._summary = parsed
    return env


# How the summary's numbers are derived: 2, the noise of a history shorter than
# ``rule.SHORT_HISTORY`` runs is their plain spread, at least ``rule.SHORT_NOISE_FLOOR``.
SUMMARY_REVISION = 2


def _parse_summary(path: str, where: str, value: Any) -> Summary:
    """A summary as written; one that no longer fits the runs is ignored later, not an
    error (``Summary.fits``): a tool that edits the runs may leave it behind."""
    raw = expect_object(path, where, value)
    runs = expect_int(path, f"{where}.runs", raw.get("runs"), minimum=0)
    kinds = {kind: expect_object(path, f"{where}.{kind}", raw.get(kind, {})) for kind in KINDS}
    tests, warmup = kinds["tests"], kinds["warmup"]

    def numbers(name: str, found: Any, *, nulls: bool = True) -> Values:
        allowed = _SAMPLE_TYPES if nulls else _NUMBER_TYPES
        if not isinstance(found, list) or not (types := set(map(type, found))) <= allowed:
            nulls_too = " or nulls" if nulls else ""
            raise InputError(path, f"{where}.{name}: expected a list of numbers{nulls_too}")
        # Without a list of the numbers: 100,000 tests have five columns here.
        present = filter(partial(is_not, None), found) if type(None) in types else found
        # Seconds, log seconds and speeds: a value beyond MAX_SECONDS is corruption.
        if max(map(abs, present), default=0.0) > MAX_SECONDS:
            bad = next(v for v in found if v is not None and abs(v) > MAX_SECONDS)
            raise InputError(path, f"{where}.{name}: {bad!r:.40} is implausibly large")
        return found

    peaks = {kind: numbers(f"{kind}.peak", found.get("peak", [])) for kind, found in kinds.items()}
    return Summary(
        runs,
        numbers("tests.median", tests.get("median", [])),
        numbers("tests.centre", tests.get("centre", [])),
        numbers("tests.noise", tests.get("noise", [])),
        numbers("tests.level", tests.get("level", [])),
        numbers("warmup.median", warmup.get("median", [])),
        [float(s) for s in numbers("speeds", raw.get("speeds", []), nulls=False) if s is not None],
        peaks,
        numbers("totals", raw.get("totals", [])),
        _parse_steps(path, f"{where}.tests.steps", tests.get("steps")),
    )


def _parse_steps(path: str, where: str, value: Any) -> dict[int, int] | None:
    """The summary's ``steps``: ``[[row, runs], ...]``, a test's row in ``tests`` and
    its runs at the new level (None: not written, by a release before the field)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(pair, list)
        and len(pair) == 2  # a row and its runs
        and all(type(n) is int for n in pair)
        and pair[0] >= 0
        and pair[1] >= 1
        for pair in value
    ):
        raise InputError(path, f"{where}: expected a list of [row, runs] pairs of counts")
    steps = dict(map(tuple, value))
    if len(steps) != len(value):
        raise InputError(path, f"{where}: a row is listed twice")
    return steps


def _parse_run(
    path: str, where: str, value: Any, ids: Mapping[str, list[str]], encoding: str
) -> Run:
    entry = expect_object(path, where, value)
    for name in ("id", "commit", "branch"):
        expect_text(path, f"{where}.{name}", entry.get(name), optional=True)
    started = expect_text(path, f"{where}.started", entry.get("started"), optional=True)
    if started is not None:
        parse_utc_timestamp(path, f"{where}.started", started)
    identity = RunIdentity(entry.get("commit"), entry.get("branch"), started, entry.get("id"))
    layout = expect_text(path, f"{where}.layout", entry.get("layout"), optional=True)
    basis = expect_text(path, f"{where}.time", entry.get("time", "wall"))
    if basis not in TIMES:
        raise InputError(
            path, f"{where}.time: expected one of {', '.join(TIMES)}, got {basis!r:.40}"
        )
    compiling = entry.get("compile_seconds")
    if compiling is not None:
        expect_seconds(path, f"{where}.compile_seconds", compiling)
    recompiles = expect_object(path, f"{where}.recompiles", entry.get("recompiles", {}))
    for ident, count in recompiles.items():
        expect_int(path, f"{where}.recompiles[{ident!r}]", count, minimum=0)
    repeats = entry.get("repeats")
    if repeats is not None:
        for ident, count in expect_object(path, f"{where}.repeats", repeats).items():
            expect_int(path, f"{where}.repeats[{ident!r}]", count, minimum=0)
    memory = entry.get("device_memory")
    if memory is not None:
        for ident, count in expect_object(path, f"{where}.device_memory", memory).items():
            expect_int(path, f"{where}.device_memory[{ident!r}]", count, minimum=0)
    values: dict[str, Values] = {}
    encoded: dict[str, bytes] = {}
    for kind in KINDS:
        column = entry.get(kind, [])
        if isinstance(column, str):  # version 4 (hexadecimal) or 3 (base64)
            try:
                raw = encoded[kind] = columns.decode(column, encoding)
            except ValueError as exc:
                raise InputError(path, f"{where}.{kind}: {exc}") from None
            count = len(raw) // 8
        elif isinstance(column, list):  # version 2
            values[kind] = column
            count = len(column)
        else:
            raise InputError(
                path,
                f"{where}.{kind}: expected {encoding} samples (a string) or a list of numbers,"
                f" got {type(column).__name__}",
            )
        if count > len(ids[kind]):
            raise InputError(path, f"{where}.{kind}: {count} values for {len(ids[kind])} {kind}")
        # Checked in bulk (two million samples at 100,000 tests); the bad one named.
        if kind in encoded and (bad := columns.bad_sample(encoded[kind])) is not None:
            sample = columns.as_list(encoded[kind])[bad]
            expect_seconds(path, f"{where}.{kind}[{ids[kind][bad]!r}]", sample)
        elif kind in values and not _checked_seconds(column):
            for ident, sample in zip(ids[kind], column, strict=False):
                if sample is not None:
                    expect_seconds(path, f"{where}.{kind}[{ident!r}]", sample)
    return Run(
        identity,
        columns.Columns(values, encoded),
        layout,
        basis,
        None if compiling is None else float(compiling),
        dict(recompiles),
        None if repeats is None else dict(repeats),
        None if memory is None else dict(memory),
    )


def _parse_wall(path: str, where: str, value: Any, tests: list[str]) -> bytes:
    """Each test's newest wall seconds: hexadecimal doubles aligned with the tests."""
    if not isinstance(value, str):
        raise InputError(path, f"{where}: expected hexadecimal seconds (a string)")
    try:
        raw = columns.decode(value)
    except ValueError as exc:
        raise InputError(path, f"{where}: {exc}") from None
    if len(raw) // 8 > len(tests):
        raise InputError(path, f"{where}: {len(raw) // 8} values for {len(tests)} tests")
    if (bad := columns.bad_sample(raw)) is not None:
        expect_seconds(path, f"{where}[{tests[bad]!r}]", columns.as_list(raw)[bad])
    return raw


def _checked_seconds(column: list[Any]) -> bool:
    """Whether every value is a number of seconds (0 to 10^6) or null, checked in bulk
    with C-level maps: a baseline can hold two million samples."""
    if not set(map(type, column)) <= _SAMPLE_TYPES:
        return False
    present = list(filter(has_sample, column))
    return not present or (min(present) >= 0 and max(present) <= MAX_SECONDS)


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
    env.runs = [Run(RunIdentity(), columns.Columns({k: [] for k in KINDS})) for _ in range(depth)]
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
    env.runs = [
        Run(RunIdentity(), columns.Columns({**{k: [] for k in KINDS}, "tests": list(values)}))
    ]
    return Baseline({ANY_ENV: env}, DEFAULT_WINDOW, "durations")


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    return parse_baseline(os.fspath(path), read_json(path))


# --- changing and writing ----------------------------------------------------------------


def add_run(
    env: EnvHistory,
    run: RunTimings,
    window: int,
    wall: Mapping[str, float] | None = None,
    *,
    compact: bool = True,
) -> list[str]:
    """Append one run's comparable timings (see ``RunTimings``), keep the last ``window``
    runs, and drop ids that no kept run has a sample of (the tests dropped are returned:
    they failed or did not run in every kept run).  ``wall``: the run's tests' wall
    seconds as measured, each test's newest (``EnvHistory.walls``).  ``compact=False``:
    the caller adds more runs and compacts once, after the last (a pass over every kept
    run's samples per run added made folding N records quadratic)."""
    if wall:
        env.walls().update((ident, round(seconds, 6)) for ident, seconds in wall.items())
    current = {
        "tests": run.comparable(env.test_metric),
        "warmup": run.comparable(env.test_metric, warmup=True),
        "classes": run.classes.comparable(),
        "modules": run.modules.comparable(),
        "trace": run.comparable_tracing(),
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
    env.runs.append(
        Run(
            run.identity,
            columns.Columns(values),
            run.layout,
            run.basis,
            run.compile_seconds,
            {t: n for t, n in (run.recompiles or {}).items() if n},
            None if run.repeats is None else {t: n for t, n in run.repeats.items() if n > 1},
            None if run.device_memory is None else run.exact_memory(),
        )
    )
    del env.runs[:-window]
    dropped = _compact(env) if compact else []
    env.changed()
    return dropped


def _compact(env: EnvHistory) -> list[str]:
    """Ids without a sample in any kept run go; trailing empty entries are not written.
    Returns the tests that went (neither a test's nor a warm-up's sample left)."""
    gone: dict[str, list[str]] = {}
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
        gone[kind] = [ids[i] for i, live in enumerate(alive) if not live]
        if kind == "tests":
            env.forget_walls(gone[kind])
        env.ids[kind] = [ids[i] for i in keep]
        for run in env.runs:
            column = run.values[kind]
            run.values[kind] = [column[i] if i < len(column) else None for i in keep]
    went = dict.fromkeys([*gone.get("tests", ()), *gone.get("warmup", ())])
    if not went:
        return []
    still = set(env.ids["tests"]) | set(env.ids["warmup"])
    return [test for test in went if test not in still]


def accept(env: EnvHistory, kind: str, ident: str, runs: int, note: dict[str, Any]) -> None:
    """Accept a change: the samples of ``ident`` before its last ``runs`` runs go, so the
    new level is the baseline and the alarm stops.  ``note`` is kept for review."""
    at = env.ids[kind].index(ident)
    for run in env.runs[: max(len(env.runs) - runs, 0)]:
        if at < len(run.values[kind]):
            run.values[kind][at] = None
    env.accepted.append(note)
    env.changed()  # the samples changed in place


# What derives a key's summary from its samples (``perf.analysis.summary.summary_to_write``):
# given by the caller, as this module reads and writes files and judges nothing.
Summarise = Callable[[EnvHistory], Summary]


def to_json(baseline: Baseline, summarise: Summarise) -> dict[str, Any]:
    """The file's JSON, each key's summary as ``summarise`` derives it (or keeps it)."""
    return {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_VERSION,
        "window": baseline.window,
        "envs": {key: _env_json(env, summarise) for key, env in sorted(baseline.envs.items())},
    }


def _env_json(env: EnvHistory, summarise: Summarise) -> dict[str, Any]:
    # The tracing kind is written only where the suite uses JAX (new in 0.4: a release
    # before reads the file as it was, without it).
    kinds = KINDS if env.ids["trace"] else tuple(k for k in KINDS if k != "trace")
    data: dict[str, Any] = {"test_metric": env.test_metric, **{k: env.ids[k] for k in kinds}}
    data["runs"] = [
        {
            **run.identity.to_json(),
            "layout": run.layout,
            **({"time": run.basis} if run.basis != "wall" else {}),
            **({"compile_seconds": run.compile_seconds} if run.compile_seconds is not None else {}),
            **({"recompiles": run.recompiles} if run.recompiles else {}),
            **({"repeats": run.repeats} if run.repeats is not None else {}),
            **({"device_memory": run.device_memory} if run.device_memory is not None else {}),
            **{kind: columns.encode(run.values, kind) for kind in kinds},
        }
        for run in env.runs
    ]
    if env.accepted:
        data["accepted"] = env.accepted
    wall = env.wall_column()
    if wall:
        data["wall"] = wall
    summary = summarise(env)
    data["summary"] = {
        "revision": SUMMARY_REVISION,
        "runs": summary.runs,
        "speeds": summary.speeds,
        "totals": summary.totals,
        "tests": {
            "median": summary.median,
            "centre": summary.centre,
            "noise": summary.noise,
            "level": summary.level,
            "peak": summary.peaks["tests"],
            # Not derived (a summary read as an earlier release wrote it): not written.
            **(
                {"steps": [[row, runs] for row, runs in sorted(summary.steps.items())]}
                if summary.steps is not None
                else {}
            ),
        },
        "warmup": {"median": summary.warmup_median, "peak": summary.peaks["warmup"]},
        "classes": {"peak": summary.peaks["classes"]},
        "modules": {"peak": summary.peaks["modules"]},
        **({"trace": {"peak": summary.peaks["trace"]}} if "trace" in kinds else {}),
    }
    return data


def update_baseline_file(
    path: str | os.PathLike[str],
    runs: Iterable[RunTimings],
    window: int,
    held: list[RunTimings] | None = None,
    *,
    summarise: Summarise,
    time: str = "execution",
    dropped: list[tuple[str, str]] | None = None,
) -> Baseline:
    """Add runs to the baseline at ``path`` (created if missing) under a file lock:
    read, add and atomic replace happen while holding it, so parallel jobs lose nothing.
    A run the baseline holds already is not added again; it goes into ``held``.  The
    tests the window left without a sample go into ``dropped``, with their key."""
    held = [] if held is None else held
    dropped = [] if dropped is None else dropped

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
        fold_runs(baseline, runs, window, time=time, held=held, dropped=dropped)

    return update_locked(
        path,
        load_own,
        lambda: Baseline({}, window),
        add_runs,
        partial(to_json, summarise=summarise),
    )


def fold_runs(
    baseline: Baseline,
    runs: Iterable[RunTimings],
    window: int,
    *,
    time: str,
    held: list[RunTimings],
    dropped: list[tuple[str, str]],
) -> None:
    """Add ``runs`` (oldest first) to ``baseline`` in memory, keeping the last ``window``
    of each key: a run it holds already goes into ``held``, the tests the window left
    without a sample into ``dropped``."""
    baseline.window = window
    for measured in runs:
        run = judged_on(measured, time)
        env = baseline.envs.setdefault(run.key, EnvHistory())
        if env.run_holding(run.identity, run.comparable(env.test_metric)) is not None:
            held.append(measured)  # folded in already: a second copy would count it twice
            continue
        add_run(env, run, window, wall=measured.comparable("total"), compact=False)
    for key, env in baseline.envs.items():  # once, after the last run: trims every key
        del env.runs[:-window]
        dropped.extend((key, test) for test in _compact(env))
