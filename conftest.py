"""Shared fixtures for pytest-accel's own tests."""

from __future__ import annotations

# In-process pytester runs drop modules first imported during the run; numpy's C core
# cannot be imported a second time in one process, so import it before any such run.
import numpy  # noqa: F401

import pytest_accel
from tests import kept_distributions
from tests.jax_runs import import_jax

# The same for JAX, which tests/jax_runs.py runs generated suites with in this process.
import_jax()

pytest_plugins = ["tests.fakesys", "tests.processes"]


def _import_the_plugin_whole() -> None:
    """Every module of the plugin, once: an in-process run would import those its
    features load lazily afresh each time (a tenth of a second a run, a thousand runs).
    What a run imports is tested in fresh processes (test_loading, test_cli_imports)."""
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(pytest_accel.__path__, "pytest_accel."):
        if module.name != "pytest_accel.__main__":
            importlib.import_module(module.name)


_import_the_plugin_whole()
kept_distributions.keep()  # each in-process session reads the installed packages: once


import gc  # noqa: E402
import importlib.util  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


def _spare_the_collector() -> None:
    """What the imports above made lives as long as the process: out of the garbage
    collector's sight (``gc.freeze``), each full collection no longer walks JAX's,
    numpy's and pytest's objects, and young collections come every 10,000 allocations
    instead of 700.  A thousand in-process sessions allocate a great deal: their
    collections took 20.5-21.1 CPU-s of the README's test command, 6.4 with this
    (docs/benchmarks.md).
    No test relies on when a collection comes; those of the plugin's pauses call
    ``gc.collect`` themselves."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


_spare_the_collector()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*modules): skip unless the modules are installed (the release matrix runs"
        " the suite without the jax extra and without pytest-xdist)",
    )
    # xdist's ``-n`` without a ``--dist`` of the user's: idle workers take tests queued on
    # a busy one (``worksteal``), not ``load``, which keeps each test where it was sent.
    # There a run of long tests queued late (test_store.py's, test_architecture.py's)
    # kept one worker busy 6-15 s after the others had run out (docs/benchmarks.md).
    args = config.invocation_params.args
    chosen = any(arg in ("--dist", "-d") or arg.startswith("--dist=") for arg in args)
    if getattr(config.option, "dist", None) == "load" and not chosen:
        config.option.dist = "worksteal"


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: runs without xdist too
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores.  A sixth of a worker's time here is
    spent waiting, not computing: the generated suites sleep to be slow, and tests wait
    for the processes they start.  On 2 cores a third worker fills those waits: the
    README's test command took 103 s against 117 s, run after run (docs/benchmarks.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.hookimpl(trylast=True)  # after tests/processes.py has marked what starts a process
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_what_needs_a_missing_module(items)
    if not (config.getoption("failedfirst", False) or config.getoption("newfirst", False)):
        _long_modules_first(items)


def _skip_what_needs_a_missing_module(items: list[pytest.Item]) -> None:
    installed: dict[str, bool] = {}
    for item in items:
        for mark in item.iter_markers("requires"):
            missing = [
                name
                for name in mark.args
                if not installed.setdefault(name, importlib.util.find_spec(name) is not None)
            ]
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))


def _long_modules_first(items: list[pytest.Item]) -> None:
    """The modules whose tests start the most processes first, each module's tests
    together and in their order: the long tests are handed out first, so that the
    last ones xdist hands out, while the other workers end, are short."""
    # Imported here, not at the top: pytest_plugins must import tests.processes first,
    # so that its asserts are rewritten (-W error makes the warning an error).
    from tests.processes import MARK

    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.partition("::")[0], []).append(item)
    starting = {
        name: sum(item.get_closest_marker(MARK) is not None for item in tests)
        for name, tests in modules.items()
    }
    ordered = sorted(modules, key=lambda name: -starting[name])  # stable: ties as collected
    items[:] = [item for name in ordered for item in modules[name]]


_process_state_key = pytest.StashKey[dict[str, object]]()


def _process_state() -> dict[str, object]:
    """What a session changes for its process and must give back: the environment, the
    garbage collector's callbacks (perf.pauses) and SIGTERM's handler."""
    state: dict[str, object] = {f"${name}": value for name, value in os.environ.items()}
    state["gc.callbacks"] = list(gc.callbacks)
    state["the SIGTERM handler"] = signal.getsignal(signal.SIGTERM)
    state.pop("$PYTEST_CURRENT_TEST", None)
    return state


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_process_state_key] = _process_state()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Each test, with the in-process runs it makes, leaves the process as it found it
    once its fixtures are torn down: a variable left behind (JAX's CPU device count)
    changes what every later test of that process sees, on some of xdist's schedules."""
    result = yield
    before, after = item.stash[_process_state_key], _process_state()
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    if changed:
        pytest.fail(f"the test left its process changed: {', '.join(changed)}")
    return result
