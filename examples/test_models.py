"""An example ML suite: one file that runs on CPU runners and on accelerator runners.

Run it with ``scripts/dev examples`` (see README.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

# JAX imported at the top, as a JAX suite does: its import is collection's, not the
# first test's (a second of CPU here, more than the test itself).
import jax.numpy as jnp
import pytest


@pytest.fixture(scope="class")
def compiled_model() -> Iterator[str]:
    time.sleep(0.05)  # stands in for an expensive compile shared by the class
    yield "model"


class TestMatmul:
    """Class-based tests share a class-scoped fixture, like setUpClass suites do."""

    @pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
    def test_matmul_shapes(self, compiled_model: str, dtype: str) -> None:
        x = jnp.ones((8, 8), dtype=dtype)
        assert (x @ x).shape == (8, 8)

    def test_reduction(self, compiled_model: str) -> None:
        assert float(jnp.arange(10.0).sum()) == 45.0


@pytest.mark.multi_device(8)
def test_shard_array_over_all_devices() -> None:
    """Real multi-device JAX: runs on CPU with --accel-cpu-devices=8."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(jax.devices(), ("data",))
    x = jax.device_put(jnp.arange(32.0), NamedSharding(mesh, PartitionSpec("data")))
    assert len(x.addressable_shards) == jax.device_count()
    assert float(jnp.sum(x)) == 496.0


@pytest.mark.tpu_ci
def test_flash_attention_kernel_on_tpu() -> None:
    import jax

    assert jax.default_backend() == "tpu"


@pytest.mark.accel("tpu", min_devices=8, kind="TPU v5*")
def test_pod_slice_collective() -> None:
    import jax

    assert jax.device_count() >= 8


@pytest.mark.multi_gpu(4)
def test_nccl_all_reduce() -> None:
    import jax

    assert jax.device_count() >= 4


@pytest.mark.cuda
def test_triton_kernel() -> None:
    import jax

    assert jax.default_backend() == "gpu"


@pytest.mark.rocm
def test_rocm_hipblaslt() -> None:
    import jax

    assert jax.default_backend() == "gpu"


@pytest.mark.cpu_only
def test_host_callback_reference() -> None:
    assert sum(range(10)) == 45


@pytest.mark.entry
def test_entry_point_imports() -> None:
    import jax  # noqa: F401


@pytest.mark.slow
def test_slow_convergence() -> None:
    time.sleep(0.2)


@pytest.mark.ray
def test_ray_data_pipeline() -> None:
    import ray

    assert ray.is_initialized() in (True, False)


@pytest.mark.perf(threshold=1.5)
def test_step_time_budget() -> None:
    time.sleep(0.12)


_ATTEMPTS: list[int] = []


def test_data_loader_warmup() -> None:
    """Flaky on purpose: fails its first attempt, passes when --flaky-reruns reruns it."""
    _ATTEMPTS.append(1)
    assert len(_ATTEMPTS) > 1, "loader not warm yet (first attempt)"


def test_bf16_numerics_match_reference() -> None:
    """Broken on purpose and listed in examples/quarantine.txt: it runs, it fails, the
    failure is shown, and it does not fail the run."""

    x = jnp.asarray(1 / 3, dtype=jnp.bfloat16)
    assert float(x) == 1 / 3, "bfloat16 rounding differs from float64"
