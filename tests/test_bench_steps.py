"""``bench/session_steps.py`` times the plugin's steps by wrapping its functions by name:
a renamed function must fail here, not leave a step out of docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from bench.session_steps import STEPS, STEPS_ENV, step_target

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("step", "module", "path"), STEPS, ids=[s[0] for s in STEPS])
def test_every_step_the_bench_times_names_a_function_of_the_plugin(
    step: str, module: str, path: str
) -> None:
    owner, name = step_target(module, path)
    assert callable(getattr(owner, name, None)), f"{step}: {module}.{path} is not a function"


@pytest.mark.processes
def test_the_probe_adds_up_each_step_of_a_run_with_everything_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    steps = pytester.path / "steps.json"
    monkeypatch.setenv(STEPS_ENV, str(steps))
    pytester.makepyfile(
        test_a="import pytest\n"
        "class TestC:\n    def test_m(self): pass\n"
        "@pytest.mark.tpu\ndef test_t(): pass\n"
        "def test_f(): pass\n"
    )
    options = ["--perf-baseline=b.json", "--flaky-history=h.json", "--perf-record=r.json"]
    first = pytester.runpytest_subprocess("-p", "pytest_accel", *options, "--perf-update-baseline")
    first.assert_outcomes(passed=2, skipped=1)
    result = pytester.runpytest_subprocess(
        "-p", "bench.session_steps", "-p", "pytest_accel", *options
    )
    result.assert_outcomes(passed=2, skipped=1)
    found = json.loads(steps.read_text())
    assert set(found["steps"]) == {step for step, _, _ in STEPS}
    assert all(seconds > 0 for seconds in found["steps"].values())
    assert set(found["raised"]) == set(found["steps"])  # MB each raised the peak by
    assert all(mb >= 0 for mb in found["raised"].values())
    assert "pytest_accel.perf.collector" in found["modules"]
    assert json.loads((pytester.path / "r.json").read_bytes())["tests"]["id"] == [
        "test_a.py::TestC::test_m",
        "test_a.py::test_t",
        "test_a.py::test_f",
    ]


@pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="needs Linux's schedstat"
)
@pytest.mark.processes
def test_the_instruction_bench_switches_off_the_step_it_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench/instructions.py --steps`` counts a step as the run with it less the run
    without it (``bench/without_step.py``): each setting must switch off that step alone."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    # test_f longer than waits.SHORT_CALL, so the call's wait is read at its end too;
    # test_p far shorter (a few microseconds), read again only where "short-call" says.
    pytester.makepyfile(
        test_a="import time\n\ndef test_f():\n    time.sleep(0.01)\n\ndef test_p():\n    pass\n"
    )
    plugins = ["-p", "bench.without_step", "-p", "pytest_accel", "--perf-record=r.json"]
    records = {}
    # "gc" only calls gc.disable(): not worth a session of its own.
    for without in ("", "waits", "finish", "call-body", "put", "closing-read"):
        monkeypatch.setenv("PYTEST_ACCEL_WITHOUT", without)
        pytester.runpytest_subprocess(*plugins, "-k", "test_f").assert_outcomes(passed=1)
        record = pytester.path / "r.json"
        records[without] = json.loads(record.read_bytes()) if record.exists() else None
        record.unlink(missing_ok=True)
    assert records[""] is not None
    assert "cpu_wait" in records[""]["tests"]
    assert records["waits"] is not None
    assert "cpu_wait" not in records["waits"]["tests"]
    assert records["finish"] is None  # nothing at the session's end: no record
    # Each of the clock's parts off: the call's wait never reaches the record.
    for part in ("call-body", "put", "closing-read"):
        written = records[part]
        assert written is not None
        assert "cpu_wait" not in written["tests"], part
    # No call too short to be read again: the short call's wait is in the record.
    monkeypatch.setenv("PYTEST_ACCEL_WITHOUT", "short-call")
    pytester.runpytest_subprocess(*plugins, "-k", "test_p").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "r.json").read_bytes())["tests"]["cpu_wait"] == [0.0]
    monkeypatch.setenv("PYTEST_ACCEL_WITHOUT", "gc,fold")
    refused = pytester.runpytest_subprocess(*plugins)
    assert refused.ret != 0
    assert "PYTEST_ACCEL_WITHOUT='gc,fold': expected one of finish, waits, call-body" in (
        refused.stderr.str()
    )


@pytest.mark.processes
def test_the_instruction_bench_runs_each_feature_variant_with_its_files_in_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/instructions.py --features`` runs overhead.py's feature set: a variant's
    environment names its files as its arguments do (the job summary's
    ``$GITHUB_STEP_SUMMARY``), in the run's own directory; and the table gives each
    variant's instructions over the recording run in milliseconds at a bare run's pace."""
    from bench import instructions
    from bench.overhead import VARIANT_SETS

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text("def test_f(): pass\n")
    summary = next(v for v in VARIANT_SETS["features"] if "GITHUB_STEP_SUMMARY" in v.env)
    instructions.run(summary, summary.prepare, suite, tmp_path, counted=False)
    instructions.run(summary, summary.args, suite, tmp_path, counted=False)
    assert json.loads((tmp_path / "record.json").read_bytes())["tests"]["id"]
    assert "1 test(s) compared" in (tmp_path / "summary.md").read_text()
    assert not list(tmp_path.glob("{tmp}*"))

    counts = [1_000_000_000, 1_200_000_000, 1_500_000_000, 1_400_000_000]
    capsys.readouterr()
    instructions._features_table(VARIANT_SETS["features"][:4], counts, 1e-9)  # 1 ns each
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[2:] == [
        "| bare pytest | 1,000 | 1.000x | -500 | -500 |",
        "| pytest-accel (no option) | 1,200 | 1.200x | -300 | -300 |",
        "| --perf-record | 1,500 | 1.500x | +0 | +0 |",
        "| --perf-record, compile listener blocked | 1,400 | 1.400x | -100 | -100 |",
    ]


@pytest.mark.processes
def test_the_suite_probe_notes_each_subprocess_a_test_starts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/suite_subprocesses.py``: what docs/benchmarks.md says the README's test
    command spends in subprocesses is this plugin's log, summed."""
    from bench.suite_subprocesses import main

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    log = pytester.path / "log" / "sp"
    log.parent.mkdir()
    monkeypatch.setenv("SUBPROCESS_LOG", str(log))
    pytester.makepyfile(
        test_a="import subprocess, sys\n"
        "def test_two():\n"
        "    for _ in range(2):\n"
        "        subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "def test_none(): pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "bench.suite_subprocesses")
    result.assert_outcomes(passed=2)
    lines = [line.split("\t") for f in log.parent.iterdir() for line in f.read_text().splitlines()]
    assert [(test, command.split()[1:]) for _, test, command in lines] == [
        ("test_a.py::test_two", ["-c", "pass"])
    ] * 2
    capsys.readouterr()  # pytester's own lines
    assert main([str(log)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 subprocesses of 1 tests, ")
    assert "test_a.py::test_two" in out


def run_probe(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    plugin: str,
    log_env: str,
    suite: str,
) -> tuple[pytest.RunResult, Path, Any]:
    """``suite`` run with the bench plugin ``plugin``, logging under ``log_env``: the run,
    the log's prefix, and the one log it wrote, parsed."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    log = pytester.path / "log" / "probe"
    log.parent.mkdir()
    monkeypatch.setenv(log_env, str(log))
    pytester.makepyfile(test_a=suite)
    result = pytester.runpytest_subprocess("-p", plugin, "-p", "no:randomly")
    (written,) = log.parent.iterdir()
    return result, log, json.loads(written.read_text())


@pytest.mark.processes
def test_the_suite_cpu_probe_puts_a_childs_cpu_on_the_test_that_waited_for_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/suite_cpu.py``: docs/benchmarks.md's CPU figures for the README's test
    command are this plugin's log, summed."""
    from bench.suite_cpu import LOG_ENV, main

    suite = (
        "import gc, subprocess, sys\n"
        "def test_collects():\n"  # garbage enough that a full collection takes a while
        "    garbage = [[[]] for _ in range(30_000)]\n"
        "    for one in garbage: one.append(one)\n"
        "    del garbage, one\n"
        "    gc.collect()\n"
        "def test_child():\n"  # a tenth of a second of CPU or more, in a child
        "    code = 'import time\\nend = time.process_time() + 0.1\\n'"
        " 'while time.process_time() < end: pass'\n"
        "    subprocess.run([sys.executable, '-c', code], check=True)\n"
        "def test_none(): pass\n"
    )
    result, log, written = run_probe(pytester, monkeypatch, "bench.suite_cpu", LOG_ENV, suite)
    result.assert_outcomes(passed=3)
    rows = {row[0]: row for row in written}
    assert set(rows) == {
        "test_a.py::test_collects",
        "test_a.py::test_child",
        "test_a.py::test_none",
    }
    assert rows["test_a.py::test_child"][4] >= 0.1  # the child's CPU, once waited for
    assert rows["test_a.py::test_none"][4] == 0.0  # it started no process
    assert all(row[2] >= 0 and row[3] >= 0 for row in rows.values())
    # The collection's CPU is the test's that collected, a part of its own.
    collecting = rows["test_a.py::test_collects"]
    assert 0 < collecting[5] <= collecting[3]
    assert rows["test_a.py::test_none"][5] < collecting[5]
    capsys.readouterr()  # pytester's own lines
    assert main([str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("3 tests in 1 process(es), ")
    assert "of it collecting garbage)" in out[0]
    costliest = out[out.index("the tests with the most CPU (own + children):") + 1]
    assert costliest.endswith(" test_a.py::test_child")


GC_SUITE = """
import gc
import threading


def test_collects_here_and_elsewhere():
    gc.collect()
    elsewhere = threading.Thread(target=gc.collect)
    elsewhere.start()
    elsewhere.join()
"""


@pytest.mark.processes
def test_the_gc_threads_probe_tells_the_tests_thread_from_another(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/gc_threads.py``: docs/benchmarks.md's count of a real suite's full
    collections on threads other than the tests'."""
    from bench.gc_threads import LOG_ENV, main

    result, log, noted = run_probe(pytester, monkeypatch, "bench.gc_threads", LOG_ENV, GC_SUITE)
    result.assert_outcomes(passed=1)
    assert [on_tests_thread for on_tests_thread, _ in noted].count(False) == 1
    assert [on_tests_thread for on_tests_thread, _ in noted].count(True) >= 1
    capsys.readouterr()  # pytester's own lines
    assert main([str(log)]) == 0
    out = capsys.readouterr().out.strip()
    summary = r"1 test process\(es\): [1-9]\d* full collection\(s\) on the tests' thread"
    assert re.fullmatch(summary + r" \([\d.]+ s\), 1 on other threads \([\d.]+ s\)", out)


@pytest.mark.processes
def test_the_process_probe_logs_each_python_process_and_sums_them_by_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench/process_cpu``: every Python process that inherits the probe's
    ``PYTHONPATH`` logs its CPU at exit; the first process and its direct children are
    the run's own, any other one a test's."""
    import subprocess
    import sys

    from bench import process_cpu

    log = tmp_path / "log"
    log.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(PROCESS_CPU_LOG=str(log), PYTHONPATH=str(ROOT / "bench" / "process_cpu"))
    grandchild = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'])"
    child = "import os, subprocess, sys\n" + (
        f"subprocess.run([sys.executable, '-c', {grandchild!r}], check=True,"
        " env={**os.environ, 'PYTEST_CURRENT_TEST': 'tests/test_x.py::test_y (call)'})"
    )
    subprocess.run([sys.executable, "-c", child], env=env, check=True)
    logged = [path.read_text().split("\t") for path in log.iterdir()]
    assert sorted(fields[5] for fields in logged) == ["", *["tests/test_x.py::test_y"] * 2]
    outer = next(fields for fields in logged if not fields[5])
    assert outer[7] not in {fields[6] for fields in logged}
    assert process_cpu.main([str(log)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| other")]
    assert sorted(row.rsplit(" | ", 1)[0] for row in rows) == [
        "| other Python a test started | 1",
        "| other Python of the run | 2",
    ]


def test_the_rewritten_imports_bench_reads_pytests_cached_modules_both_ways(
    tmp_path: Path,
) -> None:
    """``bench/rewritten_imports.py`` times pytest's own pycs (``-pytest-`` in the
    name, a 16-byte header) of a package, and only those."""
    import marshal
    import sys

    from bench.rewritten_imports import unmarshal_times

    (tmp_path / "module.py").write_text("VALUE = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    code = compile("VALUE = 1\n", "module.py", "exec")
    tag = sys.implementation.cache_tag
    (cache / f"module.{tag}-pytest-9.2.0.pyc").write_bytes(b"\0" * 16 + marshal.dumps(code))
    (cache / f"module.{tag}.pyc").write_bytes(b"not pytest's")  # read by importlib only
    modules, *_ = unmarshal_times(tmp_path, rounds=1)  # unmarshals it both ways
    assert modules == 1


@pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="needs Linux's schedstat"
)
@pytest.mark.processes
def test_the_lean_recorder_records_what_the_record_does_per_test_and_each_part_switches_off(
    tmp_path: Path,
) -> None:
    """``bench/instructions.py --lean`` counts a floor under the record's cost: it must
    record the same per-test data (phases, outcome, start and stop, class, module, the
    call's CPU wait), and each variant must switch off only its part."""
    from bench import instructions

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text(
        "import time, pytest\n"
        "class TestC:\n    def test_m(self): pass\n"
        "def test_slow():\n    time.sleep(0.01)\n"
        "@pytest.mark.skip(reason='no')\ndef test_skipped(): pass\n"
    )
    lean = {
        v.env.get("LEAN_RECORDER_WITHOUT", "") or v.env.get("LEAN_RECORDER_WITH", ""): v
        for v in instructions.LEAN_SET[3:]
    }
    assert set(lean) == {"", "record", "clock", "end"}
    written = tmp_path / "lean-record.json"
    records = {}
    for without, variant in lean.items():
        instructions.run(variant, variant.args, suite, tmp_path, counted=False)
        records[without] = json.loads(written.read_bytes()) if written.exists() else None
        written.unlink(missing_ok=True)
    record = records[""]
    assert record is not None
    tests = record["tests"]
    assert tests["id"] == [
        "suite/test_a.py::TestC::test_m",
        "suite/test_a.py::test_slow",
        "suite/test_a.py::test_skipped",
    ]
    assert tests["outcome"] == ["passed", "passed", "skipped"]
    assert tests["class"] == ["suite/test_a.py::TestC", None, None]
    assert tests["module"] == ["suite/test_a.py"] * 3
    # Times in integer microseconds, starts and stops from the session's start.
    assert tests["call"][1] >= 10_000
    assert tests["call"][2] == 0  # a skipped test has no call
    assert all(
        isinstance(value, int)
        for column in ("setup", "call", "teardown", "start", "stop")
        for value in tests[column]
    )
    assert all(stop >= start > 0 for start, stop in zip(tests["start"], tests["stop"], strict=True))
    assert tests["start"] == sorted(tests["start"])
    assert record["origin"] > 1e9  # the session's start, seconds since the epoch
    assert isinstance(tests["cpu_wait"][1], float)  # 10 ms: read at its end too
    assert tests["cpu_wait"][2] is None  # a skipped test's call never ran
    assert records["clock"] is not None
    assert records["clock"]["tests"]["cpu_wait"] == [None, None, None]
    assert records["clock"]["tests"]["id"] == tests["id"]
    assert records["end"] is None  # nothing at the session's end: no file
    # With what the record writes beyond the floor's columns: the same tests, and more.
    fuller = records["record"]
    assert fuller is not None
    own = fuller["tests"]
    for column in ("id", "outcome", "class", "module"):  # the times differ run to run
        assert own[column] == tests[column], column
    assert own["total"] == list(
        map(sum, zip(own["setup"], own["call"], own["teardown"], strict=True))
    )
    assert own["warmup"] == ["suite/test_a.py::TestC::test_m"]
    assert fuller["classes"]["id"] == ["suite/test_a.py::TestC"]
    assert fuller["modules"]["tests"] == [3]
    assert fuller["modules"]["whole"] == [False]  # a test skipped in it
    assert fuller["reran"] == 0
    assert fuller["odd"] == 0


@pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="needs Linux's schedstat"
)
@pytest.mark.processes
def test_the_clock_calls_bench_finds_each_hook_it_counts(tmp_path: Path) -> None:
    """``bench/clock_calls.py`` calls the hooks of a live session bare: each variant's
    session must find the call driver keeping its figures in the process, pytest's
    runner, and a plain report hook to stand beside, or it stops (and counts nothing)."""
    from bench import clock_calls

    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    for variant in clock_calls.VARIANTS:
        assert clock_calls.count(variant, 3, tmp_path, counted=False) == 0
    assert json.loads((tmp_path / "r.json").read_bytes())["tests"]["id"] == [
        "test_one.py::test_one"
    ]
    with pytest.raises(ValueError, match="expected one of nothing, noop"):
        clock_calls.count("no such variant", 3, tmp_path, counted=False)
