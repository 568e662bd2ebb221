"""Running a generated JAX suite in this process, as a suite whose conftest imports JAX
runs: JAX is imported before pytest configures the plugin.

A fresh pytest process for each run pays Python, pytest and JAX's import again (about
1.2 CPU-seconds, most of a short JAX run).  Here each run starts with JAX's caches
cleared, and pytester drops the generated modules after each run, so every function is
a new object, traced and compiled as in a new process.  What only a fresh process shows
is tested in fresh processes: JAX imported after the plugin started (test_compile_aware's
import test), the process's warm-up, the persistent compilation cache
(test_compilation), JAX's device count (test_jax_devices) and xdist's workers.
"""

from __future__ import annotations

import sys

import pytest

# An in-process run drops every module it imported first.  A JAX module imported again
# in a later run would be a second copy beside the first one's objects, so the runs
# here must import none: ``import_jax`` imports what a run uses, and each run checks.
_FAMILIES = ("jax", "jaxlib", "ml_dtypes", "opt_einsum", "scipy")


class _NoNewJaxModule:
    def __init__(self, before: set[str]) -> None:
        self.before = before
        self.new: list[str] = []

    def pytest_sessionfinish(self) -> None:
        self.new = sorted(
            name for name in set(sys.modules) - self.before if name.partition(".")[0] in _FAMILIES
        )


def import_jax() -> None:
    """JAX and what its jit, lowering and compiling import on first use, where it is
    installed.  Called by the root conftest: a module imported during a test that uses
    ``pytester`` is dropped at its end, and jaxlib's extension cannot load twice."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:  # the release matrix's runs without the jax extra
        return
    lowered = jax.jit(lambda x: jnp.sin(x) + 1).lower(jnp.ones(2))
    lowered.as_text()
    lowered.compile()(jnp.ones(2)).block_until_ready()


def run_jax_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytester.runpytest_inprocess`` after JAX's caches are cleared."""
    import jax

    jax.clear_caches()  # type: ignore[no-untyped-call]
    check = _NoNewJaxModule(set(sys.modules))
    result = pytester.runpytest_inprocess(*args, plugins=[check])
    assert not check.new, f"the run imported JAX modules anew: {check.new}"
    return result


def run_serial_or_xdist(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A generated JAX suite serially in this process (``run_jax_suite``), or under
    xdist (``-n`` in ``args``) with the controller in this process: the workers are the
    fresh processes, and the controller never imports the suite's modules.  A fresh
    controller process would add a third of a CPU-second and tell nothing more."""
    if "-n" in args:
        return pytester.runpytest_inprocess(*args)
    return run_jax_suite(pytester, *args)
