"""The timing feature from files alone, for the command line tool: compare a record
with a baseline, fold records into a baseline, and read expected durations."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_accel.files import InputError, read_json
from pytest_accel.perf.baseline import (
    GROUPS,
    Baseline,
    load_baseline,
    median_durations,
    parse_baseline,
    samples_from_record,
    update_baseline_file,
)
from pytest_accel.perf.record import RECORD_SCHEMA, check_record, current_from_record, load_record
from pytest_accel.perf.regression import Comparison, Rule, compare


def compare_files(
    record_path: str, baseline_path: str, rule: Rule, env_key: str | None = None
) -> Comparison:
    """The plugin's comparison, from a record and a baseline (under the record's key)."""
    key, data = load_record(record_path)
    key = env_key or key
    baseline = load_baseline(baseline_path)
    env = baseline.for_key(key)
    if env is None:
        return Comparison(key, available_envs=sorted(baseline.envs))
    now = current_from_record(data, env.test_metric)
    return compare(key, now, {g: env.group(g) for g in GROUPS}, rule)


def fold_records(paths: Sequence[str], into: str, window: int) -> tuple[Baseline, int]:
    """Fold records into the baseline file ``into``; the baseline and how many runs."""
    runs = []
    for path in paths:
        key, data = load_record(path)
        runs.append((key, samples_from_record(path, data)))
    return update_baseline_file(into, runs, window), len(runs)


Groups = dict[str, tuple[str | None, str | None]]  # test -> (class, module)


def durations_file(path: str, env_key: str | None) -> tuple[dict[str, float], Groups | None]:
    """Expected test durations from a baseline, a record or a pytest-split map, and the
    tests' classes and modules where the file knows them (a record does)."""
    data = read_json(path)
    if isinstance(data, dict) and data.get("schema") == RECORD_SCHEMA:
        data = check_record(path, data)
        known = current_from_record(data, "total")["tests"]
        groups = {t: (data["tests"][t].get("class"), data["tests"][t].get("module")) for t in known}
        return known, groups
    baseline = parse_baseline(path, data)
    env = baseline.for_key(env_key) if env_key else next(iter(baseline.envs.values()), None)
    if env is None:
        raise InputError(
            path, f"no timings for {env_key!r} (it has: {', '.join(sorted(baseline.envs))})"
        )
    return median_durations(env), None
