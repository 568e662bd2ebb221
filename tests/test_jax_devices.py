"""Real JAX on CPU host devices: multi_device tests run, and see what they asked for."""

from __future__ import annotations

import os

import pytest

MULTI_DEVICE_SUITE = """
import os

import pytest

@pytest.mark.multi_device(8)
def test_sees_eight_devices():
    import jax
    assert jax.device_count() == 8

@pytest.mark.multi_device(16)
def test_needs_sixteen():
    raise AssertionError("must have been skipped")

@pytest.mark.multi_device(8)
def test_shards_an_array_over_all_devices():
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(jax.devices(), ("x",))
    x = jax.device_put(jnp.arange(64.0), NamedSharding(mesh, PartitionSpec("x")))
    assert len(x.addressable_shards) == 8
    assert float(jnp.sum(x * 2)) == 4032.0
"""


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_multi_device_runs_with_jax_num_cpu_devices_and_skips_beyond_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "8")
    pytester.makepyfile(MULTI_DEVICE_SUITE)
    result = pytester.runpytest_subprocess("-rs")
    result.stdout.fnmatch_lines(["accel: cpu x8 via env JAX_PLATFORMS=cpu*"])
    result.stdout.fnmatch_lines(
        [
            "*requires 16 devices (detected: cpu x8 via env JAX_PLATFORMS=cpu);"
            " --accel-cpu-devices=16 runs it here"
        ]
    )
    result.assert_outcomes(passed=2, skipped=1)


@pytest.mark.requires("jax")
@pytest.mark.processes
def test_accel_cpu_devices_gives_jax_the_host_devices_even_when_a_conftest_imports_jax(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("import jax  # imported before any test, as real suites do\n")
    pytester.makepyfile(MULTI_DEVICE_SUITE)
    result = pytester.runpytest_subprocess("--accel-cpu-devices=8")
    result.stdout.fnmatch_lines(["accel: cpu x8 via default*"])
    result.assert_outcomes(passed=2, skipped=1)


@pytest.mark.requires("jax", "xdist")
@pytest.mark.processes
def test_accel_cpu_devices_reaches_xdist_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MULTI_DEVICE_SUITE)
    result = pytester.runpytest_subprocess("--accel-cpu-devices=8", "-n", "2")
    result.assert_outcomes(passed=2, skipped=1)


@pytest.mark.parametrize("ending", ["a session", "--version twice", "a broken conftest"])
def test_the_device_variables_end_with_the_session_even_one_never_configured(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """``--accel-cpu-devices`` sets JAX's variables for the process and its children, and
    an in-process session (``pytest.main``, pytester) gives them back as it found them,
    also one that ends before it configures, where no ``pytest_unconfigure`` is called:
    ``--version --version`` prints and ends, and a conftest that cannot be imported
    ends the session after the options were read.  A variable left behind had made later
    sessions in the process see eight devices."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=false")
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)
    if ending == "a broken conftest":
        pytester.makeconftest("raise ImportError('a conftest that cannot load')")
    pytester.makepyfile(
        """
        import os

        def test_sees_the_variables():
            assert os.environ["JAX_NUM_CPU_DEVICES"] == "8"
            assert os.environ["XLA_FLAGS"] == (
                "--xla_cpu_use_thunk_runtime=false --xla_force_host_platform_device_count=8"
            )
        """
    )
    twice = ["--version", "--version"] if ending == "--version twice" else []
    result = pytester.runpytest_inprocess("--accel-cpu-devices=8", *twice)
    if ending == "a session":
        result.assert_outcomes(passed=1)
    elif ending == "a broken conftest":
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "a conftest that cannot load" in result.stderr.str()
    else:
        assert result.ret == 0
        assert "pytest-accel" in result.stdout.str() + result.stderr.str()
    assert "JAX_NUM_CPU_DEVICES" not in os.environ
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_thunk_runtime=false"
