"""The baseline in memory: runs folded in with their identity, the matrices and indexes
a comparison reads (built once, rebuilt when the runs change), accepting a change,
validation in bulk with the bad value named, the JSON written back, and the samples'
columns (version 3's base64 doubles) decoded only when read.  (Baselines
made by real runs, and read from broken files, are in test_baseline.py.)"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pytest

from bench import synthetic
from pytest_accel.files import InputError
from pytest_accel.perf.analysis.summary import expected_durations, summary_of
from pytest_accel.perf.formats.baseline import (
    Baseline,
    EnvHistory,
    accept,
    add_run,
    parse_baseline,
)
from pytest_accel.perf.formats.record import check_record, timings
from pytest_accel.perf.model import columns
from pytest_accel.perf.model.timings import RunTimings
from pytest_accel.perf.offline import baseline_json


def run_of(calls: dict[str, float], started: float = 0.0, commit: str = "abc") -> RunTimings:
    data = synthetic.record(calls, started=synthetic.STARTED + started)
    data["run"]["commit"] = commit
    return timings(check_record("r.json", data))


def env_of(*runs: dict[str, float], window: int = 20) -> EnvHistory:
    env = EnvHistory()
    for n, calls in enumerate(runs):
        add_run(env, run_of(calls, started=60.0 * n, commit=f"c{n}"), window)
    return env


def test_each_run_keeps_its_identity_and_one_value_per_id() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    assert [r.identity.commit for r in env.runs] == ["c0", "c1"]
    assert env.ids["tests"] == ["t.py::a", "t.py::b"]
    assert env.runs[0].values["tests"] == [0.1, 0.2]
    assert env.runs[1].values["tests"] == [0.3, None]
    assert env.ids["modules"] == ["t.py"]


def test_the_matrix_has_a_row_per_id_and_a_column_per_run() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    ids, matrix = env.matrix("tests")
    assert ids == ["t.py::a", "t.py::b"]
    assert matrix.shape == (2, 2)
    assert matrix[0].tolist() == [0.1, 0.3]
    assert matrix[1, 0] == 0.2
    assert math.isnan(matrix[1, 1])


def test_the_matrix_is_built_once_and_read_only() -> None:
    env = env_of({"t.py::a": 0.1}, {"t.py::a": 0.2})
    _, first = env.matrix("tests")
    _, again = env.matrix("tests")
    assert again is first
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0] = 9.0


def test_a_new_run_rebuilds_the_matrix() -> None:
    env = env_of({"t.py::a": 0.1}, {"t.py::a": 0.2})
    _, before = env.matrix("tests")
    add_run(env, run_of({"t.py::a": 0.3, "t.py::c": 1.0}, started=500.0), window=20)
    ids, after = env.matrix("tests")
    assert after is not before
    assert ids == ["t.py::a", "t.py::c"]
    assert after.shape == (2, 3)
    assert after[0].tolist() == [0.1, 0.2, 0.3]


def test_accepting_a_change_drops_the_old_samples_and_the_cached_matrix() -> None:
    env = env_of(*[{"t.py::a": 0.1}] * 4, *[{"t.py::a": 0.4}] * 3)
    _, before = env.matrix("tests")
    accept(env, "tests", "t.py::a", 3, {"id": "t.py::a", "accepted": "now"})
    _, after = env.matrix("tests")
    assert after is not before
    row = after[0]
    assert np.isnan(row[:4]).all()
    assert row[4:].tolist() == [0.4, 0.4, 0.4]
    assert env.accepted == [{"id": "t.py::a", "accepted": "now"}]


def test_positions_index_the_matrix_rows_and_follow_the_ids() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2})
    assert env.positions("tests") == {"t.py::a": 0, "t.py::b": 1}
    add_run(env, run_of({"t.py::c": 0.3}, started=90.0), window=20)
    assert env.positions("tests") == {"t.py::a": 0, "t.py::b": 1, "t.py::c": 2}


def test_the_window_drops_old_runs_and_ids_left_without_a_sample() -> None:
    env = env_of({"t.py::gone": 0.1, "t.py::a": 0.2}, {"t.py::a": 0.3}, {"t.py::a": 0.4}, window=2)
    assert [r.identity.commit for r in env.runs] == ["c1", "c2"]
    assert env.ids["tests"] == ["t.py::a"]
    assert env.matrix("tests")[1].tolist() == [[0.3, 0.4]]


def test_expected_durations_are_each_tests_median() -> None:
    env = env_of({"t.py::a": 0.1}, {"t.py::a": 0.3}, {"t.py::a": 0.2, "t.py::b": 1.0})
    assert expected_durations(env) == {"t.py::a": pytest.approx(0.2), "t.py::b": 1.0}


def document(env_json: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "pytest-accel/baseline", "version": 2, "window": 20, "envs": env_json}


def decoded(column: str) -> list[float | None]:
    return columns.as_list(columns.decode(column))


def test_written_and_read_back_a_baseline_is_the_same() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    data = baseline_json(Baseline({"cpu/x1": env}))
    again = parse_baseline("b.json", data)
    assert again.envs["cpu/x1"].ids == env.ids
    assert again.envs["cpu/x1"].runs[0].values == env.runs[0].values
    np.testing.assert_array_equal(again.envs["cpu/x1"].matrix("tests")[1], env.matrix("tests")[1])


def test_trailing_missing_samples_are_not_written_and_others_are_nan() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3}, {"t.py::b": 0.4})
    runs = baseline_json(Baseline({"cpu/x1": env}))["envs"]["cpu/x1"]["runs"]
    assert decoded(runs[1]["tests"]) == [0.3]
    assert decoded(runs[2]["tests"]) == [None, 0.4]
    assert len(columns.decode(runs[2]["tests"])) == 16  # two doubles
    assert columns.decode(runs[2]["tests"])[:8] == bytes.fromhex("000000000000f87f")  # NaN, LE


def test_a_column_read_is_decoded_only_when_its_list_is_asked_for() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    again = parse_baseline("b.json", baseline_json(Baseline({"cpu/x1": env}))).envs["cpu/x1"]
    run = again.runs[1]
    assert isinstance(run.values, columns.Columns)
    assert run.values.raw("tests") is not None
    assert run.sample("tests", 0) == 0.3
    assert run.sample("tests", 1) is None  # past the trimmed end
    matrix = again.matrix("tests")[1]
    assert (matrix[0].tolist(), matrix[1, 0]) == ([0.1, 0.3], 0.2)
    assert math.isnan(matrix[1, 1])
    assert run.values.raw("tests") is not None  # the matrix read the bytes themselves
    assert run.values["tests"] == [0.3]
    assert run.values.raw("tests") is None  # the list is what the run holds now
    run.values["tests"][0] = 0.5
    assert baseline_json(Baseline({"cpu/x1": again}))["envs"]["cpu/x1"]["runs"][1]["tests"] == (
        columns.encode(columns.Columns({"tests": [0.5]}), "tests")
    )


def test_a_version_2_baseline_is_read_and_written_back_as_version_4() -> None:
    data = bad_run([0.1, None])
    data["envs"]["cpu/x1"]["runs"].append({"commit": "d", "tests": [0.2, 0.3]})
    env = parse_baseline("b.json", data).envs["cpu/x1"]
    assert env.samples("tests") == {"t.py::a": [0.1, 0.2], "t.py::b": [0.3]}
    written = baseline_json(Baseline({"cpu/x1": env}))
    assert written["version"] == 4
    assert [decoded(run["tests"]) for run in written["envs"]["cpu/x1"]["runs"]] == [
        [0.1],
        [0.2, 0.3],
    ]
    assert parse_baseline("b.json", written).envs["cpu/x1"].samples("tests") == env.samples("tests")


@pytest.mark.parametrize("numpy_loaded", [True, False], ids=["numpy", "plain"])
@pytest.mark.parametrize(
    ("values", "bad"),
    [
        ([0.1, math.nan, 1e6, 0.0, -0.0], None),
        ([0.1, -1.0], 1),
        ([math.inf, 0.1], 0),
        ([math.nan, 1e6 + 1], 1),
        ([-math.nan, 0.1, -2.0], 2),
    ],
)
def test_a_column_s_bad_sample_is_found_with_or_without_numpy(
    values: list[float], bad: int | None, numpy_loaded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import struct

    raw = struct.pack(f"<{len(values)}d", *values)
    if not numpy_loaded:
        monkeypatch.delitem(sys.modules, "numpy")
    assert columns.bad_sample(raw) == bad


def bad_run(tests: list[Any]) -> dict[str, Any]:
    return document(
        {
            "cpu/x1": {
                "tests": ["t.py::a", "t.py::b"],
                "warmup": [],
                "classes": [],
                "modules": [],
                "runs": [{"commit": "c", "tests": tests}],
            }
        }
    )


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ([0.1, "slow"], "envs['cpu/x1'].runs[0].tests['t.py::b']: expected a number of seconds"),
        ([0.1, -1], "envs['cpu/x1'].runs[0].tests['t.py::b']: -1 is negative"),
        ([True, 0.1], "envs['cpu/x1'].runs[0].tests['t.py::a']: expected a number of seconds"),
        ([1e9, 0.1], "envs['cpu/x1'].runs[0].tests['t.py::a']: 1000000000.0 seconds"),
        ([10**400, 0.1], "envs['cpu/x1'].runs[0].tests['t.py::a']: 1000000000"),
        ([0.1, 0.2, 0.3], "envs['cpu/x1'].runs[0].tests: 3 values for 2 tests"),
    ],
)
def test_a_bad_sample_is_found_in_bulk_and_named(tests: list[Any], message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_baseline("b.json", bad_run(tests))
    assert str(raised.value).startswith("b.json: ")
    assert message in str(raised.value)


def test_good_samples_are_kept_and_a_null_is_nan_in_the_matrix() -> None:
    baseline = parse_baseline("b.json", bad_run([0.1, None]))
    env = baseline.envs["cpu/x1"]
    assert env.runs[0].values["tests"] == [0.1, None]
    _, matrix = env.matrix("tests")
    assert matrix[0, 0] == 0.1
    assert math.isnan(matrix[1, 0])


def test_the_summary_is_written_with_the_samples_and_read_back_as_written() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    written = baseline_json(Baseline({"cpu/x1": env}))["envs"]["cpu/x1"]["summary"]
    assert written["runs"] == 2
    assert written["tests"]["median"] == [0.2, 0.2]  # (0.1 + 0.3) / 2; b's one sample
    assert written["tests"]["peak"] == [0.3, 0.2]
    # The z-score's centre: the median log sample (of two, the mean of their logs).
    centre = [round((math.log(0.1) + math.log(0.3)) / 2, 7), round(math.log(0.2), 7)]
    assert written["tests"]["centre"] == centre
    assert written["speeds"] == [1.0, 1.0]  # fewer than 20 tests: no speed
    assert written["totals"] == [0.3, 0.3]
    again = parse_baseline("b.json", baseline_json(Baseline({"cpu/x1": env})))
    summary = again.envs["cpu/x1"].stored_summary()
    assert summary is not None
    assert summary == summary_of(env)


def test_the_summary_keeps_the_steps_the_runs_show_and_one_that_cannot_be_is_derived_again() -> (
    None
):
    """The steps of the baseline's own runs (the last three of ``t.py::a`` at a new
    level), as the change search finds them; a summary naming a row or a length the
    baseline does not have (a hand edit) no longer fits its runs."""
    steady = [{"t.py::a": 0.3 * w, "t.py::b": 0.2 * w} for w in (1.0, 1.02, 0.98, 1.01, 0.99)]
    env = env_of(*steady, *({"t.py::a": 0.9 * w, "t.py::b": 0.2 * w} for w in (1.0, 1.01, 0.99)))
    written = baseline_json(Baseline({"cpu/x1": env}))
    assert written["envs"]["cpu/x1"]["summary"]["tests"]["steps"] == [[0, 3]]
    read = parse_baseline("b.json", written).envs["cpu/x1"]
    summary = read.stored_summary()
    assert summary is not None
    assert summary.steps == {0: 3}
    for steps in ([[2, 3]], [[0, 9]]):  # no third test; not nine runs
        written["envs"]["cpu/x1"]["summary"]["tests"]["steps"] = steps
        assert parse_baseline("b.json", written).envs["cpu/x1"].stored_summary() is None
    del written["envs"]["cpu/x1"]["summary"]["tests"]["steps"]  # as 0.4.0 wrote it
    older = parse_baseline("b.json", written).envs["cpu/x1"].stored_summary()
    assert older is not None
    assert older.steps is None


def test_a_summary_written_without_the_centre_is_derived_again_with_it() -> None:
    env = env_of({"t.py::a": 0.1, "t.py::b": 0.2}, {"t.py::a": 0.3})
    data = baseline_json(Baseline({"cpu/x1": env}))
    del data["envs"]["cpu/x1"]["summary"]["tests"]["centre"]  # as a 0.2 pre-release wrote
    read = parse_baseline("b.json", data).envs["cpu/x1"]
    assert read.stored_summary() is None
    assert summary_of(read) == summary_of(env)
    assert baseline_json(Baseline({"cpu/x1": read}))["envs"]["cpu/x1"]["summary"]["tests"]["centre"]


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ([], "envs['cpu/x1'].summary: expected an object, got list"),
        ({"runs": 1, "tests": {"centre": {}}}, "summary.tests.centre: expected a list of"),
        ({"runs": 1, "tests": {"median": ["x"]}}, "summary.tests.median: expected a list of"),
        ({"runs": 1, "speeds": [None]}, "summary.speeds: expected a list of numbers"),
        ({"runs": -1}, "summary.runs: "),
        ({"runs": 1, "modules": {"peak": {}}}, "summary.modules.peak: expected a list of"),
        ({"runs": 1, "tests": {"steps": {}}}, "summary.tests.steps: expected a list of [row,"),
        ({"runs": 1, "tests": {"steps": [[0]]}}, "summary.tests.steps: expected a list of [row,"),
        ({"runs": 1, "tests": {"steps": [[0, 0]]}}, "summary.tests.steps: expected a list of"),
        ({"runs": 1, "tests": {"steps": [[-1, 2]]}}, "summary.tests.steps: expected a list of"),
        ({"runs": 1, "tests": {"steps": [[0, True]]}}, "summary.tests.steps: expected a list of"),
        ({"runs": 1, "tests": {"steps": [[0, 2], [0, 3]]}}, "summary.tests.steps: a row is listed"),
    ],
)
def test_a_malformed_summary_is_named_by_its_field(summary: Any, message: str) -> None:
    data = bad_run([0.1, None])
    data["envs"]["cpu/x1"]["summary"] = summary
    with pytest.raises(InputError) as raised:
        parse_baseline("b.json", data)
    assert str(raised.value).startswith("b.json: ")
    assert message in str(raised.value)
