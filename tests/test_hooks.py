from __future__ import annotations

import json

import pytest

from tests.fakesys import FakeSys, skip_reasons

SPYRE_CONFTEST = """
from pytest_accel.hardware.detection import Detection

def pytest_accel_platforms():
    return ["spyre"]

def pytest_accel_detect(context):
    cards = sorted(context.path("/dev").glob("spyre[0-9]*"))
    context.note(f"/dev/spyre*: {len(cards)} card(s)")
    if not cards:
        return None
    return Detection("spyre", len(cards), "Spyre v1", "dev", tuple(context.evidence))
"""

SPYRE_SUITE = """
import pytest

@pytest.mark.accel("spyre", min_devices=2)
def test_on_spyre(): pass

@pytest.mark.accel("spyre", kind="Spyre v2")
def test_next_generation(): pass

@pytest.mark.tpu
def test_on_tpu(): pass
"""


def test_a_conftest_detector_adds_a_platform_for_accel_and_markers(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    for index in range(4):
        (fakesys.root / f"dev/spyre{index}").write_text("")
    pytester.makeconftest(SPYRE_CONFTEST)
    pytester.makepyfile(SPYRE_SUITE)
    result = pytester.runpytest("--accel=spyre", "--strict-markers")
    result.stdout.fnmatch_lines(["accel: spyre x4 (Spyre v1) via dev*"])
    result.assert_outcomes(passed=1, skipped=2)
    assert skip_reasons(pytester, "--accel=spyre")["test_next_generation"] == (
        "requires spyre x1 of kind 'Spyre v2' (detected: spyre x4 (Spyre v1) via dev)"
    )


def test_third_party_detectors_run_after_the_builtin_probes_and_before_the_cpu_fallback(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    (fakesys.root / "dev/spyre0").write_text("")
    fakesys.add_tpu(4)
    pytester.makeconftest(SPYRE_CONFTEST)
    pytester.makepyfile("def test_ok(): pass")
    # auto: the TPU probe answers first; asking for spyre skips the built-in probes.
    pytester.runpytest("--accel-probe=none").stdout.fnmatch_lines(["accel: tpu x4*"])
    pytester.runpytest("--accel=spyre").stdout.fnmatch_lines(["accel: spyre x1*"])


def test_a_missing_third_party_platform_lists_the_detectors_evidence(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    pytester.makeconftest(SPYRE_CONFTEST)
    pytester.makepyfile(SPYRE_SUITE)
    result = pytester.runpytest("--accel=spyre")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --accel=spyre: no spyre device found*/dev/spyre*: 0 card(s)*"]
    )


def test_an_unregistered_platform_name_is_still_rejected(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SPYRE_CONFTEST)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--accel=neuron")
    result.stderr.fnmatch_lines(
        [
            "ERROR: --accel: invalid choice 'neuron'"
            " (choose from auto, cpu, cuda, rocm, tpu, gpu, spyre)"
        ]
    )


def test_a_conftest_that_knows_each_tests_duration_balances_the_shards(
    pytester: pytest.Pytester,
) -> None:
    """``pytest_accel_expected_durations``: what sharding plans by, whoever answers it
    (here no baseline: the conftest knows)."""
    pytester.makeconftest(
        """
        def pytest_accel_expected_durations(config):
            quick = {f"test_a.py::test_{name}": 1.0 for name in "bcd"}
            return {"test_a.py::test_long": 3.0, **quick}
        """
    )
    pytester.makepyfile(
        test_a="""
        def test_long(): pass
        def test_b(): pass
        def test_c(): pass
        def test_d(): pass
        """
    )
    first = pytester.runpytest("--accel-shard=1/2", "-v")
    first.stdout.fnmatch_lines(
        ["accel-shard 1/2 by class: 1 test(s), estimated 3.0s; all shards: 3.0s, 3.0s*"]
    )
    first.stdout.fnmatch_lines(["*test_long PASSED*"])
    first.assert_outcomes(passed=1)
    pytester.runpytest("--accel-shard=2/2").assert_outcomes(passed=3)


def test_a_feature_that_wants_the_runs_timings_gets_its_tests_without_timing_options(
    pytester: pytest.Pytester,
) -> None:
    """``pytest_accel_wants_timings`` switches the timing feature on for another reader,
    which gets the run's tests through ``pytest_accel_run_result``; its typed result
    adds its section to the record, its job-summary section and its gate."""
    pytester.makeconftest(
        """
        import json
        from dataclasses import dataclass

        from pytest_accel.github import Section

        def pytest_accel_wants_timings(config):
            return True

        @dataclass(frozen=True)
        class Seen:
            ids: list
            outcomes: list
            name: str = "seen"

            def gate(self):
                return "a test of the seen feature failed" if "failed" in self.outcomes else None

            def summary_section(self):
                return Section(["### seen", "", f"{len(self.ids)} test(s) seen", ""])

            def record_section(self):
                return {"ids": self.ids, "outcomes": self.outcomes}

        def pytest_accel_run_result(session, run):
            return Seen(list(run.ids), list(run.outcomes))
        """
    )
    pytester.makepyfile(test_a="def test_ok(): pass\ndef test_bad(): assert False\n")
    summary = pytester.path / "summary.md"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        result = pytester.runpytest("--perf-record=r.json", "--accel-report=page.html")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*exit status 1: a test of the seen feature failed"])
    result.stdout.no_fnmatch_line("*could not*")
    # The page reads each result typed (the cost's, selection's); one it does not know is
    # the record's alone, and the page is made as without it.
    assert "test_a.py::test_bad" in (pytester.path / "page.html").read_text()
    seen = json.loads((pytester.path / "r.json").read_text())["seen"]
    assert sorted(zip(seen["ids"], seen["outcomes"], strict=True)) == [
        ("test_a.py::test_bad", "failed"),
        ("test_a.py::test_ok", "passed"),
    ]
    assert "2 test(s) seen" in summary.read_text()


def test_another_plugin_reads_each_features_one_result_of_the_session(
    pytester: pytest.Pytester,
) -> None:
    """``pytest_accel_timing_result`` and ``pytest_accel_flaky_findings``: the timing
    feature's result (its comparison and the other features' typed results included) and
    the flaky feature's findings, as the terminal showed them, each through its typed
    hook."""
    pytester.makeconftest(
        """
        import json
        import pytest

        @pytest.hookimpl(wrapper=True)
        def pytest_sessionfinish(session):
            yield
            hook = session.config.hook
            timing = hook.pytest_accel_timing_result(config=session.config)
            flaky = hook.pytest_accel_flaky_findings(config=session.config)
            cost = next(r for r in timing.results if r.name == "cost")
            found = {
                "timing": [list(timing.table.nodeids), timing.comparison is not None],
                "flaky": dict(flaky.letters),
                "results": [r.name for r in timing.results],
                "cost": [type(cost.cost).__name__, cost.cost.key, cost.cost.price],
            }
            with open("seen.json", "w") as out:
                json.dump(found, out)
        """
    )
    pytester.makepyfile(test_a="def test_ok(): pass\ndef test_bad(): assert False\n")
    result = pytester.runpytest(
        "--perf-record=r.json", "--flaky-history=h.json", "--accel-price=cpu/*=0.05"
    )
    result.assert_outcomes(passed=1, failed=1)
    seen = json.loads((pytester.path / "seen.json").read_text())
    assert seen == {
        "timing": [["test_a.py::test_ok", "test_a.py::test_bad"], False],
        "flaky": {"test_a.py::test_ok": "P", "test_a.py::test_bad": "F"},
        # The other features' results ride on the timing result typed, as they were built.
        "results": ["cost"],
        "cost": ["RunCost", "cpu/x1", 0.05],
    }


SPYRE_PLUGIN = """
from pytest_accel import Detection
from pytest_accel.hardware.platforms import Platform, mask_pinning


def pytest_accel_platforms():
    # A row, not only a name: the card opts into a device set per xdist worker.
    return [Platform("spyre", pinning=mask_pinning("SPYRE_VISIBLE_DEVICES"))]


def pytest_accel_detect(context):
    cards = sorted(context.path("/dev").glob("spyre[0-9]*"))
    context.note(f"/dev/spyre*: {len(cards)} card(s)")
    if not cards:
        return None
    return Detection("spyre", len(cards), "Spyre v1", "dev", tuple(context.evidence))
"""


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_third_party_platform_opts_into_pinning_through_its_row(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    """Pinning was hard-coded to cuda, rocm and tpu: a plugin's accelerator could not get
    a device set per xdist worker."""
    for index in range(4):
        (fakesys.root / "dev" / f"spyre{index}").write_text("")
    pytester.makepyfile(
        spyre_plugin=SPYRE_PLUGIN,
        test_cards="""
        import os, pathlib, pytest

        @pytest.mark.accel("spyre", min_devices=2)
        def test_card(request):
            worker = request.config.workerinput["workerid"]
            pathlib.Path(f"seen-{worker}").write_text(os.environ["SPYRE_VISIBLE_DEVICES"])
        """,
    )
    result = pytester.runpytest_subprocess(
        "-p", "spyre_plugin", "--accel=spyre", "-n", "2", "--dist", "each", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=2)
    assert {(pytester.path / f"seen-gw{i}").read_text() for i in (0, 1)} == {"0,1", "2,3"}


def test_a_timing_result_that_cannot_be_built_is_said_once_and_the_rest_still_runs(
    pytester: pytest.Pytester,
) -> None:
    """The core's session end asks the timing feature twice (the run's tests for the
    features that account for it, then the finish): a first half that failed is one line,
    and the features' own ends (the page) still run."""
    pytester.makeconftest(
        "def pytest_accel_shard(config):\n    raise RuntimeError('a broken shard plugin')\n"
    )
    pytester.makepyfile(test_a="def test_ok(): pass\n")
    result = pytester.runpytest(
        "--perf-record=r.json", "--accel-price=cpu/*=1", "--accel-report=page.html"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    said = result.stdout.str()
    assert said.count("could not finish the timing record and comparison") == 1, said
    assert "a broken shard plugin" in said
    assert "Traceback" not in said
    assert (pytester.path / "page.html").exists()


def test_a_result_whose_record_section_fails_costs_only_that_section(
    pytester: pytest.Pytester,
) -> None:
    """A plugin's result that cannot encode its section: the record is still written
    with every other section (the cost's here), and one line names the section and why."""
    pytester.makeconftest(
        """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Broken:
            name: str = "broken"

            def gate(self):
                return None

            def summary_section(self):
                return None

            def record_section(self):
                raise RuntimeError("no encoder for this")

        def pytest_accel_run_result(session, run):
            return Broken()
        """
    )
    pytester.makepyfile(test_a="def test_ok(): pass\n")
    result = pytester.runpytest("--perf-record=r.json", "--accel-price=cpu/*=0.05")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*could not encode the broken record section: *no encoder for this*"]
    )
    record = json.loads((pytester.path / "r.json").read_text())
    assert "broken" not in record
    assert record["cost"]["key"] == "cpu/x1"
    assert record["tests"]["id"] == ["test_a.py::test_ok"]
