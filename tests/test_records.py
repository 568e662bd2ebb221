from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_accel.perf.formats.record import check_record
from pytest_accel.perf.model.table import TimingTable
from pytest_accel.vcs import vcs_info
from tests.fakesys import per_group, per_test, run_concurrently

CLASS_SUITE = """
import time
import unittest

import pytest


@pytest.fixture(scope="class")
def compiled():
    time.sleep(0.3)
    yield


@pytest.mark.usefixtures("compiled")
class TestModel:
    def test_a(self): time.sleep(0.1)
    def test_b(self): time.sleep(0.1)
    def test_c(self): time.sleep(0.1)


class TestLegacy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        time.sleep(0.05)

    def test_one(self): pass
    def test_two(self): pass


def test_free(): pass
"""


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def validate(record: dict[str, Any]) -> None:
    schema_text = resources.files("pytest_accel").joinpath("schemas/record.schema.json").read_text()
    jsonschema.validate(record, json.loads(schema_text))


def test_a_class_span_covers_its_class_fixture_and_its_total_is_the_sum_of_its_tests(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_model=CLASS_SUITE)
    result = pytester.runpytest("--perf-record=record.json")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["pytest-accel: timing record of 6 test(s) written to record.json"])
    record = load(pytester.path / "record.json")
    validate(record)
    model = per_group(record, "classes")["test_model.py::TestModel"]
    assert model["tests"] == 3
    assert model["span"] >= 0.6
    members = [t for t in per_test(record).values() if t["class"] == "test_model.py::TestModel"]
    assert model["total"] == pytest.approx(sum(t["total"] for t in members), abs=1e-5)
    assert per_group(record, "classes")["test_model.py::TestLegacy"]["tests"] == 2  # unittest
    assert per_group(record, "modules")["test_model.py"]["tests"] == 6
    free = per_test(record)["test_model.py::test_free"]
    assert (free["class"], free["module"], free["outcome"]) == (None, "test_model.py", "passed")
    assert record["env"]["key"] == "cpu/x1"
    assert record["run"]["exitstatus"] == 0


def test_awkward_parametrize_ids_survive_the_round_trip(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize(
            "value",
            ["a/b", "c::d", "[e]", "ünï", "with space", "x]y[z"],
            ids=["a/b", "c::d", "[e]", "ünï", "with space", "x]y[z"],
        )
        def test_ids(value): pass
        """
    )
    reprec = pytester.inline_run("--perf-record=record.json")
    reported = {r.nodeid for r in reprec.getreports("pytest_runtest_logreport")}
    record = load(pytester.path / "record.json")
    assert set(record["tests"]["id"]) == reported
    assert len(reported) == 6
    validate(record)


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_xdist_records_each_test_once_with_its_worker_and_matches_a_serial_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        **{
            f"test_m{m}": "\n".join(
                [f"class TestK{m}:"]
                + [f"    def test_{i}(self): pass" for i in range(25)]
                + [f"def test_free_{i}(): pass" for i in range(25)]
            )
            for m in range(4)
        }
    )
    pytester.runpytest_inprocess(
        "-n", "2", "--perf-record=parallel.json", "--accel-report=report.html"
    ).assert_outcomes(passed=200)
    pytester.runpytest_inprocess("-n", "0", "--perf-record=serial.json").assert_outcomes(passed=200)
    parallel, serial = load(pytester.path / "parallel.json"), load(pytester.path / "serial.json")
    assert len(parallel["tests"]["id"]) == 200
    workers = check_record("parallel.json", parallel)["tests"]["worker"]  # a list or runs
    assert set(workers) == {"gw0", "gw1"}
    assert parallel["run"]["workers"] == 2
    assert set(parallel["tests"]["id"]) == set(serial["tests"]["id"])
    assert set(parallel["classes"]["id"]) == set(serial["classes"]["id"])
    assert {k: v["tests"] for k, v in per_group(parallel, "modules").items()} == {
        k: v["tests"] for k, v in per_group(serial, "modules").items()
    }
    # Serial: one run of no worker, and the tests of a class one run of that class.
    assert serial["tests"]["worker"] == {"values": [None], "counts": [200]}
    assert serial["tests"]["class"]["counts"] == [25, 25, 25, 25, 25, 25, 25, 25]
    assert serial["tests"]["class"]["values"][:2] == ["test_m0.py::TestK0", None]
    # Each worker's first test paid that process's warm-up.
    assert len(parallel["tests"]["warmup"]) == 2
    # The controller writes one HTML report with every test, from both workers.
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert html.count('<td class="id">test_m0.py::TestK0::test_') == 25
    assert "<td>xdist 2</td>" in html
    assert "No baseline to compare with." in html
    assert len(serial["tests"]["warmup"]) == 1
    validate(parallel)


FAILING_SUITE = """
import os
import pytest

def test_pass(): pass
def test_fail(): assert False
@pytest.fixture
def broken(): raise RuntimeError("setup")
def test_error(broken): pass
@pytest.mark.skip(reason="no")
def test_skip(): pass
@pytest.mark.xfail(reason="known")
def test_xfail(): assert False
def test_last(): pass
"""


def test_failures_errors_skips_and_xfails_are_recorded_with_their_outcomes(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_mixed=FAILING_SUITE)
    result = pytester.runpytest("--perf-record=record.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    record = load(pytester.path / "record.json")
    outcomes = {k.rsplit("::", 1)[1]: v["outcome"] for k, v in per_test(record).items()}
    assert outcomes == {
        "test_pass": "passed",
        "test_fail": "failed",
        "test_error": "error",
        "test_skip": "skipped",
        "test_xfail": "xfailed",
        "test_last": "passed",
    }
    assert record["run"]["exitstatus"] == 1
    validate(record)


def test_exitfirst_leaves_a_partial_but_valid_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mixed=FAILING_SUITE)
    pytester.runpytest("-x", "--perf-record=record.json")
    record = load(pytester.path / "record.json")
    assert sorted(k.rsplit("::", 1)[1] for k in record["tests"]["id"]) == ["test_fail", "test_pass"]
    validate(record)


@pytest.mark.processes
def test_ctrl_c_leaves_a_partial_but_valid_record_with_the_interrupted_status(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_before(): pass
        def test_interrupt(): raise KeyboardInterrupt
        def test_after(): pass
        """
    )
    result = pytester.runpytest_subprocess("--perf-record=record.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    record = load(pytester.path / "record.json")
    assert record["run"]["exitstatus"] == int(pytest.ExitCode.INTERRUPTED)
    assert (
        "test_ctrl_c_leaves_a_partial_but_valid_record_with_the_interrupted_status.py::test_before"
        in record["tests"]["id"]
    )
    validate(record)


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_test_that_kills_its_xdist_worker_is_recorded_as_crashed_and_the_rest_still_are(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_crash="""
        import os
        def test_ok_1(): pass
        def test_crash(): os._exit(3)
        def test_ok_2(): pass
        def test_ok_3(): pass
        """
    )
    pytester.runpytest_inprocess("-n", "2", "--perf-record=record.json")
    record = load(pytester.path / "record.json")
    crashed = per_test(record)["test_crash.py::test_crash"]
    assert crashed["outcome"] == "crashed"
    assert crashed["worker"] in ("gw0", "gw1")
    passed = [k for k, v in per_test(record).items() if v["outcome"] == "passed"]
    assert sorted(passed) == [
        "test_crash.py::test_ok_1",
        "test_crash.py::test_ok_2",
        "test_crash.py::test_ok_3",
    ]
    validate(record)


def test_a_missing_directory_is_created_and_the_file_gets_ordinary_permissions(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--perf-record=deep/er/record.json").assert_outcomes(passed=1)
    path = pytester.path / "deep/er/record.json"
    assert load(path)["tests"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    path.chmod(0o640)  # a later run keeps the mode the user chose
    pytester.runpytest("--perf-record=deep/er/record.json").assert_outcomes(passed=1)
    assert path.stat().st_mode & 0o777 == 0o640


def test_an_unwritable_path_is_a_usage_error_before_any_test_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "afile").write_text("not a directory")
    result = pytester.runpytest("--perf-record=afile/record.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --perf-record: afile/record.json: cannot be written: afile is not a directory"]
    )
    assert "passed" not in result.stdout.str()
    result = pytester.runpytest(f"--perf-record={pytester.path}")
    result.stderr.fnmatch_lines(["ERROR: --perf-record: *: is a directory; give a file path*"])


def test_the_ini_key_and_an_env_key_override_configure_the_record(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nperf_record = from-ini.json\nperf_env_key = tpu-v6e-runner\n")
    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest().assert_outcomes(passed=1)
    assert load(pytester.path / "from-ini.json")["env"]["key"] == "tpu-v6e-runner"
    pytester.runpytest("--perf-record=cli.json", "--perf-env-key=lab-1").assert_outcomes(passed=1)
    assert load(pytester.path / "cli.json")["env"]["key"] == "lab-1"


def test_the_env_key_names_the_emulated_hardware(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--perf-record=r.json", "--accel-emulate=tpu:8:TPU v6 lite")
    env = load(pytester.path / "r.json")["env"]
    assert env["key"] == "tpu/TPU v6 lite/x8"
    assert (env["platform"], env["device_kind"], env["device_count"]) == ("tpu", "TPU v6 lite", 8)


def test_commit_and_branch_come_from_ci_variables_then_git_then_null(tmp_path: Path) -> None:
    github = {"GITHUB_SHA": "abc123", "GITHUB_REF_NAME": "42/merge", "GITHUB_HEAD_REF": "feat"}
    assert vcs_info(github) == ("abc123", "feat")
    assert vcs_info({"CI_COMMIT_SHA": "def", "CI_COMMIT_REF_NAME": "main"}) == ("def", "main")
    assert vcs_info({}, cwd=str(tmp_path)) == (None, None)  # not a git checkout
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(tmp_path)], check=True)
    assert vcs_info({}, cwd=str(tmp_path)) == (None, None)  # no commit yet
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    commit, branch = vcs_info({}, cwd=str(tmp_path))
    assert branch == "trunk"
    assert commit is not None
    assert len(commit) == 40
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "--detach"], check=True)
    assert vcs_info({}, cwd=str(tmp_path)) == (commit, None)  # a detached HEAD: no branch


def test_reruns_of_one_node_id_become_attempts() -> None:
    table = TimingTable()
    row, created = table.row("t.py::test_x")
    assert created
    for when, outcome, duration in [
        ("setup", "passed", 0.1),
        ("call", "failed", 0.2),
        ("teardown", "passed", 0.0),
        ("setup", "passed", 0.1),
        ("call", "passed", 0.3),
        ("teardown", "failed", 0.0),
    ]:
        table.add(row, when, outcome, duration, start=1.0, stop=1.5)
    assert [a[0] for a in table.attempts(row)] == ["failed", "error"]
    assert table.calls[row] == 0.3  # the last attempt's
    assert table.attempts_json()["t.py::test_x"][0] == {
        "outcome": "failed",
        "setup": 0.1,
        "call": 0.2,
        "teardown": 0.0,
    }
    assert table.row("t.py::test_x") == (row, False)
    groups, columns = table.groups(table.module_ids, table.warmup(), {})
    assert (groups.ids, columns.ids) == ([], [])  # no module known: not grouped


@pytest.mark.processes
def test_concurrent_writers_never_expose_a_half_written_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n@pytest.mark.parametrize('i', range(300))\ndef test_many(i): pass\n"
    )
    shared = pytester.path / "shared.json"
    bad: list[str] = []
    stop = threading.Event()

    def read_continuously() -> None:
        while not stop.is_set():
            try:
                json.loads(shared.read_bytes())
            except FileNotFoundError:
                pass
            except ValueError as exc:
                bad.append(str(exc))

    reader = threading.Thread(target=read_continuously)
    reader.start()
    targets = [*(f"own{i}.json" for i in range(3)), *(["shared.json"] * 5)]
    try:
        run_concurrently(pytester, [[f"--perf-record={t}"] for t in targets], len(targets))
    finally:
        time.sleep(0.05)
        stop.set()
        reader.join()
    assert bad == []
    for path in [shared, *(pytester.path / f"own{i}.json" for i in range(3))]:
        record = load(path)
        assert len(record["tests"]["id"]) == 300
    assert not list(pytester.path.glob(".*.tmp"))  # no temp file left behind


def test_the_record_is_complete_without_the_terminal_reporter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_model=CLASS_SUITE)
    result = pytester.runpytest("-p", "no:terminal", "--perf-record=record.json")
    assert result.ret == pytest.ExitCode.OK
    record = load(pytester.path / "record.json")
    assert len(record["tests"]["id"]) == 6
    assert per_group(record, "classes")["test_model.py::TestModel"]["span"] >= 0.6
    validate(record)


@pytest.mark.parametrize(
    ("ini", "flag"),
    [
        pytest.param("accel_key = from-ini", "--accel-key=lab-2", id="accel-key"),
        pytest.param("perf_env_key = from-ini", "--perf-env-key=lab-2", id="its-0.2-name"),
    ],
)
def test_the_hardware_key_option_and_its_older_name_both_name_the_key(
    pytester: pytest.Pytester, ini: str, flag: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--perf-record=ini.json").assert_outcomes(passed=1)
    assert load(pytester.path / "ini.json")["env"]["key"] == "from-ini"
    pytester.runpytest("--perf-record=cli.json", flag).assert_outcomes(passed=1)
    assert load(pytester.path / "cli.json")["env"]["key"] == "lab-2"
    empty = pytester.runpytest("--perf-record=cli.json", "--accel-key= ")
    empty.stderr.fnmatch_lines(["ERROR: --accel-key: the key must not be empty"])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("warmup", ["t.py::test_gone"], "tests.warmup: 't.py::test_gone' is not one of"),
        ("quarantined", ["t.py::test_gone"], "tests.quarantined: 't.py::test_gone' is not"),
        (
            "attempts",
            {
                "t.py::test_gone": [
                    {"outcome": "failed", "setup": 0.0, "call": 0.1, "teardown": 0.0}
                ]
            },
            "tests.attempts: 't.py::test_gone' is not one of the record's tests",
        ),
        ("compiles", {"t.py::test_gone": 2}, "tests.compiles: 't.py::test_gone' is not one"),
        (
            "trace_cpu_wait",
            {"t.py::test_gone": 0.1},
            "tests.trace_cpu_wait: 't.py::test_gone' is not one",
        ),
    ],
)
def test_a_field_naming_a_test_the_record_lacks_is_named(
    field: str, value: Any, message: str
) -> None:
    from bench import synthetic
    from pytest_accel.files import InputError

    data = synthetic.record({"t.py::test_a": 0.1, "t.py::test_b": 0.2})
    data["tests"][field] = value
    with pytest.raises(InputError) as raised:
        check_record("r.json", data)
    assert str(raised.value).startswith(f"r.json: {message}")
    known = (
        {"t.py::test_a": value[next(iter(value))]} if isinstance(value, dict) else ["t.py::test_a"]
    )
    data["tests"][field] = known  # the same field naming a test it has: read
    assert check_record("r.json", data)["tests"]["id"] == ["t.py::test_a", "t.py::test_b"]
