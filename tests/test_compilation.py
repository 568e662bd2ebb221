"""Where the suite uses JAX, each test's XLA compilations and their seconds are counted
(a real ``jax.monitoring`` listener, on CPU), serial and under pytest-xdist; the run's
compilation share and the persistent cache's hits show in the terminal, the record, the
job summary and the HTML report."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

from tests.jax_runs import run_serial_or_xdist

SCHEMA = json.loads(files("pytest_accel").joinpath("schemas/record.schema.json").read_text())
pytestmark = pytest.mark.requires("jax")

SUITE = """
import jax
import jax.numpy as jnp
import pytest

@pytest.mark.parametrize("n", [2, 3, 4])
def test_compiles_a_new_shape(n):
    jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((n, 5))).block_until_ready()

def test_pure_python():
    assert sum(range(10)) == 45
"""

CACHE = """
import jax

jax.config.update("jax_compilation_cache_dir", {cache!r})
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
"""


def record(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())
    return data


@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_each_tests_compilations_and_their_seconds_are_recorded(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_jax=SUITE)
    result = run_serial_or_xdist(
        pytester, "--perf-record=r.json", "--accel-report=p.html", *workers
    )
    assert result.ret == 0
    jsonschema.validate(record(pytester), SCHEMA)
    tests = record(pytester)["tests"]
    for n in (2, 3, 4):
        ident = f"test_jax.py::test_compiles_a_new_shape[{n}]"
        assert tests["compiles"][ident] >= 1
        assert tests["compile_seconds"][ident] > 0
        # tracing is a part of the compile seconds, never more
        assert 0 < tests["trace_seconds"][ident] <= tests["compile_seconds"][ident]
    assert tests["compiles"]["test_jax.py::test_pure_python"] == 0
    assert tests["trace_seconds"]["test_jax.py::test_pure_python"] == 0
    assert tests["compile_seconds"]["test_jax.py::test_pure_python"] == 0
    compilation = record(pytester)["compilation"]
    assert compilation["count"] == sum(tests["compiles"].values())
    assert compilation["seconds"] == pytest.approx(sum(tests["compile_seconds"].values()), abs=1e-5)
    assert 0 < compilation["share"] <= 1
    assert (compilation["cache_hits"], compilation["cache_misses"]) == (0, 0)
    assert 0 < compilation["backend_seconds"] < compilation["seconds"]
    assert compilation["trace_seconds"] == pytest.approx(
        sum(tests["trace_seconds"].values()), abs=1e-5
    )
    # What the persistent cache can save is the backend's compiling, not tracing.
    saves = f"{compilation['backend_seconds']:.1f}"
    result.stdout.fnmatch_lines(
        [
            "compilation: *% of test time (* compilation(s), * s: * s tracing, * s in the"
            " backend; the persistent compilation cache is off (jax_compilation_cache_dir):"
            f" up to {saves} s a run to save, the backend's compiling)"
        ]
    )
    assert "% of test time (" in (pytester.path / "p.html").read_text()


@pytest.mark.processes
def test_the_persistent_caches_hits_are_counted_on_the_second_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_jax=SUITE)
    pytester.makeconftest(CACHE.format(cache=str(pytester.path / "jax-cache")))
    pytester.runpytest_subprocess("--perf-record=r.json").assert_outcomes(passed=4)
    first = record(pytester)["compilation"]
    assert first["cache_misses"] >= 3
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest_subprocess("--perf-record=r.json")
    second = record(pytester)["compilation"]
    assert second["cache_hits"] >= 3
    result.stdout.fnmatch_lines(["compilation: *; persistent cache: * hit(s), * miss(es))"])
    assert "### pytest-accel compilation" in summary.read_text()


def test_the_listener_is_gone_after_an_in_process_run(pytester: pytest.Pytester) -> None:
    monitoring = pytest.importorskip("jax._src.monitoring")  # where jax keeps them
    listeners = (monitoring.get_event_duration_listeners, monitoring.get_event_listeners)
    before = [len(get()) for get in listeners]
    pytester.makepyfile(test_jax=SUITE)
    pytester.runpytest_inprocess("--perf-record=r.json").assert_outcomes(passed=4)
    assert [len(get()) for get in listeners] == before
    assert record(pytester)["tests"]["compiles"]["test_jax.py::test_pure_python"] == 0
