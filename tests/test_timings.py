"""The pieces a run's timings are made of, as pure functions: outcomes from phases,
whole groups, the first test of each process, pauses taken out, the run's layout, and
commit and branch from CI variables or git."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_accel import outcomes
from pytest_accel.outcomes import OUTCOME_RANK, phase_outcome
from pytest_accel.perf.collector import ResultsCollector
from pytest_accel.perf.model.table import TimingTable
from pytest_accel.perf.model.timings import (
    RunIdentity,
    RunTimings,
    first_per_process,
    layout_of,
    whole_groups,
    without_pauses,
)
from pytest_accel.vcs import vcs_info
from tests.configs import parsed


@pytest.mark.parametrize(
    ("when", "outcome", "wasxfail", "expected"),
    [
        ("call", "passed", False, "passed"),
        ("setup", "passed", False, "passed"),
        ("call", "failed", False, "failed"),
        ("setup", "failed", False, "error"),
        ("teardown", "failed", False, "error"),
        ("call", "rerun", False, "failed"),
        ("setup", "rerun", False, "error"),
        ("call", "skipped", False, "skipped"),
        ("setup", "skipped", False, "skipped"),
        ("call", "skipped", True, "xfailed"),
        ("call", "passed", True, "xpassed"),
        ("setup", "passed", True, "passed"),
        ("???", "failed", False, "crashed"),
    ],
)
def test_each_phase_counts_toward_its_tests_outcome_as_pytest_counts_it(
    when: str, outcome: str, wasxfail: bool, expected: str
) -> None:
    assert phase_outcome(when, outcome, wasxfail) == expected


def test_a_failed_call_outranks_the_teardown_error_after_it() -> None:
    assert OUTCOME_RANK["failed"] > OUTCOME_RANK["error"] > OUTCOME_RANK["skipped"]
    assert OUTCOME_RANK["crashed"] > OUTCOME_RANK["failed"]


def test_an_id_that_is_not_utf8_is_written_with_its_bytes_escaped() -> None:
    assert outcomes.test_id("t.py::test") == "t.py::test"
    assert outcomes.test_id("t_é.py::test") == "t_é.py::test"
    undecodable = b"test_\xff.py::t".decode("utf-8", "surrogateescape")
    assert outcomes.test_id(undecodable) == "test_\\xff.py::t"


def test_rows_made_together_are_the_rows_made_one_by_one() -> None:
    """``add_rows`` (a session's tests at once) fills every column as ``row`` does, and
    each test's place is read from its first report when asked."""
    undecodable = b"test_\xff.py".decode("utf-8", "surrogateescape")
    tests = [
        ("t.py::C::test_a", ("t.py", 4, "C.test_a"), ("t.py::C", "t.py")),
        ("t.py::test_b", ("t.py", None, "test_b"), None),  # not collected here
        ("test_\\xff.py::test_c", (undecodable, 0, "test_c"), (None, "test_\\xff.py")),
    ]
    firsts = [SimpleNamespace(location=location) for _, location, _ in tests]
    parents = {nodeid: found for nodeid, _, found in tests if found is not None}
    together, one_by_one = TimingTable(), TimingTable()
    together.add_rows([t[0] for t in tests], firsts, parents)
    for (nodeid, _, found), first in zip(tests, firsts, strict=True):
        row, new = one_by_one.row(nodeid)
        assert new
        one_by_one.located[row] = first
        if found is not None:
            one_by_one.class_ids[row], one_by_one.module_ids[row] = found
    assert vars(together) == vars(one_by_one)
    assert [together.location(row) for row in range(3)] == [
        ("t.py", 5),
        ("t.py", None),
        ("test_\\xff.py", 1),
    ]
    assert together.class_ids == ["t.py::C", None, None]
    assert together.row("t.py::test_b") == (1, False)
    assert together.row("t.py::test_d") == (3, True)
    assert together.location(3) is None  # no report of it yet


def table_facts(table: TimingTable) -> dict[str, Any]:
    """A table's columns, each row's first report as where its test is defined."""
    facts = vars(table).copy()
    facts["located"] = [table.location(row) for row in range(len(table.nodeids))]
    return facts


_AT_FIRST_LINE = SimpleNamespace(location=("t.py", 0, "t"))


def test_two_ids_written_alike_share_one_row_as_they_always_did(
    pytester: pytest.Pytester,
) -> None:
    """A file named with byte 0xff and one named with the text '\\xff' are written
    alike; the bulk path steps aside and their reports fold into one row, as before."""
    collector = ResultsCollector(parsed(pytester))
    undecodable = b"t_\xff.py::a".decode("utf-8", "surrogateescape")
    phases = []
    for start, nodeid in ((1.0, undecodable), (2.0, "t_\\xff.py::a"), (3.0, "t.py::b")):
        report = pytest.TestReport(
            nodeid, ("t.py", 0, "a"), {}, "passed", None, "call", [], 0.5, start, start + 0.5
        )
        phases.append(report)
    collector._fold(phases)
    table = collector.table
    assert table.nodeids == ["t_\\xff.py::a", "t.py::b"]
    assert table.calls == [1.0, 0.5]


def test_a_session_with_two_ids_written_alike_folds_them_in_order_into_one_row(
    pytester: pytest.Pytester,
) -> None:
    """``session_table`` steps aside from its columns where two ids are written alike,
    and folds every report in order: the one row the fold one by one gives."""
    undecodable = b"t_\xff.py::a".decode("utf-8", "surrogateescape")
    stats: dict[str, list[Any]] = {}
    for start, nodeid in ((1.0, undecodable), (5.0, "t_\\xff.py::a"), (9.0, "t.py::b")):
        for offset, when in enumerate(("setup", "call", "teardown")):
            report = phase(nodeid, when, start + offset)
            stats.setdefault("passed" if when == "call" else "", []).append(report)
    collector = ResultsCollector(parsed(pytester))
    collector.stats = stats
    table = collector.session_table()
    assert table.nodeids == ["t_\\xff.py::a", "t.py::b"]
    assert [len(attempts) for attempts in table.earlier.values()] == [1]  # one row, rerun
    in_order = ResultsCollector(parsed(pytester))
    in_order._fold(sorted((r for g in stats.values() for r in g), key=lambda r: r.start))
    assert table_facts(table) == table_facts(in_order.table)


def test_a_group_runs_whole_unless_a_test_failed_warmed_up_or_was_deselected() -> None:
    groups = whole_groups(
        column=["a", "a", "b", None, "c", "d"],
        outcomes=["passed", "passed", "failed", "passed", "passed", "passed"],
        warmup=[False, False, False, False, True, False],
        totals=[1.0, 2.0, 0.5, 9.0, 0.1, 0.2],
        partial=frozenset({"d"}),
    )
    assert groups.ids == ["a", "b", "c", "d"]
    assert groups.total == [3.0, 0.5, 0.1, 0.2]
    assert groups.whole == [True, False, False, False]


def _groups_test_by_test(
    column: list[str | None], outcomes: list[str], warmup: list[bool], totals: list[float]
) -> tuple[list[str], list[float], list[bool]]:
    """The reference: a step per test, each test's total added to its group's in turn."""
    ids: list[str] = []
    total: list[float] = []
    whole: list[bool] = []
    for group, outcome, warm, seconds in zip(column, outcomes, warmup, totals, strict=True):
        if group is None:
            continue
        if group not in ids:
            ids.append(group)
            total.append(0.0)
            whole.append(True)
        at = ids.index(group)
        total[at] += seconds
        whole[at] = whole[at] and outcome not in ("failed", "error", "crashed") and not warm
    return ids, total, whole


@pytest.mark.parametrize("seed", range(6))
def test_groups_added_run_by_run_are_the_groups_added_test_by_test(seed: int) -> None:
    """Runs of a group's tests, a group coming back later (xdist interleaves them), tests
    of no group: the same totals to the last bit, and the same whole groups."""
    import random

    rng = random.Random(seed)
    size = 400
    column = [rng.choice(["a", "b", "c", None]) if seed % 2 else None for _ in range(size)]
    for at in range(0, size, rng.randint(5, 40)):  # runs of a group
        column[at : at + rng.randint(1, 30)] = [rng.choice(["a", "b", "d", "e", None])] * 30
    column = column[:size]
    outcomes = [rng.choice(["passed"] * 30 + ["failed", "skipped"]) for _ in range(size)]
    warmup = [at == rng.randint(0, size) for at in range(size)]
    totals = [rng.random() / 7 for _ in range(size)]
    groups = whole_groups(column, outcomes, warmup, totals)
    assert (groups.ids, groups.total, groups.whole) == _groups_test_by_test(
        column, outcomes, warmup, totals
    )
    table = TimingTable()
    table.add_rows([f"t.py::{n}" for n in range(size)], [_AT_FIRST_LINE] * size, {})
    table.class_ids[:] = column
    table.outcomes[:] = outcomes
    table.starts[:] = [0.0 if n % 17 == 0 else 100.0 + rng.random() for n in range(size)]
    table.stops[:] = [start + 1.0 if start else 0.0 for start in table.starts]
    _, written = table.groups(column, warmup, {}, totals)
    for at, group in enumerate(written.ids):
        rows = [n for n in range(size) if column[n] == group]
        assert written.tests[at] == len(rows)
        first = min((table.starts[n] for n in rows if table.starts[n]), default=0.0)
        last = max(table.stops[n] for n in rows)
        span = last - first if first else written.total[at]
        assert written.span[at] == pytest.approx(span, abs=1e-6)


def test_the_first_test_of_each_process_is_the_one_that_started_earliest() -> None:
    workers = ["gw0", "gw1", "gw0", "gw1", None]
    starts = [5.0, 3.0, 4.0, 6.0, 0.0]
    assert first_per_process(workers, starts) == [False, True, True, False, False]


def test_a_serial_run_has_one_first_test() -> None:
    assert first_per_process([None, None, None], [2.0, 1.0, 3.0]) == [False, True, False]


@pytest.mark.parametrize(
    ("workers", "shards", "layout"),
    [
        (0, [], "serial"),
        (4, [], "xdist 4"),
        (0, ["2/3"], "serial, shard 2/3"),
        (2, ["2/2", "1/2", None], "xdist 2, shards 1/2+2/2"),
        (0, ["1/2", "1/2"], "serial, shard 1/2"),
    ],
)
def test_a_runs_layout_says_how_it_spread_its_tests(
    workers: int, shards: list[str | None], layout: str
) -> None:
    assert layout_of(workers, shards) == layout


def timings(call: list[float], cls: list[str | None], module: list[str | None]) -> RunTimings:
    classes = whole_groups(cls, ["passed"] * len(call), [False] * len(call), call)
    modules = whole_groups(module, ["passed"] * len(call), [False] * len(call), call)
    return RunTimings(
        key="cpu/x1",
        identity=RunIdentity(),
        ids=[f"t{i}" for i in range(len(call))],
        outcome=["passed"] * len(call),
        call=call,
        total=call,
        cls=cls,
        module=module,
        warmup=[False] * len(call),
        classes=classes,
        modules=modules,
    )


def test_pauses_come_out_of_the_test_its_class_and_its_module() -> None:
    run = timings([1.0, 0.5, 0.2], ["m::C", "m::C", None], ["m", "m", "n"])
    clean = without_pauses(run, [0.3, 0.0, 0.25])
    assert clean.call == pytest.approx([0.7, 0.5, 0.0])  # never below zero
    assert clean.total == pytest.approx([0.7, 0.5, 0.0])
    assert clean.classes.ids == ["m::C"]
    assert clean.classes.total == pytest.approx([1.2])
    assert clean.classes.whole == [True]
    assert clean.modules.total == pytest.approx([1.2, 0.0])


def test_no_pause_leaves_the_run_as_it_is() -> None:
    run = timings([1.0], [None], ["m"])
    assert without_pauses(run, [0.0]) is run


def test_ci_variables_name_the_commit_and_branch_in_order_of_preference() -> None:
    github = {"GITHUB_SHA": "abc", "GITHUB_REF_NAME": "main", "GITHUB_HEAD_REF": "feature"}
    assert vcs_info(github) == ("abc", "feature")
    assert vcs_info({"GITHUB_SHA": "abc", "GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "main"}) == (
        "abc",
        "main",
    )
    assert vcs_info({"CI_COMMIT_SHA": "def", "CI_COMMIT_REF_NAME": "mr"}) == ("def", "mr")
    assert vcs_info({"BUILDKITE_COMMIT": "1", "BUILDKITE_BRANCH": "b"}) == ("1", "b")
    assert vcs_info({"CIRCLE_SHA1": "2"}) == ("2", None)


def test_without_ci_variables_git_is_asked(tmp_path: Path) -> None:
    assert vcs_info({}, cwd=str(tmp_path)) == (None, None)  # not a repository
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(tmp_path)], check=True)
    for setting in (("user.email", "t@example.com"), ("user.name", "t")):
        subprocess.run(["git", "-C", str(tmp_path), "config", *setting], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"], check=True
    )
    commit, branch = vcs_info({}, cwd=str(tmp_path))
    assert commit is not None
    assert len(commit) == 40
    assert branch == "trunk"


def test_a_table_folds_phases_into_one_attempt_and_a_new_setup_into_the_next() -> None:
    table = TimingTable()
    row, new = table.row("t.py::a")
    assert new
    assert table.row("t.py::a") == (row, False)
    table.add(row, "setup", "passed", 0.1, start=1.0, stop=1.1)
    table.add(row, "call", "rerun", 0.2, start=1.1, stop=1.3)
    table.add(row, "setup", "passed", 0.1, start=2.0, stop=2.1)  # the rerun begins
    table.add(row, "call", "passed", 0.3, start=2.1, stop=2.4)
    table.add(row, "teardown", "passed", 0.05, start=2.4, stop=2.45)
    assert table.attempts(row) == [
        ("failed", 0.1, 0.2, 0.0),
        ("passed", 0.1, 0.3, 0.05),
    ]
    assert table.starts[row] == 1.0
    assert table.stops[row] == 2.45
    assert table.total(row) == pytest.approx(0.45)
    assert table.attempts_json() == {
        "t.py::a": [
            {"outcome": "failed", "setup": 0.1, "call": 0.2, "teardown": 0.0},
            {"outcome": "passed", "setup": 0.1, "call": 0.3, "teardown": 0.05},
        ]
    }


def phase(nodeid: str, when: Any, start: float, outcome: Any = "passed") -> pytest.TestReport:
    """A report of 0.1 s; start 0: none (a crashed worker's report)."""
    stop = start + 0.1 if start else 0.0
    return pytest.TestReport(
        nodeid, ("t.py", 0, "a"), {}, outcome, None, when, [], 0.1, start, stop
    )


@pytest.mark.parametrize("cached", [True, False], ids=["id-text-kept", "id-text-not-kept"])
def test_reports_are_gathered_by_their_node_id_however_pytest_keeps_it(cached: bool) -> None:
    """The gathering reads each report's id from what pytest keeps of it (pytest 8: the
    text; pytest 9: its NodeId's text, cached once read), and through the ``nodeid``
    property where nothing is kept: every report under its own test's id, either way."""
    from pytest_accel.perf.collector import gather_reports

    reports = [
        phase(f"t.py::T::test_{name}[x-1]", when, 1.0 + n)
        for n, name in enumerate("ab")
        for when in ("setup", "call", "teardown")
    ]
    structured = [vars(report).get("_id") for report in reports]
    if not cached:
        if structured[0] is None:
            pytest.skip("this pytest keeps the id's text on the report itself")
        for node_id in structured:
            object.__setattr__(node_id, "_str_cache", None)
    gathered = gather_reports({"passed": reports[1::3], "": reports[0::3] + reports[2::3]})
    for by_id, when in zip(gathered.phases, ("setup", "call", "teardown"), strict=True):
        assert list(by_id) == ["t.py::T::test_a[x-1]", "t.py::T::test_b[x-1]"]
        assert {r.when for r in by_id.values()} == {when}
        assert all(r.nodeid == nodeid for nodeid, r in by_id.items())
    assert gathered.others == []
    assert gathered.slow == set()


def test_phases_at_one_clock_reading_sort_in_phase_order_and_crash_reports_go_last() -> None:
    from pytest_accel.perf.collector import _chronological

    reports = [
        phase("t.py::b", "???", 0.0, "failed"),  # xdist's report of a crashed worker
        phase("t.py::a", "teardown", 5.0),
        phase("t.py::a", "call", 5.0),
        phase("t.py::b", "setup", 6.0),
        phase("t.py::a", "setup", 5.0),
    ]
    assert _chronological(reports) == [5.0, 5.0, 5.0, 6.0]  # the starts there are
    assert [(r.nodeid, r.when) for r in reports] == [
        ("t.py::a", "setup"),
        ("t.py::a", "call"),
        ("t.py::a", "teardown"),
        ("t.py::b", "setup"),
        ("t.py::b", "???"),
    ]


def test_a_report_another_plugin_added_to_folds_as_a_plain_one(pytester: pytest.Pytester) -> None:
    """The plain path reads a report's fields directly; one with an attribute more (here
    pytest-html's ``extras``) takes the long way, to the same table."""
    tables = []
    for extra in (False, True):
        collector = ResultsCollector(parsed(pytester))
        reports = [
            phase(f"t.py::{name}", when, 10.0 * (n + 1) + k)
            for n, name in enumerate("ab")
            for k, when in enumerate(("setup", "call", "teardown"))
        ]
        if extra:
            for report in reports:
                report.extras = []  # type: ignore[attr-defined]
        collector._fold(reports)
        tables.append(table_facts(collector.table))
    assert tables[0] == tables[1]
    assert tables[0]["calls"] == [0.1, 0.1]
    assert tables[0]["stops"] == [12.1, 22.1]


PLAIN = set(vars(phase("t.py::a", "call", 1.0)))  # what pytest puts in a report


def test_a_report_of_a_real_run_with_nothing_attached_is_told_by_its_size(
    pytester: pytest.Pytester,
) -> None:
    """The gathering tells a report with pytest's own fields alone by their number: each
    passed phase of a real run has exactly that many, and one field more (an xpass's
    ``wasxfail``) is another number."""
    from pytest_accel.perf.collector import _BARE_REPORT_SIZE

    pytester.makepyfile(
        """
        import pytest

        def test_plain():
            pass

        @pytest.mark.xfail(strict=False)
        def test_xpass():
            pass
        """
    )
    recorder = pytester.inline_run("-p", "no:randomly")
    reports = recorder.getreports("pytest_runtest_logreport")
    sizes = {(r.nodeid.split("::")[1], r.when): len(vars(r)) for r in reports}
    assert set(sizes.values()) == {_BARE_REPORT_SIZE, _BARE_REPORT_SIZE + 1}
    assert sizes[("test_xpass", "call")] == _BARE_REPORT_SIZE + 1
    assert sizes[("test_plain", "call")] == _BARE_REPORT_SIZE == len(PLAIN)


@pytest.mark.parametrize("seed", range(6))
def test_the_fold_of_plain_phases_is_the_fold_report_by_report(
    pytester: pytest.Pytester, seed: int
) -> None:
    """``_fold`` takes passed phases with nothing attached the short way; random runs of
    reruns, failures, skips, xfails, CPU waits, compile seconds, attached fields and crashed
    workers fold
    to the table ``add_report`` builds one report at a time."""
    import random

    from pytest_accel.outcomes import MEASURES_ATTR, QUARANTINED_ATTR

    rng = random.Random(seed)
    reports: list[pytest.TestReport] = []
    clock = 1.0
    for test in range(40):
        nodeid = f"t.py::test_{test % 30}"  # a third of them run twice (a rerun's way)
        for when in rng.choice(
            [("setup", "call", "teardown")] * 4 + [("setup", "call"), ("setup",), ("???",)]
        ):
            outcome = rng.choice(["passed"] * 6 + ["failed", "skipped", "rerun"])
            clock += rng.choice([0.0, 0.25])  # two phases at one clock reading, at times
            report = phase(nodeid, when, 0.0 if when == "???" else clock, outcome)
            report.duration = rng.random()
            if when == "call" and rng.random() < 0.7:
                measured = {"cpu_wait": rng.random() / 10}
                if rng.random() < 0.3:  # a figure the short way does not fold
                    measured["compile_seconds"] = rng.random() / 20
                setattr(report, MEASURES_ATTR, measured)
            if rng.random() < 0.1:
                report.wasxfail = "reason"
            if rng.random() < 0.05:
                setattr(report, QUARANTINED_ATTR, "failed")
            reports.append(report)
    plain = [
        r
        for r in reports
        if r.outcome == "passed"
        and r.start
        and set(vars(r)) <= PLAIN | {MEASURES_ATTR}
        and set(getattr(r, MEASURES_ATTR, {})) <= {"cpu_wait"}
    ]
    for run in (reports, plain):  # the mix, and phases that all go the short way
        folded = ResultsCollector(parsed(pytester))
        folded._fold(list(run))
        one_by_one = ResultsCollector(parsed(pytester))
        rows = one_by_one._rows([r.nodeid for r in run], run)
        for report in run:
            one_by_one.add_report(report, rows[report.nodeid])
        assert table_facts(folded.table) == table_facts(one_by_one.table)
        assert folded.table.waits_measured
        assert len(folded.table.earlier) >= 2  # reruns and repeated ids started new attempts


def _category(report: pytest.TestReport) -> str:
    """The terminal reporter's category of ``report`` (``pytest_report_teststatus``)."""
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    if report.passed:
        return "passed" if report.when == "call" else ""
    if report.outcome == "failed" and report.when != "call":
        return "error"
    return report.outcome


def _random_session(rng: Any, tests: int) -> list[pytest.TestReport]:
    """A session's reports in the order they were made: most tests pass once with nothing
    attached; others fail, skip, xfail, rerun, run twice under one id, crash a worker,
    stop mid-test, report subtests, or carry a meter's figures, quarantine or a plugin's
    field."""
    from pytest_accel.outcomes import MEASURES_ATTR, QUARANTINED_ATTR

    reports: list[pytest.TestReport] = []
    clock = 1.0
    for test in range(tests):
        nodeid = f"t.py::test_{test % (tests - 5)}"  # the last five ids run again
        clock += 1.0  # every test after the one before it
        odd = rng.random() < 0.3
        whens = ("setup", "call", "teardown")
        if odd:
            whens = rng.choice([whens] * 4 + [("setup", "call"), ("setup",), ("???",)])
        for when in whens:
            outcome = "passed"
            if odd and rng.random() < 0.4:
                outcome = rng.choice(["failed", "skipped", "rerun"])
            clock += rng.choice([0.0, 0.25])  # two phases at one clock reading, at times
            report = phase(nodeid, when, 0.0 if when == "???" else clock, outcome)
            report.duration = rng.random()
            if when == "call" and rng.random() < 0.7:
                measured = {"cpu_wait": rng.random() / 10}
                if odd and rng.random() < 0.3:  # a figure the columns do not fold
                    measured["compile_seconds"] = rng.random() / 20
                setattr(report, MEASURES_ATTR, measured)
            if odd and rng.random() < 0.1:
                report.wasxfail = "reason"
            if odd and rng.random() < 0.05:
                setattr(report, QUARANTINED_ATTR, "failed")
            if odd and rng.random() < 0.05:
                report.extras = []  # type: ignore[attr-defined]
            reports.append(report)
            if when == "call" and odd and rng.random() < 0.2:
                subtest = phase(nodeid, "call", clock, rng.choice(["passed", "failed"]))
                subtest.context = "i=1"  # type: ignore[attr-defined]
                reports.insert(-1, subtest)  # reported while the call ran
    return reports


@pytest.mark.parametrize("seed", range(8))
def test_a_sessions_fold_from_its_phases_is_the_fold_of_its_reports_in_order(
    pytester: pytest.Pytester, seed: int
) -> None:
    """``session_table`` folds the tests that passed once with nothing attached column
    by column from the terminal's categories, and the rest report by report: random
    sessions give the table that folding every report in order gives (``_fold``), rows
    in the order the tests started, whether the session was interrupted or not, with
    full collections placed in the phases they started in, and whatever the order the
    reports came in."""
    import random

    from pytest_accel.outcomes import is_subtest
    from pytest_accel.perf.collector import _chronological

    rng = random.Random(seed)
    reports = _random_session(rng, 300)
    stats: dict[str, list[Any]] = {"deselected": [object()]}  # not reports: left alone
    for report in reports:
        stats.setdefault(_category(report), []).append(report)
    stats["warnings"] = [SimpleNamespace(message="a warning", nodeid="t.py::test_0")]
    config = parsed(pytester)
    # Full collections, some in a phase, some as one began, some between two.
    timed = [r for r in reports if r.start]
    pauses = sorted(
        [(rng.choice(timed).start + 0.05, rng.random() / 50) for _ in range(20)]
        + [(rng.choice(timed).start, rng.random() / 50) for _ in range(10)]  # as one began
        + [(rng.uniform(1.0, timed[-1].stop), rng.random() / 50) for _ in range(10)]
    )
    # As the reports came (in order, or out of it, as from several workers' clocks).
    shuffled = {category: rng.sample(group, len(group)) for category, group in stats.items()}
    for interrupted, paused, arrived in (
        (False, False, stats),
        (True, False, stats),
        (False, True, stats),
        (False, False, shuffled),
    ):
        stats = arrived
        folded = ResultsCollector(config)
        folded.stats = stats
        folded.pauses = {None: pauses} if paused else {}
        table = folded.session_table(interrupted)
        in_order = ResultsCollector(config)
        gathered = [r for g in stats.values() for r in g if isinstance(r, pytest.TestReport)]
        ordered = [r for r in gathered if not is_subtest(r)]
        starts = _chronological(ordered)  # crash reports last, as the terminal keeps them
        rows = in_order._fold(ordered)
        in_order._fold_subtests([r for r in gathered if is_subtest(r)], rows)
        if paused:
            in_order.pauses = {None: pauses}
            in_order._place_pauses(ordered, starts, rows)
            assert any(in_order.table.pauses)
        if interrupted:
            in_order.table.mark_interrupted()
        assert table_facts(table) == table_facts(in_order.table)
        assert table.earlier  # reruns folded
        assert table.waits_measured
        assert {"failed", "skipped", "crashed", "interrupted"} & set(table.outcomes)
