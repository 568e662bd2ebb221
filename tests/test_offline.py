"""The timing feature from files alone, as the command line tool uses it: records
folded into a baseline in time order, a record compared with it, a change accepted,
expected durations read for sharding, and version 1 files upgraded in place.  The
records come from the plugin's own encoder (``bench/synthetic.py``)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from pytest_accel.cli import main
from pytest_accel.files import InputError
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.formats.baseline import load_baseline
from pytest_accel.perf.model import columns
from pytest_accel.perf.offline import (
    accept_changes,
    compare_files,
    durations_file,
    fold_records,
    upgrade_file,
)


def write_record(
    directory: Path, name: str, calls: dict[str, float], started: float, key: str = "cpu/x1"
) -> str:
    data = synthetic.record(calls, key=key, started=synthetic.STARTED + started)
    data["run"]["commit"] = name
    path = directory / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


def calls(a: float, run: int = 0) -> dict[str, float]:
    wobble = 1 + 0.01 * ((run * 3) % 5 - 2)  # real timings are never exactly equal
    return {"t.py::test_a": a * wobble, "t.py::test_b": 0.2 * wobble, "u.py::test_c": 0.3}


def test_records_are_folded_oldest_first_whatever_order_they_are_given(tmp_path: Path) -> None:
    late = write_record(tmp_path, "late", calls(0.5, 1), started=200.0)
    early = write_record(tmp_path, "early", calls(0.5, 2), started=100.0)
    folded = fold_records([late, early], str(tmp_path / "b.json"), window=20)
    baseline, added = folded.baseline, folded.added
    assert added == 2
    env = baseline.envs["cpu/x1"]
    assert [r.identity.commit for r in env.runs] == ["early", "late"]
    again = load_baseline(tmp_path / "b.json")
    assert [r.identity.commit for r in again.envs["cpu/x1"].runs] == ["early", "late"]


def baseline_of(tmp_path: Path, levels: list[float]) -> str:
    paths = [
        write_record(tmp_path, f"c{n:02d}", calls(a, n), started=60.0 * n)
        for n, a in enumerate(levels)
    ]
    fold_records(paths, str(tmp_path / "b.json"), window=20)
    return str(tmp_path / "b.json")


def test_an_unchanged_record_compares_clean(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 8)
    record = write_record(tmp_path, "now", calls(0.5, 9), started=999.0)
    comparison, _ = compare_files(record, baseline)
    assert comparison.timing.regressions == []
    assert comparison.timing.changes == []
    assert comparison.timing.compared == 3


def test_a_slower_test_is_a_regression(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 8)
    record = write_record(tmp_path, "now", calls(1.5, 9), started=999.0)
    comparison, _ = compare_files(record, baseline)
    assert [f.id for f in comparison.timing.regressions] == ["t.py::test_a"]


def test_a_record_of_other_hardware_finds_no_timings_and_says_which_there_are(
    tmp_path: Path,
) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 3)
    record = write_record(tmp_path, "now", calls(0.5), started=999.0, key="tpu/x8")
    comparison, _ = compare_files(record, baseline)
    assert not comparison.found
    assert comparison.available_keys == ["cpu/x1"]
    assert compare_files(record, baseline, key="cpu/x1")[0].found


def test_accepting_a_change_makes_the_new_level_the_baseline(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 8 + [1.0] * 3)
    accepted = accept_changes(baseline, ["t.py::test_a"], Rule())
    # The module that holds it changed with it: the same cause, accepted together.
    assert [(c.kind, c.id) for c in accepted] == [("test", "t.py::test_a"), ("module", "t.py")]
    env = load_baseline(baseline).envs["cpu/x1"]
    _, matrix = env.matrix("tests")
    row = env.ids["tests"].index("t.py::test_a")
    assert all(math.isnan(v) for v in matrix[row, :8])  # the old level's samples are gone
    assert env.accepted[0]["id"] == "t.py::test_a"
    record = write_record(tmp_path, "now", calls(1.0, 12), started=9999.0)
    assert compare_files(record, baseline)[0].timing.changes == []


def test_accepting_where_nothing_changed_accepts_nothing(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 8)
    assert accept_changes(baseline, ["all"], Rule()) == []


def test_accepting_in_a_missing_baseline_names_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        accept_changes(str(tmp_path / "none.json"), ["all"], Rule())


def test_expected_durations_come_from_a_baseline_or_a_record(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5] * 3)
    durations = durations_file(baseline, "cpu/x1")
    assert set(durations.expected) == {"t.py::test_a", "t.py::test_b", "u.py::test_c"}
    assert durations.groups is None
    record = write_record(tmp_path, "one", calls(0.5), started=0.0)
    durations = durations_file(record, None)
    assert durations.expected["u.py::test_c"] == pytest.approx(0.3)
    assert durations.groups is not None
    assert durations.groups["u.py::test_c"] == (None, "u.py")
    assert durations.basis == "wall"


def test_durations_for_a_key_the_baseline_lacks_name_the_keys_it_has(tmp_path: Path) -> None:
    baseline = baseline_of(tmp_path, [0.5])
    with pytest.raises(InputError, match=r"no timings for 'tpu/x8' \(it has: cpu/x1\)"):
        durations_file(baseline, "tpu/x8")


def version_1_baseline() -> dict[str, Any]:
    return {
        "schema": "pytest-accel/baseline",
        "version": 1,
        "window": 20,
        "envs": {
            "cpu/x1": {
                "tests": {"t.py::a": {"samples": [0.1, 0.2]}, "t.py::b": {"samples": [0.3]}},
                "classes": {},
                "modules": {},
            }
        },
    }


def test_a_version_1_baseline_is_upgraded_in_place_with_its_samples(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(version_1_baseline()))
    assert upgrade_file(str(path)) == ("baseline", 1, 4)
    data = json.loads(path.read_text())
    assert data["version"] == 4
    env = load_baseline(path).envs["cpu/x1"]
    assert env.samples("tests") == {"t.py::a": [0.1, 0.2], "t.py::b": [0.3]}
    assert upgrade_file(str(path)) == ("baseline", 4, 4)  # upgrading twice changes nothing


def _as_version_2(column: str) -> Any:
    return columns.as_list(columns.decode(column))  # a list of numbers, null: no sample


def _as_version_3(column: str) -> Any:
    return base64.b64encode(bytes.fromhex(column)).decode()  # development builds of 0.2


@pytest.mark.parametrize(
    ("version", "older", "with_summary"),
    [(2, _as_version_2, False), (3, _as_version_3, True)],
    ids=["version 2, lists without summary", "version 3, base64"],
)
def test_upgrade_rewrites_an_older_baseline_in_hexadecimal_columns_with_its_summary(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    version: int,
    older: Callable[[str], Any],
    with_summary: bool,
) -> None:
    """An older baseline's samples are read as they are, and the upgrade writes the
    same doubles as version 4 writes them, with the summary (derived if it had none)."""
    path = Path(baseline_of(tmp_path, [0.5, 0.25, 0.75]))
    data = json.loads(path.read_text(encoding="utf-8"))
    env = data["envs"]["cpu/x1"]
    summary = env["summary"] if with_summary else env.pop("summary")
    written = [dict(run) for run in env["runs"]]
    for run in env["runs"]:
        for kind in ("tests", "warmup", "classes", "modules"):
            run[kind] = older(run[kind])
    assert env["runs"] != written
    data["version"] = version
    path.write_text(json.dumps(data), encoding="utf-8")
    before = load_baseline(path).envs["cpu/x1"].samples("tests")
    assert before["t.py::test_a"] == [0.49, 0.2525, 0.7425]
    capsys.readouterr()
    assert main(["upgrade", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: baseline version {version} -> 4, with its summary\n"
    again = json.loads(path.read_text(encoding="utf-8"))
    assert again["version"] == 4
    assert again["envs"]["cpu/x1"]["summary"] == summary
    assert again["envs"]["cpu/x1"]["runs"] == written
    assert load_baseline(path).envs["cpu/x1"].samples("tests") == before


def test_upgrade_gives_a_summary_from_0_4_0_the_changes_of_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.4.0 wrote no ``tests.steps``: such a summary is read (its runs searched when
    compared) and written with them, as the runs show them: here test_a's last three."""
    path = Path(baseline_of(tmp_path, [0.5] * 6 + [1.0] * 3))
    data = json.loads(path.read_text(encoding="utf-8"))
    summary = data["envs"]["cpu/x1"]["summary"]
    steps = summary["tests"].pop("steps")
    assert steps == [[0, 3]]  # test_a's row, its three runs at 1.0 s
    path.write_text(json.dumps(data), encoding="utf-8")
    read = load_baseline(path).envs["cpu/x1"].stored_summary()
    assert read is not None  # it fits the runs: read, not derived again
    assert read.steps is None
    assert main(["upgrade", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: baseline version 4 -> 4, with its summary\n"
    again = json.loads(path.read_text(encoding="utf-8"))["envs"]["cpu/x1"]["summary"]
    assert again == {**summary, "tests": {**summary["tests"], "steps": steps}}


def test_a_durations_map_is_not_upgraded(tmp_path: Path) -> None:
    path = tmp_path / ".test_durations"
    path.write_text(json.dumps({"t.py::a": 0.1}))
    with pytest.raises(InputError, match="not a baseline or a record"):
        upgrade_file(str(path))


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_record_already_folded_in_under_a_minority_layout_compares_and_reports(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Serial runs, then a ``-n 2`` run folded in by ``--perf-update-baseline``: the
    ``-n 2`` record is in the baseline and its layout a minority there.  ``compare`` and
    ``report`` on it once raised IndexError (the held run's position was counted among
    the runs of its layout after it was taken out)."""
    pytester.makepyfile(
        test_a="""
        import pytest
        @pytest.mark.parametrize("i", range(6))
        def test_x(i): pass
        class TestC:
            def test_y(self): pass
        """
    )
    for _ in range(3):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline").assert_outcomes(
            passed=7
        )
    pytester.runpytest(
        "-n", "2", "--perf-baseline=b.json", "--perf-update-baseline", "--perf-record=r.json"
    ).assert_outcomes(passed=7)
    record, baseline = str(pytester.path / "r.json"), str(pytester.path / "b.json")
    assert main(["compare", record, "--baseline", baseline]) == 0
    assert "test(s) compared under" in capsys.readouterr().out
    page = str(pytester.path / "r.html")
    assert main(["report", record, "--baseline", baseline, "-o", page]) == 0
    assert Path(page).read_text().startswith("<!DOCTYPE html>")
