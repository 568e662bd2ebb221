"""Where a run with everything on spends its extra time and memory: each step of the
plugin's work, timed inside real pytest runs, beside bare pytest's wall time in the same
rounds, and how much each step raised the run's peak memory.

    build/bench-venv/bin/python bench/session_steps.py --tests 10000 --repeat 5
    # the peak at 100,000 tests, with one test slow enough that the comparison is the
    # full one (numpy), as in any suite with a test of at least --perf-min-duration:
    build/bench-venv/bin/python bench/session_steps.py --tests 100000 --repeat 1 --slow

Each round runs bare pytest and then ``--perf-record --perf-baseline --flaky-history``
(a 20-run baseline and a 50-run history, as ``bench/overhead.py`` builds them) with this
module loaded as a plugin (``-p bench.session_steps``).  Before the features register,
it wraps the functions that do each step and adds up their seconds; at exit it writes
them to the file named by ``PYTEST_ACCEL_STEPS``.  Importing the plugin's modules is
timed apart, in a fresh interpreter per round (a plugin loaded first cannot time the
import of another), with the share spent creating dataclasses.

The steps overlap nothing and leave out pytest's own work for the tests, so their sum
is what the plugin adds, give or take the interpreter's exit freeing more objects.  A
step's memory is how far it raised the process's peak RSS: at the end of a run, where
the peak is, the steps' raises add up to the run's peak over bare pytest's, give or take
what the features hold from the start (the baseline and the history, read at
configuration) and what pytest's reports reuse of it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

STEPS_ENV = "PYTEST_ACCEL_STEPS"
_seconds: dict[str, float] = {}
_raised: dict[str, float] = {}  # MB each step raised the peak RSS by


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(step: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, peak = time.perf_counter(), _peak_mb()
        try:
            return function(*args, **kwargs)
        finally:
            _seconds[step] = _seconds.get(step, 0.0) + time.perf_counter() - start
            _raised[step] = _raised.get(step, 0.0) + _peak_mb() - peak

    return wrapper


# (step, module, attribute path): wrapped where the caller looks it up, before the
# features register their hook classes in pytest_accel's pytest_configure.
HARDWARE, COLLECTOR = "pytest_accel.hardware.plugin", "pytest_accel.perf.collector"
PERF, FLAKY = "pytest_accel.perf.plugin", "pytest_accel.flaky.plugin"
STEPS = [
    ("marker selection at collection", HARDWARE, "Selection.pytest_collection_modifyitems"),
    ("class, module and perf marks at collection", COLLECTOR, "collect_nodes"),
    ("reading the baseline", PERF, "load_for_session"),
    ("reading the flaky history", FLAKY, "_read_history"),
    ("commit and branch", "pytest_accel.vcs", "vcs_info"),
    ("sorting and folding the reports", COLLECTOR, "ResultsCollector.session_table"),
    ("classes and modules, once", "pytest_accel.perf.model.table", "TimingTable.grouped"),
    ("the run's timings for the comparison", PERF, "PerfPlugin._run_timings"),
    ("comparing with the baseline", PERF, "PerfPlugin._compare"),
    ("encoding and writing the record", PERF, "write_atomic"),
    ("the flaky history's update and summary", FLAKY, "FlakyPlugin._finish"),
]


def step_target(module: str, path: str) -> tuple[Any, str]:
    """The object that holds a step's function (its module or class), and its name."""
    import importlib

    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for step, module, path in STEPS:
        owner, name = step_target(module, path)
        setattr(owner, name, _timed(step, getattr(owner, name)))


def pytest_unconfigure(config: pytest.Config) -> None:
    target = os.environ.get(STEPS_ENV)
    if target:
        modules = sorted(m for m in sys.modules if m.startswith("pytest_accel"))
        found = {"steps": _seconds, "raised": _raised, "modules": modules}
        Path(target).write_text(json.dumps(found))


IMPORT_PROBE = """
import dataclasses, json, sys, time
import pytest
made = [0, 0.0]
create = dataclasses._process_class
def counted(cls, *args, **kwargs):
    start = time.perf_counter()
    try:
        return create(cls, *args, **kwargs)
    finally:
        if cls.__module__.startswith("pytest_accel"):
            made[0] += 1
            made[1] += time.perf_counter() - start
dataclasses._process_class = counted
start = time.perf_counter()
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps([time.perf_counter() - start, made[1], made[0]]))
"""


def _pytest(
    args: list[str], suite: Path, workdir: Path, env: dict[str, str]
) -> tuple[float, float]:
    """The wall seconds and peak RSS (MB) of one pytest run."""
    command = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", *args]
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 5):
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise SystemExit(f"{' '.join(command)} failed with exit {code}:\n{stderr[-2000:]}")
    return wall, usage.ru_maxrss / 1024


SLOW_TEST = ("def test_function_0_1():\n", "    __import__('time').sleep(0.15)\n")


def slow_down_one_test(suite: Path) -> None:
    """One test of ``bench/suite.py``'s made 0.15 s long: over ``--perf-min-duration``,
    so the comparison cannot be the quiet one (``perf.analysis.quiet``)."""
    module = suite / "test_mod_0000.py"
    text = module.read_text(encoding="utf-8")
    if SLOW_TEST[0] not in text:
        raise SystemExit(f"{module}: no {SLOW_TEST[0].strip()!r} to slow down")
    module.write_text(text.replace(SLOW_TEST[0], "".join(SLOW_TEST), 1), encoding="utf-8")


def main() -> None:
    root = str(Path(__file__).resolve().parent.parent)
    sys.path.insert(0, root)
    from bench.overhead import measured_env, stretch_baseline, stretch_history
    from bench.suite import generate

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-runs", type=int, default=20)
    parser.add_argument(
        "--slow",
        action="store_true",
        help="one test made 0.15 s long after the baseline is built: the full comparison",
    )
    args = parser.parse_args()
    env = measured_env()  # and the probe importable as bench.session_steps:
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        suite = workdir / "suite"
        count = generate(suite, args.tests)
        files = [
            f"--perf-baseline={workdir / 'baseline.json'}",
            f"--flaky-history={workdir / 'history.json'}",
        ]
        everything = ["-p", "pytest_accel", f"--perf-record={workdir / 'record.json'}", *files]
        _pytest(["-p", "pytest_accel", *files, "--perf-update-baseline"], suite, workdir, env)
        stretch_baseline(workdir / "baseline.json", args.baseline_runs)
        stretch_history(workdir / "history.json")
        if args.slow:
            slow_down_one_test(suite)
        history = (workdir / "history.json").read_bytes()
        probe = ["-p", "bench.session_steps", *everything]
        _pytest([], suite, workdir, env)  # warm-up: page cache and bytecode
        _pytest(probe, suite, workdir, env)
        bare: list[float] = []
        peaks: list[tuple[float, float]] = []  # bare pytest's, everything on's
        steps: dict[str, list[float]] = {}
        raised: dict[str, list[float]] = {}
        imports: list[tuple[float, float, int]] = []
        for _ in range(args.repeat):
            wall, bare_peak = _pytest([], suite, workdir, env)
            bare.append(wall)
            (workdir / "history.json").write_bytes(history)  # the same 50 runs each round
            out = workdir / "steps.json"
            _, peak = _pytest(probe, suite, workdir, {**env, STEPS_ENV: str(out)})
            peaks.append((bare_peak, peak))
            found = json.loads(out.read_text())
            for step, seconds in found["steps"].items():
                steps.setdefault(step, []).append(seconds)
                raised.setdefault(step, []).append(found["raised"][step])
            probed = subprocess.run(
                [sys.executable, "-c", IMPORT_PROBE, *found["modules"]],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            seconds, creating, classes = json.loads(probed.stdout)  # see IMPORT_PROBE
            imports.append((seconds, creating, classes))
    print_tables(count, args, bare, peaks, steps, raised, imports)


def print_tables(  # noqa: PLR0917  # what main measured, each kind apart
    count: int,
    args: argparse.Namespace,
    bare: list[float],
    peaks: list[tuple[float, float]],
    steps: dict[str, list[float]],
    raised: dict[str, list[float]],
    imports: list[tuple[float, float, int]],
) -> None:
    wall = statistics.median(bare)
    bare_peak = statistics.median(p[0] for p in peaks)
    peak = statistics.median(p[1] for p in peaks)
    ratio = statistics.median(p[1] / p[0] for p in peaks)
    slow = ", one test 0.15 s (the full comparison)" if args.slow else ""
    print(
        f"pytest on {count} generated tests{slow}, everything on against a"
        f" {args.baseline_runs}-run baseline, {args.repeat} rounds; bare pytest {wall:.2f} s"
        f" and {bare_peak:.0f} MB peak RSS, everything on {peak:.0f} MB ({ratio:.3f}x,"
        " paired), medians\n"
    )
    print("| step | ms, median | min-max | share of bare pytest's wall | peak raised (MB) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    dataclasses = (f"of which creating {imports[0][2]} dataclasses", [i[1] for i in imports])
    rows = [("importing the plugin's modules", [i[0] for i in imports])]
    rows += [(step, steps.get(step, [0.0])) for step, _, _ in STEPS]
    total = sum(statistics.median(values) for _, values in rows)
    rows.insert(1, dataclasses)  # a part of the imports, not added again
    for step, values in rows:
        middle = statistics.median(values)
        mb = f"{statistics.median(raised[step]):.1f}" if step in raised else ""
        print(
            f"| {step} | {middle * 1000:.1f} | {min(values) * 1000:.1f}-{max(values) * 1000:.1f}"
            f" | {middle / wall:.2%} | {mb} |"
        )
    print(f"| **sum** | **{total * 1000:.1f}** | | **{total / wall:.2%}** | |")


if __name__ == "__main__":
    main()
