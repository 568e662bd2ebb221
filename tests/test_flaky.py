from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import cli
from pytest_accel.files import InputError
from pytest_accel.flaky.classify import classify
from pytest_accel.flaky.history import load_history
from pytest_accel.flaky.quarantine import load_quarantine
from tests.fakesys import per_test, run_concurrently

# test_flaky fails on its first attempt and passes on its second: the state is a file,
# so it holds across attempts, processes and xdist workers.
TWO_TESTS = """
import pathlib

STATE = pathlib.Path(__file__).with_name("attempts.txt")

def test_flaky():
    attempts = int(STATE.read_text()) if STATE.exists() else 0
    STATE.write_text(str(attempts + 1))
    assert attempts >= 1, "fails the first time"

def test_always_fails():
    assert False, "always"
"""


XDIST = pytest.mark.requires("xdist")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def literal(pattern: str) -> str:
    """An fnmatch pattern whose '[' are literal ('*' stays a wildcard)."""
    return pattern.replace("[", "[[]")


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    """The summary line's counts, this plugin's own (rerun, flaky, quarantined) included."""
    counts = result.parseoutcomes()
    counts.pop("warnings", None)
    return counts


def run_summary(report: dict[str, Any]) -> dict[str, Any]:
    run = report["run"]
    return {
        "flaky": {f["test"].split("::")[-1]: f["attempts"] for f in run["flaky"]},
        "failed": [t.split("::")[-1] for t in run["failed"]],
    }


def test_a_test_that_passes_on_its_second_attempt_is_flaky_and_does_not_fail_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_one=TWO_TESTS.replace("def test_always_fails", "def _unused"))
    result = pytester.runpytest(
        "--flaky-reruns=2", "--flaky-report=report.json", "--perf-record=record.json", "-v"
    )
    assert outcomes(result) == {"rerun": 1, "flaky": 1}
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*test_flaky RERUN*",
            "*test_flaky FLAKY*",
            "FLAKY test_one.py::test_flaky (2 attempts: failed, passed)",
            "flaky: 1 of 1 test(s) (100.00%) on cpu: 1 in this run",
        ]
    )
    assert run_summary(load(pytester.path / "report.json"))["flaky"] == {
        "test_flaky": ["failed", "passed"]
    }
    record = per_test(load(pytester.path / "record.json"))["test_one.py::test_flaky"]
    assert record["outcome"] == "passed"
    assert [a["outcome"] for a in record["attempts"]] == ["failed", "passed"]


def test_without_reruns_the_same_test_fails_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one=TWO_TESTS.replace("def test_always_fails", "def _unused"))
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    assert result.ret == 1


def test_a_test_that_always_fails_gets_three_attempts_and_fails_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    result = pytester.runpytest("--flaky-reruns=2", "--perf-record=record.json")
    assert outcomes(result) == {"failed": 1, "rerun": 3, "flaky": 1}
    assert result.ret == 1
    test = per_test(load(pytester.path / "record.json"))["test_two.py::test_always_fails"]
    assert [a["outcome"] for a in test["attempts"]] == ["failed"] * 3


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_xdist_classifies_the_two_tests_as_a_single_process_does(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    serial = pytester.runpytest("--flaky-reruns=2", "--flaky-report=serial.json")
    (pytester.path / "attempts.txt").unlink()
    parallel = pytester.runpytest_inprocess(
        "-n", "2", "--flaky-reruns=2", "--flaky-report=parallel.json"
    )
    assert outcomes(parallel) == {"failed": 1, "rerun": 3, "flaky": 1}
    assert serial.ret == parallel.ret == 1
    expected = {"flaky": {"test_flaky": ["failed", "passed"]}, "failed": ["test_always_fails"]}
    assert run_summary(load(pytester.path / "serial.json")) == expected
    assert run_summary(load(pytester.path / "parallel.json")) == expected


def test_each_attempt_gets_a_fresh_instance_but_keeps_class_and_module_fixtures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        SETUPS = []
        SEEN = []

        @pytest.fixture(scope="module")
        def shared():
            SETUPS.append("module")
            yield object()
            SETUPS.append("module down")

        @pytest.fixture
        def per_test():
            SETUPS.append("function")
            return object()

        class TestC:
            @classmethod
            def setup_class(cls):
                SETUPS.append("class")

            def test_flaky(self, shared, per_test):
                SEEN.append((self, shared, per_test))
                assert len(SEEN) > 1

            def test_after(self):
                (first, shared1, fn1), (second, shared2, fn2) = SEEN
                assert first is not second and fn1 is not fn2 and shared1 is shared2
                assert SETUPS == ["module", "class", "function", "function"]
        """
    )
    result = pytester.runpytest("--flaky-reruns=1")
    assert outcomes(result) == {"passed": 1, "rerun": 1, "flaky": 1}


def test_a_failing_module_fixture_is_set_up_again_on_the_next_attempt(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        CALLS = []

        @pytest.fixture(scope="module")
        def device():
            CALLS.append(1)
            if len(CALLS) == 1:
                raise RuntimeError("device busy")
            return "ok"

        def test_uses_device(device):
            assert device == "ok"
        """
    )
    result = pytester.runpytest("--flaky-reruns=1")
    assert outcomes(result) == {"rerun": 1, "flaky": 1}
    assert result.ret == 0


def test_teardown_failures_skips_and_xfails_are_never_rerun(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("teardown")

        def test_teardown(broken_teardown):
            pass

        def test_skip():
            pytest.skip("no")

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False
        """
    )
    result = pytester.runpytest("--flaky-reruns=3")
    result.assert_outcomes(passed=1, errors=1, skipped=1, xfailed=1)


@pytest.mark.parametrize(
    "workers",
    [pytest.param([], id="serial"), pytest.param(["-n", "2"], id="xdist", marks=XDIST)],
)
@pytest.mark.processes
def test_junit_xml_keeps_one_testcase_per_test_with_attempts_and_quarantine_properties(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    (pytester.path / "quarantine.txt").write_text("test_two.py::test_always_fails  # JIRA-7\n")
    result = pytester.runpytest_inprocess(
        "--flaky-reruns=2", "--flaky-quarantine=quarantine.txt", "--junitxml=junit.xml", *workers
    )
    assert result.ret == 0
    cases = {str(c.get("name")): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    assert sorted(cases) == ["test_always_fails", "test_flaky"]
    properties = {
        name: {p.get("name"): p.get("value") for p in case.iter("property")}
        for name, case in cases.items()
    }
    assert properties == {
        "test_flaky": {"attempts": "2"},
        "test_always_fails": {"quarantined": "JIRA-7", "attempts": "3"},
    }
    assert cases["test_flaky"].find("failure") is None
    skipped = cases["test_always_fails"].find("skipped")
    assert skipped is not None
    assert "quarantined" in skipped.get("message", "")


def test_pytest_rerunfailures_does_the_reruns_when_it_is_active(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_one=TWO_TESTS.replace("def test_always_fails", "def _unused"))
    result = pytester.runpytest_inprocess(
        "-p", "rerunfailures", "--reruns=1", "--flaky-reruns=3", "--perf-record=record.json"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "FLAKY test_one.py::test_flaky (2 attempts: failed, passed)",
            "pytest-accel: 1 test(s) left to pytest-rerunfailures' reruns",
        ]
    )
    assert (pytester.path / "attempts.txt").read_text() == "2"  # not rerun a second time
    test = per_test(load(pytester.path / "record.json"))["test_one.py::test_flaky"]
    assert [a["outcome"] for a in test["attempts"]] == ["failed", "passed"]


QUARANTINED = """
def test_broken():
    assert False, "boom"

def test_fine():
    pass
"""


def quarantine_file(pytester: pytest.Pytester, **entry: Any) -> None:
    entries = [{"test": "test_q.py::test_broken", "reason": "flaky on CI", **entry}]
    entries.append({"test": "test_q.py::test_fine"})
    (pytester.path / "q.json").write_text(json.dumps({"version": 1, "entries": entries}))


def test_a_quarantined_failure_does_not_fail_the_session_and_is_shown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    quarantine_file(pytester, issue="JIRA-9")
    result = pytester.runpytest("--flaky-quarantine=q.json", "--flaky-report=r.json", "-v")
    assert result.ret == 0
    assert outcomes(result) == {"passed": 1, "quarantined": 1}
    result.stdout.fnmatch_lines(
        [
            "*test_broken QUARANTINED*",
            literal(
                "QUARANTINED test_q.py::test_broken (flaky on CI; JIRA-9) [failed] -"
                " AssertionError: boom*"
            ),
            "passed while quarantined, candidate for removal: test_q.py::test_fine",
        ]
    )
    run = load(pytester.path / "r.json")["run"]
    assert [(q["test"], q["outcome"]) for q in run["quarantined"]] == [
        ("test_q.py::test_broken", "failed")
    ]
    assert [q["test"] for q in run["candidates_for_removal"]] == ["test_q.py::test_fine"]


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_quarantined_failure_under_xdist_does_not_fail_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    quarantine_file(pytester)
    result = pytester.runpytest_inprocess("-n", "2", "--flaky-quarantine=q.json", "-x")
    assert result.ret == 0
    assert outcomes(result) == {"passed": 1, "quarantined": 1}
    result.stdout.fnmatch_lines(["QUARANTINED test_q.py::test_broken*boom*"])


SETTLED = """
def test_broken():
    assert False, "boom"

def test_fine():
    pass

def test_plain_failure():
    assert False, "not quarantined"
"""


@pytest.mark.parametrize(
    "layout", [[], pytest.param(["-n", "2"], marks=XDIST)], ids=["serial", "xdist"]
)
@pytest.mark.processes
def test_a_quarantined_test_whose_history_shows_it_always_fails_is_not_rerun(
    pytester: pytest.Pytester, layout: list[str]
) -> None:
    """Three runs in which the quarantined test failed every attempt: the fourth tries it
    once and says why; a failure nothing quarantines is still rerun."""
    pytester.makepyfile(test_q=SETTLED)
    quarantine_file(pytester)
    args = [
        "--flaky-reruns=2",
        "--flaky-quarantine=q.json",
        "--flaky-history=h.json",
        "-p",
        "no:cacheprovider",
    ]
    for _ in range(3):
        first = pytester.runpytest(*args)
        assert outcomes(first) == {"failed": 1, "passed": 1, "quarantined": 1, "rerun": 4}
    fourth = pytester.runpytest_inprocess(*args, *layout)
    assert outcomes(fourth) == {"failed": 1, "passed": 1, "quarantined": 1, "rerun": 2}
    fourth.stdout.fnmatch_lines(
        [
            literal(
                "QUARANTINED test_q.py::test_broken (flaky on CI) [failed] - AssertionError: boom*"
            )
            + "not rerun: it failed in each of its last 3 runs*"
        ]
    )
    history = load_history(pytester.path / "h.json")
    (env,) = history.envs.values()
    assert env.tests["test_q.py::test_broken"] == "FFFF"


# How a quarantined failure is rewritten: as the test runs (nothing else runs the tests'
# protocol: pytest-rerunfailures blocked, no reruns), or as each report is logged.
QUARANTINE_MODES = [
    pytest.param(["-p", "no:rerunfailures"], id="as-the-test-runs"),
    pytest.param(["--flaky-reruns=1", "--flaky-only-rerun=NoSuchError"], id="as-reports-log"),
]

EVERY_PHASE = """
import pytest

@pytest.fixture
def breaks_in_setup():
    raise RuntimeError("setup broke")

@pytest.fixture
def breaks_in_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_setup(breaks_in_setup):
    pass

def test_call():
    assert False, "call broke"

def test_teardown(breaks_in_teardown):
    pass

def test_after():
    pass

def test_not_quarantined_after():
    pass
"""


@pytest.mark.parametrize("mode", QUARANTINE_MODES)
def test_a_quarantined_failure_in_any_phase_neither_fails_nor_stops_the_session(
    pytester: pytest.Pytester, mode: list[str]
) -> None:
    pytester.makepyfile(test_q=EVERY_PHASE)
    (pytester.path / "q.txt").write_text(
        "test_q.py::test_setup\ntest_q.py::test_call  # JIRA-1\ntest_q.py::test_teardown\n"
        "test_q.py::test_after\n"
    )
    result = pytester.runpytest(
        "--flaky-quarantine=q.txt", "--flaky-report=r.json", "-x", "-rA", *mode
    )
    assert result.ret == 0
    # test_teardown passed its call, then its teardown failed: one of each.
    assert outcomes(result) == {"passed": 3, "quarantined": 3}
    result.stdout.fnmatch_lines(["test_q.py QQ.Q.. *"])
    run = load(pytester.path / "r.json")["run"]
    assert sorted((q["test"], q["outcome"], q["message"]) for q in run["quarantined"]) == [
        ("test_q.py::test_call", "failed", "AssertionError: call broke"),
        ("test_q.py::test_setup", "error", "RuntimeError: setup broke"),
        ("test_q.py::test_teardown", "error", "RuntimeError: teardown broke"),
    ]
    assert [q["test"] for q in run["candidates_for_removal"]] == ["test_q.py::test_after"]


@XDIST
@pytest.mark.processes
def test_quarantine_as_the_test_runs_holds_on_xdist_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_q=EVERY_PHASE)
    (pytester.path / "q.txt").write_text(
        "test_q.py::test_setup\ntest_q.py::test_call\ntest_q.py::test_teardown\n"
    )
    result = pytester.runpytest_inprocess(
        "-n", "2", "-p", "no:rerunfailures", "--flaky-quarantine=q.txt", "--flaky-report=r.json"
    )
    assert result.ret == 0
    assert outcomes(result) == {"passed": 3, "quarantined": 3}
    run = load(pytester.path / "r.json")["run"]
    assert sorted(q["message"] for q in run["quarantined"]) == [
        "AssertionError: call broke",
        "RuntimeError: setup broke",
        "RuntimeError: teardown broke",
    ]


def test_a_quarantine_watches_reports_only_where_something_else_runs_the_tests(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    quarantine_file(pytester)
    pytester.makeconftest(
        """
        def pytest_sessionfinish(session):
            pm = session.config.pluginmanager
            hook = pm.get_plugin("pytest_accel:quarantine_reports")
            print("quarantine hook:", type(hook).__name__)
        """
    )
    alone = pytester.runpytest("-s", "-p", "no:rerunfailures", "--flaky-quarantine=q.json")
    alone.stdout.fnmatch_lines(["*quarantine hook: QuarantineByProtocol"])
    with_reruns = pytester.runpytest("-s", "--flaky-quarantine=q.json", "--flaky-reruns=1")
    with_reruns.stdout.fnmatch_lines(["*quarantine hook: QuarantineByReport"])
    # Any plugin that runs the protocol itself, as pytest-rerunfailures does.
    pytester.makepyfile(
        own_runner="""
        from _pytest.runner import runtestprotocol

        def pytest_runtest_protocol(item, nextitem):
            item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
            for report in runtestprotocol(item, nextitem=nextitem, log=False):
                item.ihook.pytest_runtest_logreport(report=report)
            item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
            return True
        """
    )
    pytester.syspathinsert()
    other = pytester.runpytest(
        "-s", "-p", "no:rerunfailures", "-p", "own_runner", "--flaky-quarantine=q.json"
    )
    other.stdout.fnmatch_lines(["*quarantine hook: QuarantineByReport"])
    assert outcomes(other) == {"passed": 1, "quarantined": 1}
    assert outcomes(alone) == {"passed": 1, "quarantined": 1}
    assert outcomes(with_reruns) == {"passed": 1, "quarantined": 1, "rerun": 1}


def test_an_entry_for_tpu_does_not_apply_on_cpu(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    quarantine_file(pytester, platforms=["tpu"])
    result = pytester.runpytest("--flaky-quarantine=q.json")
    result.assert_outcomes(failed=1, passed=1)
    assert result.ret == 1
    emulated = pytester.runpytest("--flaky-quarantine=q.json", "--accel-emulate=tpu:4")
    assert outcomes(emulated) == {"quarantined": 1, "passed": 1}


def test_an_expired_entry_does_not_apply_and_warns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    quarantine_file(pytester, expires="2020-01-31")
    result = pytester.runpytest("--flaky-quarantine=q.json")
    result.assert_outcomes(failed=1, passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*FlakyQuarantineWarning: quarantine entry expired on 2020-01-31;*test_broken",
            "expired quarantine entry (since 2020-01-31; its failures count again):"
            " test_q.py::test_broken",
        ]
    )


def test_an_entry_naming_no_existing_test_warns_as_stale(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_q=QUARANTINED, test_other="def test_x(): pass\n")
    (pytester.path / "q.txt").write_text(
        "test_q.py::test_renamed\ngone.py::test_x\ntest_other.py::test_x\n"
    )
    result = pytester.runpytest("--flaky-quarantine=q.txt", "test_q.py")
    result.stdout.fnmatch_lines(
        [
            "*q.txt:1: FlakyQuarantineWarning: stale quarantine entry*test_q.py::test_renamed",
            "*q.txt:2: FlakyQuarantineWarning: stale quarantine entry*gone.py::test_x",
        ]
    )
    # test_other.py exists but was not collected in this run: not called stale
    assert (
        "stale quarantine entry (matches no collected test): test_other.py"
        not in result.stdout.str()
    )


def test_a_class_entry_covers_its_tests_and_a_base_name_its_parameters(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_c="""
        import pytest

        class TestC:
            def test_a(self):
                assert False

        @pytest.mark.parametrize("n", [1, 2])
        def test_p(n):
            assert False
        """
    )
    (pytester.path / "q.txt").write_text("test_c.py::TestC\ntest_c.py::test_p\n")
    result = pytester.runpytest("--flaky-quarantine=q.txt")
    assert outcomes(result) == {"quarantined": 3}
    assert result.ret == 0


def run_history(pytester: pytest.Pytester, runs: int) -> None:
    pytester.makepyfile(
        test_h="""
        import os

        RUN = int(os.environ["RUN"])

        def test_sometimes():
            assert RUN % 3 != 0  # fails in runs 0, 3, 6 and 9

        def test_never_passes():
            assert False

        def test_fine():
            pass
        """
    )
    for run in range(runs):
        with pytest.MonkeyPatch.context() as env:
            env.setenv("RUN", str(run))
            pytester.runpytest("--flaky-history=history.json", "-p", "no:cacheprovider")


def test_twelve_runs_make_one_test_flaky_and_one_broken(pytester: pytest.Pytester) -> None:
    run_history(pytester, 12)
    history = load_history(pytester.path / "history.json")
    tests = history.envs["cpu/x1"].tests
    assert tests["test_h.py::test_sometimes"] == "FPPFPPFPPFPP"
    assert classify("s", tests["test_h.py::test_sometimes"]).status == "flaky"
    assert classify("b", tests["test_h.py::test_never_passes"]).status == "broken"
    assert classify("f", tests["test_h.py::test_fine"]).status == "ok"
    assert len(history.envs["cpu/x1"].runs) == 12

    with pytest.MonkeyPatch.context() as env:
        env.setenv("RUN", "1")
        result = pytester.runpytest("--flaky-history=history.json", "--flaky-max-pct=10")
    result.stdout.fnmatch_lines(
        [
            "flaky across runs: test_h.py::test_sometimes: failed 4 of 13 run(s), flip rate 0.58",
            "broken across runs: test_h.py::test_never_passes: failed 13 of 13 run(s),*",
            "flaky: 1 of 3 test(s) (33.33%) on cpu: 0 in this run, 1 more across the history's"
            " 13 run(s); --flaky-max-pct 10: over the limit*",
        ]
    )
    assert result.ret == 1


def test_write_quarantine_lists_the_flaky_test_and_never_the_broken_one(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    run_history(pytester, 12)
    history, proposal = pytester.path / "history.json", pytester.path / "proposal.json"
    capsys.readouterr()
    code = cli.main(["flaky", str(history), "--write-quarantine", str(proposal), "--max-pct", "5"])
    assert code == 1  # 1 of 3 tests is flaky: 33% > 5%
    out = capsys.readouterr().out
    assert "flaky_pct cpu: 33.33% (over --max-pct 5)" in out
    entries = load_quarantine(proposal).entries
    assert [(e.test, e.platforms) for e in entries] == [("test_h.py::test_sometimes", ("cpu",))]
    assert entries[0].expires is not None
    # and the plugin accepts the proposal: the flaky test is quarantined, the broken one not
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RUN", "0")
        result = pytester.runpytest("--flaky-quarantine=proposal.json")
    assert outcomes(result) == {"passed": 1, "failed": 1, "quarantined": 1}


def test_write_quarantine_says_why_it_proposed_nothing(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs cannot make a test flaky: the line says what a proposal needs and
    what the history held, rather than only "0 new"."""
    run_history(pytester, 3)
    capsys.readouterr()
    code = cli.main(["flaky", str(pytester.path / "history.json"), "--write-quarantine=q.json"])
    assert code == 0
    err = capsys.readouterr().err
    assert "0 new flaky test(s)" in err
    assert err.rstrip().endswith(
        "; none proposed: a test is flaky after at least 10 runs of a key with 2 or more"
        " failed first attempts (docs/flaky.md); the history held cpu/x1 3 run(s)"
    )


def test_write_quarantine_keeps_the_entries_of_the_lists_in_use(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Moving from a text list to the proposed JSON once lost every existing entry: the
    written list keeps what the text list and the file itself held, reviewed fields and
    all, and adds only the flaky tests nothing covers yet."""
    run_history(pytester, 12)
    history = str(pytester.path / "history.json")
    (pytester.path / "q.txt").write_text(
        "test_h.py::test_never_passes  # a known bug, issue #12\n"
        "test_other.py::test_gone  # stays until someone removes it\n"
    )
    capsys.readouterr()
    cli.main(["flaky", history, "--quarantine=q.txt", "--write-quarantine=q.json"])
    assert "wrote 3 entries to q.json: 2 kept from the lists in use, 1 new" in (
        capsys.readouterr().err
    )
    entries = {e.test: e for e in load_quarantine(pytester.path / "q.json").entries}
    assert set(entries) == {
        "test_h.py::test_never_passes",
        "test_other.py::test_gone",
        "test_h.py::test_sometimes",
    }
    assert entries["test_h.py::test_never_passes"].reason == "a known bug, issue #12"
    # The JSON list edited by a reviewer, then proposed into again: nothing is lost, and
    # a test it covers already is not added twice.
    data = load(pytester.path / "q.json")
    data["entries"][0]["issue"] = "#12"
    (pytester.path / "q.json").write_text(json.dumps(data))
    cli.main(["flaky", history, "--write-quarantine=q.json"])
    again = load(pytester.path / "q.json")["entries"]
    assert len(again) == 3
    assert again[0]["issue"] == "#12"
    assert "3 kept from the lists in use, 0 new" in capsys.readouterr().err
    # --quarantine alone would write nothing: said, not ignored.
    assert cli.main(["flaky", history, "--quarantine=q.txt"]) == 2
    assert "--quarantine: keeps entries in --write-quarantine's list" in capsys.readouterr().err


def test_the_flaky_command_reads_records_as_runs(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    records = []
    for run in range(10):  # test_flaky fails its first attempt every time
        (pytester.path / "attempts.txt").unlink(missing_ok=True)
        records.append(str(pytester.path / f"r{run}.json"))
        pytester.runpytest("--flaky-reruns=1", f"--perf-record={records[-1]}")
    capsys.readouterr()  # the runs' own output
    assert cli.main(["flaky", *records, "--format=json"]) == 0
    env = json.loads(capsys.readouterr().out)["envs"]["cpu/x1"]
    assert env["runs"] == 10
    assert [(v["test"], v["flaky_runs"]) for v in env["flaky"]] == [("test_two.py::test_flaky", 10)]
    assert [v["test"] for v in env["broken"]] == ["test_two.py::test_always_fails"]


@pytest.mark.processes
def test_six_processes_updating_one_history_at_once_lose_no_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n@pytest.mark.parametrize('i', range(30))\ndef test_p(i): pass\n"
    )
    run_concurrently(pytester, ["--flaky-history=shared.json"], processes=6)
    env = load_history(pytester.path / "shared.json").envs["cpu/x1"]
    assert len(env.runs) == 6
    assert set(env.tests.values()) == {"P" * 6}
    assert len(env.tests) == 30


def test_a_run_added_to_the_history_by_another_job_during_this_one_is_kept(
    pytester: pytest.Pytester,
) -> None:
    """The history read before the tests is reused at the end only if no one wrote the
    file since: here another job adds a run while this one's tests run."""
    pytester.makepyfile(
        test_h="""
        from pytest_accel.flaky.history import update_history_file

        def test_meanwhile_another_job_finishes():
            update_history_file(
                "h.json", [("cpu/x1", "cpu", {"test_h.py::test_other": "F"}, {"tests": 1})], 50
            )
        """
    )
    assert pytester.runpytest("--flaky-history=h.json").ret == 0
    first = load_history(pytester.path / "h.json").envs["cpu/x1"]
    assert len(first.runs) == 2  # the other job's run, then this one's
    result = pytester.runpytest("--flaky-history=h.json")
    assert result.ret == 0
    env = load_history(pytester.path / "h.json").envs["cpu/x1"]
    assert len(env.runs) == 4
    assert env.tests == {
        "test_h.py::test_meanwhile_another_job_finishes": "PP",
        "test_h.py::test_other": "FF",
    }


BAD_QUARANTINES = [
    (
        "q.json",
        '{"version": 1, "entries": [',
        "q.json: line 1: not valid JSON (Expecting value at column 28)",
    ),
    ("q.json", '{"version": 1, "entries": {}}', "q.json: 'entries' must be a list, got dict"),
    (
        "q.json",
        '{"version": 1,\n "entries": [\n  {"test": "t.py::a", "platform": ["tpu"]}]}',
        "q.json: line 3: entries[0]: unknown field 'platform' (did you mean 'platforms'?)",
    ),
    (
        "q.json",
        '{"version": 1, "entries": [\n{"test": "t.py::a"},\n{"test": "t.py::b",'
        ' "expires": "2026-02-30"}]}',
        "q.json: line 3: entries[1]: 'expires' '2026-02-30' is not a real date",
    ),
    (
        "q.json",
        '{"version": 1, "entries": [{"test": "t.py::a", "expires": "next week"}]}',
        "q.json: line 1: entries[0]: 'expires' must be a date YYYY-MM-DD, got 'next week'",
    ),
    (
        "q.json",
        '{"version": 1, "entries": [{"test": 42}]}',
        "q.json: entries[0]: 'test' must be a non-empty node id",
    ),
    (
        "q.json",
        '{"version": 1, "entries": [{"test": "t.py::a", "platforms": ["tpuu"]}]}',
        "q.json: line 1: entries[0]: unknown platform 'tpuu' in 'platforms' (known: *",
    ),
    ("q.json", '{"version": 3, "entries": []}', "q.json: version 3 is newer than*"),
    ("q.txt", "t.py::a\n\nt.py::::b\n", "q.txt: line 3: 't.py::::b' is not a node id*"),
    ("q.txt", "t.py::a\n--flaky\n", "q.txt: line 2: '--flaky' looks like a command-line option*"),
    ("q.txt", b"t.py::\xff\n", "q.txt: is not UTF-8 text (byte 6)"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_QUARANTINES)
def test_a_malformed_quarantine_file_is_a_usage_error_naming_file_and_line(
    pytester: pytest.Pytester, name: str, content: str | bytes, message: str
) -> None:
    pytester.makepyfile("def test_a(): pass\n")
    path = pytester.path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    result = pytester.runpytest(f"--flaky-quarantine={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([literal(f"ERROR: --flaky-quarantine: {message}")])
    assert "Traceback" not in result.stderr.str()


def test_an_untidy_quarantine_file_is_accepted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_q=QUARANTINED)
    (pytester.path / "q.txt").write_bytes(
        b"\xef\xbb\xbf# quarantine\r\n\r\n   \r\n  test_q.py::test_broken   # JIRA-1  \r\n# end"
    )
    result = pytester.runpytest("--flaky-quarantine=q.txt")
    assert outcomes(result) == {"passed": 1, "quarantined": 1}
    (entry,) = load_quarantine(pytester.path / "q.txt").entries
    assert (entry.test, entry.reason, entry.line) == ("test_q.py::test_broken", "JIRA-1", 4)
    (pytester.path / "q.json").write_bytes(
        b'\xef\xbb\xbf{"version": 1,\r\n "_comment": "owned by infra",\r\n "entries": [{"test":'
        b' "test_q.py::test_broken", "platforms": "CPU", "issue": 123, "reason": null}]}\r\n'
    )
    assert pytester.runpytest("--flaky-quarantine=q.json").ret == 0
    (entry,) = load_quarantine(pytester.path / "q.json").entries
    assert (entry.platforms, entry.issue) == (("cpu",), "#123")


BAD_HISTORIES = [
    ("{", "h.json: is not valid JSON*"),
    ("[]", "h.json: expected a JSON object, got list"),
    (
        '{"schema": "pytest-accel/baseline", "version": 1}',
        "h.json: is not a pytest-accel flaky history*",
    ),
    (
        '{"schema": "pytest-accel/flaky-history", "version": 1, "window": 0}',
        "h.json: 'window' must be a positive integer, got 0",
    ),
    (
        '{"schema": "pytest-accel/flaky-history", "version": 1, "envs": {"cpu/x1":'
        ' {"tests": {"t.py::a": "PPX"}}}}',
        "h.json: envs['cpu/x1'].tests['t.py::a'] must be a string of P, F and K*",
    ),
    (
        '{"schema": "pytest-accel/flaky-history", "version": 1, "envs": {"cpu/x1": {"runs": 3}}}',
        "h.json: envs['cpu/x1'].runs must be a list of objects",
    ),
]


@pytest.mark.parametrize(("content", "message"), BAD_HISTORIES)
def test_a_malformed_history_is_a_usage_error_before_any_test_runs(
    pytester: pytest.Pytester, content: str, message: str
) -> None:
    pytester.makepyfile("def test_a(): pass\n")
    (pytester.path / "h.json").write_text(content)
    result = pytester.runpytest("--flaky-history=h.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([literal(f"ERROR: --flaky-history: {message}")])
    assert cli.main(["flaky", str(pytester.path / "h.json")]) == cli.EXIT_USAGE


def test_a_history_with_unknown_fields_and_a_bom_is_read(pytester: pytest.Pytester) -> None:
    (pytester.path / "h.json").write_bytes(
        b'\xef\xbb\xbf{"schema": "pytest-accel/flaky-history", "version": 1, "window": 50,'
        b' "written_by": "a newer tool", "envs": {"cpu/x1": {"platform": "cpu", "runs": [],'
        b' "tests": {"t.py::a": "PFPFPFPFPFPF"}, "extra": 1}}}'
    )
    history = load_history(pytester.path / "h.json")
    assert history.envs["cpu/x1"].tests == {"t.py::a": "PFPFPFPFPFPF"}


@pytest.mark.parametrize(
    ("letters", "status"),
    [
        ("P" * 12, "ok"),
        ("F" * 12, "broken"),
        ("F" * 19 + "P", "broken"),  # 95% failures
        ("FP" * 5, "flaky"),
        ("F" + "P" * 8, "ok"),  # one failure in fewer than ten runs: not enough to tell
        ("F" + "P" * 30, "ok"),  # one failure: fewer than two
        ("FF" + "P" * 40, "ok"),  # 2 of 42 is under 5%
        ("K" * 12, "flaky"),  # needs a rerun every time: flaky, not broken
        ("P" * 9 + "KF", "flaky"),  # two failed first attempts in eleven runs
        ("P" * 49 + "K", "ok"),  # one lucky rerun in fifty runs is not enough
        ("PPK", "ok"),  # flaky in that run, but three runs say little across runs
    ],
)
def test_classification_follows_the_rates_of_the_spec(letters: str, status: str) -> None:
    assert classify("t", letters).status == status


def test_flip_rate_counts_status_changes_and_reruns() -> None:
    assert classify("t", "PFPFPFPFPF").flip_rate == 1.0
    assert classify("t", "PPPPPFFFFF").flip_rate == pytest.approx(1 / 9)
    assert classify("t", "PPPPPPPPPK").flip_rate == pytest.approx(1 / 9)


def test_the_flaky_command_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "b.json").write_text('{"schema": "pytest-accel/baseline", "version": 1}')
    assert cli.main(["flaky", str(tmp_path / "b.json")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        f"pytest-accel: error: {tmp_path / 'b.json'}: is neither a flaky history nor a record"
        " (schema 'pytest-accel/baseline')\n"
    )


def test_reading_a_missing_quarantine_file_names_it() -> None:
    with pytest.raises(InputError, match=r"^nowhere.txt: no such file$"):
        load_quarantine("nowhere.txt")


def schema(name: str) -> dict[str, Any]:
    from importlib import resources

    text = resources.files("pytest_accel").joinpath(f"schemas/{name}.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@pytest.mark.requires("jsonschema")
def test_the_files_written_validate_against_the_schemas_in_the_package(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema

    run_history(pytester, 12)
    quarantine_file(pytester, platforms=["cpu"], expires="2999-01-01", issue=7)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RUN", "0")
        pytester.runpytest(
            "--flaky-reruns=1",
            "--flaky-history=history.json",
            "--flaky-report=report.json",
            "--flaky-quarantine=q.json",
        )
    cli.main(["flaky", str(pytester.path / "history.json"), "--write-quarantine=proposal.json"])
    capsys.readouterr()
    report = load(pytester.path / "report.json")
    jsonschema.validate(report, schema("flaky-report"))
    assert report["across_runs"]["flaky"]  # the documents are not trivially empty
    jsonschema.validate(load(pytester.path / "history.json"), schema("flaky-history"))
    for quarantine in ("q.json", "proposal.json"):
        jsonschema.validate(load(pytester.path / quarantine), schema("quarantine"))


def test_without_a_terminal_reporter_the_report_is_the_same(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_two=TWO_TESTS)
    pytester.runpytest("--flaky-reruns=2", "--flaky-report=with.json")
    (pytester.path / "attempts.txt").unlink()
    pytester.runpytest("--flaky-reruns=2", "--flaky-report=without.json", "-p", "no:terminal")
    assert load(pytester.path / "with.json")["run"] == load(pytester.path / "without.json")["run"]


def test_an_interrupted_run_writes_its_report_but_adds_no_run_to_the_history(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_ok():
            pass

        def test_ctrl_c():
            raise KeyboardInterrupt
        """
    )
    pytester.runpytest("--flaky-history=h.json", "-k", "test_ok")
    before = (pytester.path / "h.json").read_bytes()
    result = pytester.runpytest(
        "--flaky-history=h.json", "--flaky-report=r.json", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / "h.json").read_bytes() == before
    assert load(pytester.path / "r.json")["run"]["tests"] == 1


def test_a_setup_class_that_fails_once_is_set_up_again_on_the_rerun(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        CALLS = []

        class TestDevice:
            @classmethod
            def setup_class(cls):
                CALLS.append("setup")
                if len(CALLS) == 1:
                    raise RuntimeError("device busy")

            def test_uses_device(self):
                assert CALLS == ["setup", "setup"]

            def test_second(self):
                assert CALLS == ["setup", "setup"]  # the class stays up for its next test
        """
    )
    result = pytester.runpytest("--flaky-reruns=1")
    assert outcomes(result) == {"passed": 1, "rerun": 1, "flaky": 1}


def test_github_actions_gets_a_job_summary_table_and_the_cli_writes_markdown(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytester.makepyfile(
        test_md="""
        import pytest

        SEEN = []

        @pytest.mark.parametrize("case", ["a|b"])
        def test_pipe(case):
            SEEN.append(case)
            assert len(SEEN) > 1
        """
    )
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest("--flaky-reruns=1", "--perf-record=record.json")
    text = summary.read_text(encoding="utf-8")
    assert "### pytest-accel flaky tests" in text
    assert "1 of 1 test(s) flaky (100.00%) on `cpu`" in text
    assert "| flaky | test\\_md.py::test\\_pipe\\[a\\|b\\] | 2 attempts |" in text
    capsys.readouterr()
    assert cli.main(["flaky", str(pytester.path / "record.json"), "--format=markdown"]) == 0
    assert capsys.readouterr().out.startswith("### pytest-accel flaky tests\n\ncpu/x1 (1 run(s)")


def test_the_history_keeps_the_last_window_of_outcomes_and_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass\n")
    for _ in range(3):
        pytester.runpytest("--flaky-history=h.json", "--flaky-window=2")
    env = load_history(pytester.path / "h.json").envs["cpu/x1"]
    assert env.tests == {
        "test_the_history_keeps_the_last_window_of_outcomes_and_runs.py::test_a": "PP"
    }
    assert len(env.runs) == 2


MIXED_OUTCOMES = (
    TWO_TESTS
    + """
import pytest

def test_passes():
    pass

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("setup")

def test_setup_error(broken):
    pass
"""
)


def letter_from_record(test: dict[str, Any]) -> str | None:
    """What the timing record's fold says of a test, in the flaky history's letters."""
    earlier = [a["outcome"] for a in test.get("attempts", [])[:-1]]
    if test["outcome"] == "passed":
        return "K" if any(o in ("failed", "error") for o in earlier) else "P"
    if test["outcome"] in ("failed", "error"):
        return "F"
    return None  # skipped, xfailed: neither passed nor failed here


@pytest.mark.parametrize(
    "how",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=XDIST),
        pytest.param(
            ["-p", "rerunfailures", "--reruns=1"],
            id="pytest-rerunfailures",
            marks=pytest.mark.requires("pytest_rerunfailures"),
        ),
    ],
)
@pytest.mark.processes
def test_the_timing_record_and_the_flaky_history_tell_each_test_alike(
    pytester: pytest.Pytester, how: list[str]
) -> None:
    """The timing feature folds every report into its table, the flaky feature reads the
    reports by status: both read the same reports, and they must agree on each test."""
    pytester.makepyfile(test_mixed=MIXED_OUTCOMES)
    reruns = [] if "--reruns=1" in how else ["--flaky-reruns=1"]
    pytester.runpytest(*how, *reruns, "--perf-record=r.json", "--flaky-history=h.json")
    tests = per_test(load(pytester.path / "r.json"))
    from_record = {t: letter_from_record(v) for t, v in tests.items()}
    (env,) = load(pytester.path / "h.json")["envs"].values()
    assert env["tests"] == {t: letter for t, letter in from_record.items() if letter}
    assert env["tests"] == {
        "test_mixed.py::test_flaky": "K",
        "test_mixed.py::test_always_fails": "F",
        "test_mixed.py::test_passes": "P",
        "test_mixed.py::test_setup_error": "F",
    }
