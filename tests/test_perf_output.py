"""A comparison as a CI user reads it, from hand-made findings: the lines in the
terminal, the warning text, the annotations and the job-summary table, each exact.
(The same output from real runs is in test_comparison.py and test_github_output.py.)"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_accel.github import Location
from pytest_accel.perf import output
from pytest_accel.perf.model.findings import Change, Comparison, Finding, TimingVerdict
from pytest_accel.perf.model.timings import RunIdentity
from pytest_accel.text import Tone

SLOWER = Finding("test", "t.py::test_a", 0.21, 0.43, 0.43 / 0.21, 20, z=9.5)
FASTER = Finding("test", "t.py::test_b", 1.0, 0.5, 0.5, 12, z=-6.0)
STEP = Change("test", "t.py::test_c", 0.2, 0.4, 3, RunIdentity("4f2c9e1aa0b1c2d3", "main"))
BACK = Change("module", "u.py", 2.0, 1.0, 4, RunIdentity(None, None, "2026-11-20T02:00:00Z"))


def comparison(**fields: Any) -> Comparison:
    """A comparison of 250 tests, ``fields`` set on its timing verdict or on it."""
    timing = {name: fields.pop(name) for name in list(fields) if name in TIMING_FIELDS}
    return Comparison("cpu/x1", TimingVerdict(**{"compared": 250, **timing}), **fields)


TIMING_FIELDS = {f.name for f in dataclasses.fields(TimingVerdict)}


def test_seconds_show_three_significant_digits() -> None:
    assert output.seconds(0.2134) == "0.213s"
    assert output.seconds(1.523) == "1.52s"
    assert output.seconds(12.34) == "12.3s"


def test_a_regression_names_both_times_the_ratio_and_the_evidence() -> None:
    assert output.describe(SLOWER) == (
        "test t.py::test_a: 0.430s vs baseline 0.210s (2.05x, 20 sample(s))"
    )


def test_a_corrected_finding_shows_both_ratios() -> None:
    corrected = Finding("test", "t.py::a", 0.2, 0.5, 2.5, 10, corrected=1.9)
    assert "(2.50x as measured, 1.90x for this runner's speed, 10 sample(s))" in output.describe(
        corrected
    )


def test_a_warm_up_and_the_suite_say_what_they_were_judged_against() -> None:
    warm = Finding("test", "t.py::first", 3.0, 9.0, 3.0, 8, warmup=True)
    assert output.describe(warm).endswith("(3.00x, 8 sample(s), first in its process, as in them)")
    suite = Finding("session", "suite", 100.0, 130.0, 1.3, 250)
    assert output.describe(suite).endswith("(1.30x, over 250 test(s))")


def test_a_change_names_its_levels_and_the_run_it_started_in() -> None:
    assert output.describe_change(STEP) == (
        "test t.py::test_c: 0.2s -> 0.4s (2.00x) since 4f2c9e1aa0b1, 3 runs"
    )
    assert output.describe_change(BACK) == (
        "module u.py: 2s -> 1s (0.50x) since 2026-11-20T02:00:00Z, 4 runs"
    )


def test_a_hostile_id_stays_on_one_line() -> None:
    hostile = Finding("test", "t.py::a[\n::error::x]", 0.1, 0.3, 3.0, 5)
    text = output.describe(hostile)
    assert "\n" not in text
    assert "\\n::error::x" in text


def test_the_alarm_count_is_what_perf_fail_fails_on() -> None:
    assert output.alarm_count(comparison(regressions=[SLOWER])) == "1 regression(s)"
    assert output.alarm_count(comparison(regressions=[SLOWER], changes=[STEP, BACK])) == (
        "1 regression(s) and 1 slowdown change(s)"
    )


def test_the_summary_line_counts_everything_and_says_when_it_fails_the_run() -> None:
    found = comparison(
        regressions=[SLOWER],
        improvements=[FASTER],
        changes=[STEP],
        new=["t.py::n1", "t.py::n2"],
        new_slow=[("t.py::n1", 3.0)],
        missing=["t.py::gone"],
        speed=1.21,
    )
    assert output.summary_line(found, failing=True) == (
        "perf: 1 regression(s), 1 change(s), 1 improvement(s), 2 new (1 slow), 1 missing,"
        " 250 test(s) compared under cpu/x1; this run was 1.21x the baseline overall"
        " -- failing the run (--perf-fail)"
    )
    assert output.summary_line(comparison(), failing=False) == (
        "perf: 0 regression(s), 0 change(s), 0 improvement(s), 0 new, 0 missing,"
        " 250 test(s) compared under cpu/x1"
    )


def test_a_baseline_without_this_hardware_says_which_keys_it_has() -> None:
    found = comparison(found=False, available_keys=["tpu/v5e/x8", "cuda/H100/x2"])
    assert output.missing_env_line(found, "ci/baseline.json") == (
        "perf: ci/baseline.json has no timings for 'cpu/x1'; nothing compared"
        " (it has: tpu/v5e/x8, cuda/H100/x2). Use --accel-key to pick one."
    )
    assert "(it has: none)" in output.missing_env_line(comparison(found=False), "b.json")


def test_terminal_rows_list_every_alarm_most_severe_first_and_cut_the_rest_at_top() -> None:
    """An alarm is never cut (a "... and 1 more regression row(s)" once hid one); the
    worst comes first whatever its kind; each row's tone decides its colour."""
    many = [Finding("test", f"t.py::r{i}", 0.1, 0.1 * (2.5 + i), 2.5 + i, 10) for i in range(5)]
    faster = [Finding("test", f"t.py::f{i}", 1.0, 0.5, 0.5, 12) for i in range(3)]
    rows = output.terminal_rows(
        comparison(
            regressions=many,
            changes=[STEP],
            improvements=faster,
            new_slow=[("t.py::slow_new", 2.5)],
        ),
        top=2,
    )
    assert [row.text for row in rows] == [
        "REGRESSION test t.py::r4: 0.650s vs baseline 0.100s (6.50x, 10 sample(s))",
        "REGRESSION test t.py::r3: 0.550s vs baseline 0.100s (5.50x, 10 sample(s))",
        "REGRESSION test t.py::r2: 0.450s vs baseline 0.100s (4.50x, 10 sample(s))",
        "REGRESSION test t.py::r1: 0.350s vs baseline 0.100s (3.50x, 10 sample(s))",
        "REGRESSION test t.py::r0: 0.250s vs baseline 0.100s (2.50x, 10 sample(s))",
        "CHANGED test t.py::test_c: 0.2s -> 0.4s (2.00x) since 4f2c9e1aa0b1, 3 runs",
        "improved   test t.py::f0: 0.500s vs baseline 1.000s (0.50x, 12 sample(s))",
        "improved   test t.py::f1: 0.500s vs baseline 1.000s (0.50x, 12 sample(s))",
        "... and 1 more improved row(s)",
        "NEW SLOW test t.py::slow_new: 2.5s (no baseline yet)",
    ]
    assert [row.tone for row in rows] == [Tone.ALARM] * 6 + [Tone.OK] * 3 + [Tone.CHANGE]


def test_warm_ups_and_reordered_tests_are_explained_not_listed_one_by_one() -> None:
    rows = output.terminal_rows(
        comparison(
            warmup=["a", "b", "c", "d"],
            layout="xdist 2",
            baseline_layout="serial",
            unconfirmed=["t.py::x"],
        ),
        top=5,
    )
    assert {row.tone for row in rows} == {Tone.NOTE}
    assert [row.text for row in rows] == [
        "not judged: 4 test(s) ran first in their process and paid its warm-up, which no"
        " baseline run saw them pay (a, b, c ...)",
        "order: this run was xdist 2, the baseline's runs serial; 1 test(s) that moved while"
        " their class and module held are not findings (t.py::x)",
        "layout: too few baseline runs laid out as this one (xdist 2; most were serial): tests"
        " judged if their class or module moved too, classes, modules and the suite total not"
        " judged",
    ]


@pytest.mark.parametrize(
    ("change_runs", "note"),
    [
        (
            2,
            "layout: changes over runs judged on the 2 baseline run(s) laid out as this one"
            " (xdist 2): a switch of layout is not a change",
        ),
        (
            0,
            "layout: changes over runs not judged; no baseline run was laid out as this one"
            " (xdist 2), and a switch of layout is not a change",
        ),
    ],
)
def test_changes_over_runs_say_how_many_runs_of_the_layout_they_were_judged_on(
    change_runs: int, note: str
) -> None:
    rows = output.terminal_rows(
        comparison(layout="xdist 2", baseline_layout="serial", change_runs=change_runs), top=5
    )
    assert [row.text for row in rows if row.text.startswith("layout: changes")] == [note]
    assert {row.tone for row in rows} == {Tone.NOTE}


def test_annotations_cover_regressions_and_slowdowns_only_up_to_the_limit() -> None:
    def locate(kind: str, ident: str) -> Location | None:
        return Location(ident.split("::", maxsplit=1)[0], 7) if kind == "test" else None

    found = comparison(regressions=[SLOWER], changes=[STEP, BACK], improvements=[FASTER])
    lines = output.workflow_commands(found, locate)
    assert lines == [
        "::warning file=t.py,line=7,title=perf regression (test)::" + output.describe(SLOWER),
        "::warning file=t.py,line=7,title=perf change (test)::" + output.describe_change(STEP),
    ]
    assert output.workflow_commands(found, locate, limit=1) == lines[:1]


def test_the_job_summary_is_a_table_with_one_row_per_finding() -> None:
    section = output.summary_section(
        comparison(regressions=[SLOWER], changes=[STEP], new_slow=[("t.py::n|ew", 1.5)]),
        failing=False,
    )
    assert section.head[0] == "### pytest-accel performance"
    assert section.head[-2:] == [
        "| | kind | id | baseline (wall, s) | current (wall, s) | ratio | evidence |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    assert section.rows == [
        "| regression | test | t.py::test\\_a | 0.210 | 0.430 | 2.05x | 20 samples |",
        "| change | test | t.py::test\\_c | 0.200 | 0.400 | 2.00x | since 4f2c9e1aa0b1, 3 runs |",
        "| new, slow | test | t.py::n\\|ew | | 1.500 | | no baseline yet |",
    ]


def test_a_clean_comparison_has_no_table() -> None:
    section = output.summary_section(comparison(), failing=False)
    assert section.rows == []
    assert not any(line.startswith("| |") for line in section.head)


def test_the_suite_history_becomes_a_mermaid_chart_in_the_summary() -> None:
    found = comparison(suite_history=[("abc1234", 10.0), ("def5678", 11.0)], run_total=12.5)
    head = output.summary_section(found, failing=False).head
    assert "```mermaid" in head
    assert '    x-axis ["abc1234", "def5678", "this run"]' in head
    assert "    line [10.000, 11.000, 12.500]" in head


def test_a_run_laid_out_unlike_the_baseline_runs_draws_no_suite_chart() -> None:
    """Its total is not judged beside theirs (a shard's is a part of a whole run's), so
    it is not drawn beside them either; the note says why."""
    found = comparison(
        suite_history=[("abc1234", 10.0), ("def5678", 11.0)],
        run_total=5.5,
        layout="shard 1/2",
        baseline_layout="serial",
    )
    head = output.summary_section(found, failing=False).head
    assert not any(line.startswith("```mermaid") for line in head)
    assert any("the suite total not judged" in line for line in head)


@pytest.mark.parametrize("failing", [True, False])
def test_the_markdown_is_the_section_alone(failing: bool) -> None:
    text = output.markdown(comparison(regressions=[SLOWER]), failing=failing)
    assert text.startswith("### pytest-accel performance\n")
    assert ("failing the run" in text) is failing
    assert text.count("| regression |") == 1


def test_which_notes_a_comparison_calls_for_is_data_the_renderer_only_words() -> None:
    from pytest_accel.perf.model import notes
    from pytest_accel.perf.model.findings import MemoryVerdict, RecompileVerdict, RunnerLoad

    judged = comparison(
        interrupted=True,
        runs=2,
        time="execution",
        run_layout="serial",
        left_out_time=1,
        change_runs=0,
        load=RunnerLoad(cpu_wait=3.0, calls_share=0.2, threads_share=0.1),
        recompiles=RecompileVerdict(runs=2),
        device_memory=MemoryVerdict(runs=1, peak=("t.py::a", 2**30)),
        warmup=["t.py::w"],
    )
    found = notes.notes_of(judged)
    assert found == [
        notes.Interrupted(),
        notes.Learning(runs=2, needed=3, key="cpu/x1"),
        notes.Busy(judged.load),
        notes.BasisLeftOut(time="execution", runs=1),
        notes.ChangesOfLayout(layout="serial", runs=0),
        notes.RecompilesNotJudged(layout="serial", runs=2, needed=3),
        notes.DeviceMemory(judged.device_memory, needed=3),
    ]
    assert notes.set_aside_of(judged) == [notes.WarmupNotJudged(("t.py::w",))]
    # Each worded under its topic, as every output shows it.
    assert [note.split(":")[0] for note in output.scope_notes(judged)] == [
        "interrupted",
        "learning",
        "busy runner",
        "time",
        "layout",
        "recompilations",
        "device memory",
    ]
    assert output.scope_notes(judged)[2] == (
        "busy runner: the tests' calls waited 3.0 s for a CPU (20% of their time), left out"
        " of the timings judged; the waits of the threads a test starts are not seen, so the"
        " threshold is widened by 1/(1 - the share waited): 1.25x at 20%"
    )
    # A quiet run on a whole baseline of its layout calls for none.
    assert notes.notes_of(comparison(runs=5, time="wall")) == []


def test_every_kind_of_note_has_its_wording() -> None:
    import re
    import typing

    from pytest_accel.perf.model import notes

    for union, word in ((notes.Note, output.word_note), (notes.SetAside, output.word_set_aside)):
        kinds = typing.get_args(union)
        assert len(kinds) > 2
        words = [word(_example(kind)) for kind in kinds]  # type: ignore[arg-type]
        # None falls through to another kind's wording; each names its topic first.
        assert len(set(words)) == len(kinds), words
        assert [t for t in words if not re.match(r"[a-z][a-z ]*: ", t)] == []


def _example(kind: type) -> object:
    """An instance of a note's class with plain figures in every field."""
    import dataclasses

    from pytest_accel.perf.model.findings import MemoryVerdict, RunnerLoad

    plain: dict[str, object] = {
        "runs": 2,
        "needed": 3,
        "key": "cpu/x1",
        "load": RunnerLoad(1.0, 0.5, 0.6),
        "time": "wall",
        "layout": "xdist 2",
        "usual": "serial",
        "memory": MemoryVerdict(runs=1, peak=("t.py::a", 10)),
        "steps": (STEP,),
        "tests": ("t.py::a", "t.py::b"),
    }
    return kind(**{f.name: plain[f.name] for f in dataclasses.fields(kind)})
