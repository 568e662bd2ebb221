"""Real JAX on CPU host devices: multi_device tests run, and see what they asked for."""

from __future__ import annotations

import pytest

MULTI_DEVICE_SUITE = """
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
def test_accel_cpu_devices_gives_jax_the_host_devices_even_when_a_conftest_imports_jax(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("import jax  # imported before any test, as real suites do\n")
    pytester.makepyfile(MULTI_DEVICE_SUITE)
    result = pytester.runpytest_subprocess("--accel-cpu-devices=8")
    result.stdout.fnmatch_lines(["accel: cpu x8 via default*"])
    result.assert_outcomes(passed=2, skipped=1)


@pytest.mark.requires("jax", "xdist")
def test_accel_cpu_devices_reaches_xdist_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MULTI_DEVICE_SUITE)
    result = pytester.runpytest_subprocess("--accel-cpu-devices=8", "-n", "2")
    result.assert_outcomes(passed=2, skipped=1)
