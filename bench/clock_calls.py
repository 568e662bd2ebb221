"""Instructions one test's call costs in the CPU-wait clock's hooks, counted apart from
the rest of a run: each variant calls pluggy's ``_multicall`` (what pytest calls per
hook) many times over the same hook implementations, under cachegrind, and the count
less the count of the run that loops over nothing, divided by the calls, is what one
call costs.

    build/bench-venv/bin/python bench/clock_calls.py --calls 100000

Variants, each in a pytest session of one test with ``--perf-record`` (no jax imported,
so the CPU wait is the only meter of calls):

- ``noop``: ``pytest_runtest_call`` with a stand-in for pytest's runner alone;
- ``empty wrapper``: and a new-style wrapper that only yields (pluggy's own cost);
- ``driver``: and the call driver's wrapper (``perf.meters.CallDriver``) with its meter;
- ``lean``: and the floor's wrapper (``bench/lean_recorder.py``'s: two ``pread``\\ s, a
  clock read, no meter);
- ``report hook``: ``pytest_runtest_logreport`` with the relaying driver's hook
  (``perf.meters._CallReports``), which a worker and a run with more meters call for
  each of a test's three reports, against none.

A test's clock is the driver's row less the runner's, plus three report hooks where
its figures are relayed.  Run it with ``PYTHONDONTWRITEBYTECODE`` unset (pytest would
rewrite the modules each time).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
from pluggy._execution import _multicall  # what each hook call runs, called bare here

from pytest_accel.perf import meters

ROOT = Path(__file__).resolve().parent.parent
VARIANT_ENV = "CLOCK_CALLS_VARIANT"
CALLS_ENV = "CLOCK_CALLS"
VARIANTS = ("nothing", "noop", "empty wrapper", "driver", "lean", "no hook", "report hook")
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the counted session: call the variant's hooks ``CLOCK_CALLS`` times."""
    variant, calls = os.environ[VARIANT_ENV], int(os.environ[CALLS_ENV])
    item = session.items[0]
    manager = session.config.pluginmanager
    call_impls = manager.hook.pytest_runtest_call.get_hookimpls()
    runner = copy.copy(next(i for i in call_impls if i.plugin_name == "runner"))
    runner.function = lambda item: None  # type: ignore[misc]  # the test is not counted
    driver = manager.get_plugin(meters.DRIVERS["call"])
    if not isinstance(driver, meters.CallDriver) or driver.relaying:
        raise SystemExit("expected the call driver with the CPU wait alone, kept in process")
    wrapper = next(i for i in call_impls if i.plugin is driver)
    report = pytest.TestReport("t.py::t", ("t.py", 0, "t"), {}, "passed", None, "call", [], 0, 0, 0)
    relaying = meters._CallReports(driver)
    report_impl = copy.copy(
        next(
            i
            for i in manager.hook.pytest_runtest_logreport.get_hookimpls()
            if not i.wrapper and not i.hookwrapper
        )
    )
    report_impl.function = relaying.pytest_runtest_logreport  # type: ignore[misc]
    empty, lean = _as(wrapper, _empty), _as(wrapper, _lean())  # made once, not per call
    calls_with = {
        "noop": [runner],
        "empty wrapper": [runner, empty],
        "driver": [runner, wrapper],
        "lean": [runner, lean],
    }
    reports_with = {"no hook": [], "report hook": [report_impl]}
    steps: dict[str, Callable[[], Any]] = {"nothing": lambda: None}
    for name, impls in calls_with.items():
        steps[name] = functools.partial(
            _multicall, "pytest_runtest_call", impls, {"item": item}, False
        )
    for name, impls in reports_with.items():
        steps[name] = functools.partial(
            _multicall, "pytest_runtest_logreport", impls, {"report": report}, False
        )
    step = steps[variant]
    for _ in range(calls):
        step()


def _as(impl: Any, function: Callable[..., Any]) -> Any:
    made = copy.copy(impl)
    made.function = function
    return made


def _empty(item: pytest.Item) -> Generator[None, object, object]:
    return (yield)


def _lean() -> Callable[[pytest.Item], Generator[None, object, object]]:
    schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    def wrapper(item: pytest.Item) -> Generator[None, object, object]:
        os.pread(schedstat, 128, 0)
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            time.perf_counter() - started >= 0.001  # noqa: B015 (the floor's test, kept)

    return wrapper


def count(variant: str, calls: int, workdir: Path, *, counted: bool = True) -> int:
    """Instructions of a one-test session that calls ``variant``'s hooks ``calls`` times
    (``counted`` False: the session run once, as it is before its count, and 0)."""
    if variant not in VARIANTS:
        raise ValueError(f"{variant!r}: expected one of {', '.join(VARIANTS)}")
    env = {
        **os.environ,
        VARIANT_ENV: variant,
        CALLS_ENV: str(calls),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PYTHONHASHSEED": "0",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "bench.clock_calls", "-p", "pytest_accel", "--perf-record=r.json"]
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True)  # warm
    if not counted:
        return 0
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
    valgrind.append("--cachegrind-out-file=/dev/null")
    done = subprocess.run(
        [*valgrind, *command], cwd=workdir, env=env, check=True, capture_output=True, text=True
    )
    found = _REFS.search(done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        (workdir / "test_one.py").write_text("def test_one():\n    pass\n")
        counts = {variant: count(variant, args.calls, workdir) for variant in VARIANTS}
    per_call = {v: (n - counts["nothing"]) / args.calls for v, n in counts.items()}
    print(f"instructions a call, {args.calls:,} calls each (cachegrind)\n")
    print("| variant | instructions a call | over the runner's (or no hook's) |")
    print("| --- | ---: | ---: |")
    for variant in VARIANTS[1:]:
        base = "no hook" if variant == "report hook" else "noop"
        over = (
            "" if variant in ("noop", "no hook") else f"{per_call[variant] - per_call[base]:,.0f}"
        )
        print(f"| {variant} | {per_call[variant]:,.0f} | {over} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
