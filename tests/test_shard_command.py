"""``pytest-accel shard`` prints exactly what each ``--accel-shard K/N`` run runs, from
the same inputs: the suite collected here, the same durations file, the same hardware
key; tests the file does not know and tests skipped here included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from pytest_accel.perf.formats.baseline import load_baseline
from tests.jax_runs import run_jax_suite

SUITE = """
import time
import pytest

class TestWarm:
    def test_one(self):
        time.sleep(0.03)

    def test_two(self):
        time.sleep(0.02)

def test_slow():
    time.sleep(0.06)

def test_quick():
    pass

@pytest.mark.tpu
def test_on_tpu():
    pass
"""

NEW_TESTS = """
def test_new_a():
    pass

def test_new_b():
    pass
"""


def command(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_accel", "shard", *args],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest_inprocess("--collect-only", "-q", *args)
    return [line for line in result.stdout.lines if "::" in line]


@pytest.mark.parametrize("by", ["class", "test"])
@pytest.mark.processes
def test_the_printed_plan_is_what_each_shard_runs_new_tests_and_skips_included(
    pytester: pytest.Pytester, by: str
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    for _ in range(2):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    pytester.makepyfile(test_later=NEW_TESTS)  # not in the baseline
    completed = command(
        pytester, "--durations", "b.json", "--splits", "2", "--by", by, "--format", "json"
    )
    assert completed.returncode == 0, completed.stderr
    plan: dict[str, Any] = json.loads(completed.stdout)
    printed = [shard["tests"] for shard in plan["shards"]]
    ran = [
        collected(
            pytester, "--perf-baseline=b.json", f"--accel-shard={k}/2", f"--accel-shard-by={by}"
        )
        for k in (1, 2)
    ]
    assert [sorted(tests) for tests in printed] == [sorted(tests) for tests in ran]
    everything = sorted(t for tests in printed for t in tests)
    assert everything == sorted(collected(pytester))
    assert "test_later.py::test_new_a" in everything
    assert "test_suite.py::test_on_tpu" in everything  # collected, skipped here


@pytest.mark.processes
def test_pytest_arguments_after_a_double_dash_select_as_in_the_shards(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    completed = command(
        pytester, "--durations", "b.json", "--splits", "2", "--format", "json", "--", "-k", "slow"
    )
    assert completed.returncode == 0, completed.stderr
    plan = json.loads(completed.stdout)
    assert sorted(t for shard in plan["shards"] for t in shard["tests"]) == [
        "test_suite.py::test_slow"
    ]


@pytest.mark.processes
def test_without_a_suite_here_the_command_says_where_to_run_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    os.remove(pytester.path / "test_suite.py")
    completed = command(pytester, "--durations", "b.json", "--splits", "2")
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        "pytest-accel: error: pytest collected no test to shard here; run this where the"
        " suite runs, with its arguments after --"
    ]
    # Without collecting: the tests the file knows, said to be only those.
    completed = command(pytester, "--durations", "b.json", "--splits", "2", "--without-collecting")
    assert completed.returncode == 0
    assert completed.stdout.startswith("shard 1/2: ")


COMPILING = """
import jax
import jax.numpy as jnp


def test_compiles_{n}():
    def heavy(x):
        for _ in range(200):  # unrolled: compiling takes far longer than running
            x = jnp.sin(x) * 1.001 + 0.{n}
        return x

    jax.jit(heavy)(jnp.ones(8)).block_until_ready()
"""


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_shards_are_balanced_on_wall_time_with_the_compilation_in_it(
    pytester: pytest.Pytester,
) -> None:
    """A JAX suite's time is mostly compiling: a plan on execution medians once said
    0.8 s a shard for shards that took 6.5 s and 8.2 s."""
    for n in (1, 2, 3, 4):
        pytester.makepyfile(**{f"test_jit_{n}": COMPILING.format(n=n)})
    run_jax_suite(
        pytester, "--perf-baseline=b.json", "--perf-update-baseline", "--perf-record=r.json"
    ).assert_outcomes(passed=4)
    record = json.loads((pytester.path / "r.json").read_text())
    warmup = set(record["tests"].get("warmup", []))
    compiled = record["tests"]["compile_seconds"]
    assert sum(s for t, s in compiled.items() if t not in warmup) > 0
    result = command(pytester, "--durations", "b.json", "--splits", "2", "--format", "json")
    assert result.returncode == 0, result.stderr
    plan: dict[str, Any] = json.loads(result.stdout)
    assert plan["basis"] == "wall"
    # What the baseline keeps of each test that did not pay its process's warm-up: its
    # wall seconds (setup, call and teardown) and its sample, the execution left after
    # its compilation; both with the seconds its call waited for a CPU taken out, so a
    # busy runner moves neither against the other (the record's compile seconds keep
    # the waits: beside these, load alone could break a comparison).
    (env,) = load_baseline(pytester.path / "b.json").envs.values()
    walls = env.walls()
    (run,) = env.runs
    # Its "tests" are those that did not run first in their process ("warmup" apart).
    execution = {ident: run.sample("tests", row) for row, ident in enumerate(env.ids["tests"])}
    later = sorted(execution)
    assert not warmup & set(later)
    assert later
    assert sorted(walls) == later
    for ident in later:
        executed = execution[ident]
        assert executed is not None, ident
        assert walls[ident] > executed, ident  # compiling is in it
    # Every test but the first in its process is estimated at its wall time, compiling
    # included: the estimates hold the compilation, not just the execution left after it.
    assert sorted(t for shard in plan["shards"] for t in shard["tests"]) == sorted(compiled)
    for shard in plan["shards"]:
        theirs = [t for t in shard["tests"] if t not in warmup]
        at_wall = sum(walls[t] for t in theirs)
        if len(theirs) == len(shard["tests"]):
            assert shard["estimated"] == pytest.approx(at_wall, abs=1e-5), shard
        else:  # and the warm-up at an estimate of its own
            assert shard["estimated"] >= at_wall - 1e-5, shard
    text = command(pytester, "--durations", "b.json", "--splits", "2")
    assert "wall time as measured (setup, call and teardown, JAX compilation included)" in (
        text.stdout
    )
