"""What the HTML report shows, built as data from records in the plugin's own format
(``bench/synthetic.py``), a baseline folded from them and a flaky history: the run
summaries, the trends of what changed, the slowest tables, the shard balance, the same
tests across hardware keys and the flaky grid.  The page itself, rendered in a browser,
is in test_report.py."""

from __future__ import annotations

from typing import Any

import pytest

from bench import synthetic
from pytest_accel.flaky.history import History, KeyOutcomes
from pytest_accel.perf.formats.baseline import Baseline, EnvHistory, add_run
from pytest_accel.perf.formats.record import check_record, timings
from pytest_accel.report.data import TRENDS, build
from pytest_accel.report.page import render

IDS = ["t.py::test_a", "t.py::test_b", "u.py::C::test_c"]
GROUPS = {
    "t.py::test_a": (None, "t.py"),
    "t.py::test_b": (None, "t.py"),
    "u.py::C::test_c": ("u.py::C", "u.py"),
}


def record(
    calls: dict[str, float],
    *,
    key: str = "cpu/x1",
    started: float = 0.0,
    shard: str | None = None,
    commit: str = "abc123",
    jitter: int = 0,
) -> dict[str, Any]:
    """A record of ``calls``; ``jitter`` (a run number) varies each test by up to 3%, as
    real timings do (a series without any spread shows no change point)."""
    if jitter:
        calls = {
            test: seconds * (1 + 0.01 * ((jitter * 3 + n * 5) % 7 - 3))
            for n, (test, seconds) in enumerate(calls.items())
        }
    groups = {test: GROUPS.get(test, (None, test.split("::")[0])) for test in calls}
    data = synthetic.record(
        calls,
        key=key,
        groups=groups,
        started=synthetic.STARTED + started,
        shard=shard,
        warmup=True,
    )
    data["run"]["commit"] = commit
    return check_record("record.json", data)


def baseline_of(*records: dict[str, Any]) -> Baseline:
    envs: dict[str, EnvHistory] = {}
    for data in records:
        run = timings(data)
        add_run(envs.setdefault(run.key, EnvHistory()), run, window=20)
    return Baseline(envs)


def usual(scale: float = 1.0) -> dict[str, float]:
    return {"t.py::test_first": 0.01, "t.py::test_a": 0.5 * scale, "t.py::test_b": 0.2,
            "u.py::C::test_c": 1.0}  # fmt: skip


def history_runs(count: int = 8) -> list[dict[str, Any]]:
    return [
        record(usual(), started=3600.0 * i, commit=f"c{i:06d}", jitter=i + 1) for i in range(count)
    ]


def test_a_record_alone_gives_its_summary_and_slowest_tables() -> None:
    data = build([("r.json", record(usual()))])
    [run] = data.runs
    assert run.path == "r.json"
    assert run.key == "cpu/x1"
    assert run.commit == "abc123"
    assert run.outcomes == {"passed": 4}
    assert run.comparison is None
    assert [row.id for row in data.tests] == [
        "u.py::C::test_c",
        "t.py::test_a",
        "t.py::test_b",
        "t.py::test_first",
    ]
    assert [row.id for row in data.modules] == ["u.py", "t.py"]
    assert [(row.id, row.detail) for row in data.classes] == [("u.py::C", "1 test(s)")]
    assert data.trends == []
    assert data.shards == []


def test_a_slowdown_over_runs_becomes_a_trend_with_its_change_point() -> None:
    runs = history_runs(8) + [
        record(usual(2.0), started=3600.0 * (8 + i), commit=f"s{i:06d}", jitter=20 + i)
        for i in range(2)
    ]
    now = record(usual(2.0), started=3600.0 * 12, jitter=30)
    data = build([("now.json", now)], baseline_of(*runs))
    [run] = data.runs
    assert run.comparison is not None
    trends = {t.id: t for t in data.trends}
    assert "t.py::test_a" in trends
    trend = trends["t.py::test_a"]
    assert trend.slower
    assert trend.headline.startswith("CHANGED test t.py::test_a: 0.499s -> 1.01s (2.02x)")
    assert trend.headline.endswith("since s000000, 3 runs")
    assert trend.labels[-1] == "this run"
    assert len(trend.seconds) == len(trend.labels) == 11
    assert trend.change_at == 8  # the first run at the new level
    assert trend.seconds[-1] == pytest.approx(1.0, rel=0.04)
    assert data.suite_trend is not None
    assert data.suite_trend.labels[-1] == "this run"


def test_an_unchanged_run_has_no_trends_but_a_suite_chart() -> None:
    data = build([("now.json", record(usual(), started=3600.0 * 9))], baseline_of(*history_runs()))
    assert data.trends == []
    assert data.more_findings == []
    assert data.suite_trend is not None
    assert len(data.suite_trend.seconds) == 9


def test_a_shard_among_whole_runs_has_no_suite_chart_and_is_summed_from_its_tests() -> None:
    """A shard's total is a part of a whole run's: the page neither draws it beside the
    whole runs' totals nor sums it against them, as the comparison does not judge it."""
    shard = {test: seconds for test, seconds in usual().items() if test.startswith("t.py")}
    now = record(shard, started=3600.0 * 9, shard="1/2", jitter=9)
    data = build([("s1.json", now)], baseline_of(*history_runs()))
    assert data.suite_trend is None
    assert data.runs[0].suite_basis.startswith("the same tests' baseline medians")


def test_beyond_the_trend_limit_findings_are_one_line_each() -> None:
    # TRENDS + 3 tests slow down, as many stay as they were: not a slower runner.
    calls = {f"t.py::test_{i:02d}": 0.5 for i in range(2 * (TRENDS + 3))}
    runs = [record(calls, started=3600.0 * i, commit=f"c{i}", jitter=i + 1) for i in range(8)]
    slow = {i: 1.5 if n < TRENDS + 3 else 0.5 for n, i in enumerate(calls)}
    data = build([("now.json", record(slow, started=3600.0 * 9, jitter=9))], baseline_of(*runs))
    assert len(data.trends) == TRENDS
    assert len(data.more_findings) >= 3
    assert all(line.startswith(("REGRESSION", "CHANGED")) for line in data.more_findings)


def test_shard_records_give_the_shard_balance() -> None:
    first = record({"t.py::test_a": 1.0, "t.py::test_b": 1.0}, shard="1/2")
    second = record({"u.py::C::test_c": 3.0}, shard="2/2", started=100.0)
    data = build([("s1.json", first), ("s2.json", second)])
    assert [(s.name, s.tests) for s in data.shards] == [("1/2", 2), ("2/2", 1)]
    assert data.shards[1].seconds == pytest.approx(3.0)


def test_a_merged_record_shows_the_shards_it_came_from() -> None:
    merged = record(usual())
    merged["run"]["merged_from"] = [
        {"path": "a.json", "shard": "1/2", "tests": 2, "seconds": 0.7},
        {"path": "b.json", "shard": None, "tests": 2, "seconds": 1.01},
    ]
    data = build([("merged.json", merged)])
    assert [(s.name, s.tests, s.seconds) for s in data.shards] == [
        ("1/2", 2, 0.7),
        ("b.json", 2, 1.01),
    ]


def test_the_same_tests_on_two_hardware_keys_side_by_side() -> None:
    cpu = [record(usual(), started=i * 60.0) for i in range(3)]
    tpu = [record(usual(0.1), key="tpu/TPU v6 lite/x8", started=i * 60.0) for i in range(3)]
    data = build([], baseline_of(*cpu, *tpu))
    assert data.across_keys == ["cpu/x1", "tpu/TPU v6 lite/x8"]
    rows = dict(data.across)
    assert rows["t.py::test_a"] == [pytest.approx(0.5), pytest.approx(0.05)]
    assert data.across[0][0] == "u.py::C::test_c"  # the slowest first


def test_one_hardware_key_has_no_side_by_side_table() -> None:
    data = build([], baseline_of(*history_runs(2)))
    assert data.across == []


def test_the_flaky_grid_lists_tests_that_ever_failed_most_unstable_first() -> None:
    history = History(
        envs={
            "cpu/x1": KeyOutcomes(
                platform="cpu",
                runs=[{}] * 10,
                tests={
                    "t.py::steady": "P" * 10,
                    "t.py::flips": "PFPFPFPFPF",
                    "t.py::once": "P" * 9 + "K",
                },
            )
        }
    )
    data = build([], history=history)
    assert [(r.test, r.status) for r in data.flaky] == [
        ("t.py::flips", "flaky"),
        ("t.py::once", "ok"),
    ]
    assert data.flaky_runs == {"cpu/x1": 10}


def test_the_page_renders_every_part_and_escapes_ids() -> None:
    runs = history_runs(8)
    now = record({**usual(), "t.py::test_<script>": 0.3}, started=3600.0 * 9)
    history = History(
        envs={"cpu/x1": KeyOutcomes(platform="cpu", runs=[{}] * 4, tests={"t.py::x": "PFPF"})}
    )
    page = render(build([("now.json", now)], baseline_of(*runs), history))
    assert page.startswith("<!DOCTYPE html>")
    assert "<script>alert" not in page
    assert "t.py::test_&lt;script&gt;" in page
    assert "Content-Security-Policy" in page
    for part in ("abc123", "cpu/x1", "u.py::C::test_c", "t.py::x"):
        assert part in page
