"""A run's flaky findings as pure functions: the letters and attempts read from the
terminal reporter's categories (with stand-in reports), then one status per test with
the history's verdict beside it, and the rerun filters.  (Real runs are in
test_flaky.py and test_flaky_ci.py.)"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from pytest_accel.flaky.findings import Findings, build_findings, outcomes_from_stats
from pytest_accel.flaky.history import History, KeyOutcomes
from pytest_accel.flaky.options import RerunPolicy
from pytest_accel.flaky.quarantine import Entry
from pytest_accel.outcomes import NEW_RUNS_ATTR


@dataclass
class Report:
    """What the findings read of a pytest report."""

    nodeid: str
    when: str = "call"
    start: float = 0.0


def with_attr(report: Report, name: str, value: object) -> Report:
    setattr(report, name, value)
    return report


def test_passing_calls_are_p_and_nothing_more_is_kept() -> None:
    run = outcomes_from_stats({"passed": [Report("t.py::a"), Report("t.py::b")], "": [Report("x")]})
    assert run.letters == {"t.py::a": "P", "t.py::b": "P"}
    assert run.attempts == {}
    assert run.first_attempt_failures == 0


def test_a_passing_test_from_a_file_name_that_is_not_utf8_is_keyed_by_its_escaped_id() -> None:
    run = outcomes_from_stats({"passed": [Report("t.py::a"), Report("t_\udcff.py::b")]})
    assert run.letters == {"t.py::a": "P", "t_\\xff.py::b": "P"}


def test_new_runs_are_read_only_when_new_tests_were_run_several_times() -> None:
    stats = {"passed": [with_attr(Report("t.py::a"), NEW_RUNS_ATTR, 3)]}
    assert outcomes_from_stats(stats).new_runs == {"t.py::a": 3}
    assert outcomes_from_stats(stats, new_runs=False).new_runs == {}


def test_a_failure_is_f_with_its_phase_and_a_teardown_error_after_it_counts_once() -> None:
    run = outcomes_from_stats(
        {
            "failed": [Report("t.py::a")],
            "error": [Report("t.py::a", "teardown"), Report("t.py::b", "setup")],
        }
    )
    assert run.letters == {"t.py::a": "F", "t.py::b": "F"}
    assert run.attempts == {"t.py::a": ["failed"], "t.py::b": ["error"]}
    assert run.first_attempt_failures == 2


def test_a_collection_error_is_not_a_test() -> None:
    run = outcomes_from_stats({"error": [Report("t.py", "collect")]})
    assert run.letters == {}


def test_reruns_then_a_pass_are_flaky_with_every_attempt_in_order() -> None:
    run = outcomes_from_stats(
        {
            "rerun": [Report("t.py::a", start=2.0), Report("t.py::a", "setup", start=1.0)],
            "flaky": [Report("t.py::a", start=3.0)],
        }
    )
    assert run.letters == {"t.py::a": "K"}
    assert run.attempts == {"t.py::a": ["error", "failed", "passed"]}


def test_reruns_that_never_pass_end_in_the_final_failure() -> None:
    run = outcomes_from_stats(
        {"rerun": [Report("t.py::a", start=1.0)], "failed": [Report("t.py::a", start=2.0)]}
    )
    assert run.letters == {"t.py::a": "F"}
    assert run.attempts == {"t.py::a": ["failed", "failed"]}


def test_a_quarantined_failure_is_an_f_for_the_history() -> None:
    run = outcomes_from_stats({"quarantined": [Report("t.py::q")]})
    assert run.letters == {"t.py::q": "F"}


def test_a_new_test_run_several_times_says_how_many() -> None:
    report = with_attr(Report("t.py::new"), NEW_RUNS_ATTR, 3)
    run = outcomes_from_stats({"passed": [report]})
    assert run.new_runs == {"t.py::new": 3}


def findings_of(stats: dict[str, list[Report]], **kwargs: object) -> Findings:
    arguments: dict[str, object] = {
        "key": "cpu/x1",
        "platform": "cpu",
        "run": outcomes_from_stats(stats),
        "quarantined": {},
        "messages": {},
        "stale": [],
        "expired": [],
        "history": None,
        "max_pct": None,
    }
    arguments.update(kwargs)
    return build_findings(**arguments)  # type: ignore[arg-type]


def test_each_test_gets_one_status() -> None:
    entry = Entry("t.py::q", reason="known")
    found = findings_of(
        {
            "passed": [Report("t.py::ok")],
            "rerun": [Report("t.py::k", start=1.0)],
            "flaky": [Report("t.py::k", start=2.0)],
            "failed": [Report("t.py::f")],
            "quarantined": [Report("t.py::q")],
        },
        quarantined={"t.py::q": entry},
        messages={"t.py::q": "boom"},
    )
    assert found.flaky == [("t.py::k", ["failed", "passed"])]
    assert found.failed == ["t.py::f"]
    [quarantined] = found.quarantined
    assert (quarantined.test, quarantined.outcome, quarantined.message) == (
        "t.py::q",
        "failed",
        "boom",
    )


def history_with(letters: dict[str, str]) -> History:
    return History(envs={"cpu/x1": KeyOutcomes(platform="cpu", runs=[{}] * 20, tests=letters)})


def test_a_quarantined_test_that_passed_is_a_candidate_unless_the_history_says_keep() -> None:
    entries = {"t.py::calm": Entry("t.py::calm"), "t.py::shaky": Entry("t.py::shaky")}
    found = findings_of(
        {"passed": [Report("t.py::calm"), Report("t.py::shaky")]},
        quarantined=entries,
        history=history_with({"t.py::calm": "P" * 20, "t.py::shaky": "PFPPPFPPPFPPPPPPPPPP"}),
    )
    assert [q.test for q in found.candidates] == ["t.py::calm"]
    [(kept, verdict)] = found.kept
    assert kept.test == "t.py::shaky"
    assert verdict.status == "flaky"
    assert found.across_runs == []  # told once, as kept


def test_the_history_is_beside_a_flaky_test_and_its_own_line_for_a_failed_one() -> None:
    found = findings_of(
        {
            "rerun": [Report("t.py::k", start=1.0)],
            "flaky": [Report("t.py::k", start=2.0)],
            "failed": [Report("t.py::f")],
        },
        history=history_with({"t.py::k": "PKPPPKPPPKPPPPPPPPPP", "t.py::f": "F" * 20}),
    )
    assert set(found.context) == {"t.py::k", "t.py::f"}
    assert [(v.test, v.status) for v in found.across_runs] == [("t.py::f", "broken")]


def test_one_run_of_history_says_nothing_across_runs() -> None:
    found = findings_of({"failed": [Report("t.py::f")]}, history=history_with({"t.py::f": "F"}))
    assert found.across_runs == []


def test_the_share_counts_flaky_tests_of_this_run_and_across_runs_and_the_limit() -> None:
    found = findings_of(
        {
            "passed": [Report(f"t.py::p{i}") for i in range(18)],
            "rerun": [Report("t.py::k", start=1.0)],
            "flaky": [Report("t.py::k", start=2.0)],
        }
        | {"failed": [Report("t.py::f")]},
        history=history_with({"t.py::f": "PFPPPFPPPFPPPPPPPPPF"}),
        max_pct=5.0,
    )
    share = found.share
    assert (share.tests, share.flaky) == (20, 2)
    assert share.pct == 10.0
    assert found.over_limit


@pytest.mark.parametrize(
    ("only", "never", "failure", "allowed"),
    [
        ((), (), "AssertionError: x", True),
        (("Timeout",), (), "TimeoutError: slow", True),
        (("Timeout",), (), "AssertionError: x", False),
        ((), ("Assertion",), "AssertionError: x", False),
        (("Error",), ("Value",), "ValueError: x", False),
        (("Error",), ("Value",), "OSError: x", True),
    ],
)
def test_rerun_filters_match_the_exception_type_and_message(
    only: tuple[str, ...], never: tuple[str, ...], failure: str, allowed: bool
) -> None:
    policy = RerunPolicy(
        reruns=2,
        only=tuple(re.compile(p) for p in only),
        never=tuple(re.compile(p) for p in never),
    )
    assert policy.allows(failure) is allowed
