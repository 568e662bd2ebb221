"""Instructions executed by a pytest run, with and without pytest-accel: a count that
does not drift with the machine.

Wall-time ratios on a shared 2-core machine move by 10-20% between identical runs (see
docs/benchmarks.md), which hides a 3% cost.  Valgrind counts every instruction the
process executes (cachegrind without its cache simulation), the same on every run
(``PYTHONHASHSEED`` is fixed), so the ratio of counts is the cost of the work itself.
It leaves out what counting instructions cannot see (waiting on the disk, cache
misses), so it complements the paired wall times of ``bench/overhead.py``; it does not
replace them.  One caveat: a change that allocates more or fewer objects can move a
full garbage collection across the run's end (about 55 ms, 200 M instructions, on a
10,000-test run's heap), so a difference under about 1% is not the change's alone.

    build/bench-venv/bin/python bench/instructions.py --tests 1000
    build/bench-venv/bin/python bench/instructions.py --tests 2000 --flaky
    # where a recording run's instructions go: its session's end, its CPU-wait clock
    build/bench-venv/bin/python bench/instructions.py --tests 10000 --steps

About 20 s per variant for 1,000 tests (the interpreter runs some 20x slower under
cachegrind; callgrind, which earlier tables used, counts the same within 0.2% at half
the speed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.overhead import (
    ACCEL,
    BASELINE,
    RECORD,
    SPLIT,
    Variant,
    measured_env,
    stretch_history,
    write_quarantine,
)
from bench.suite import generate

ROOT = Path(__file__).resolve().parent.parent
HISTORY = "--flaky-history={tmp}/history.json"
FLAKY = [
    Variant("pytest-accel (no flaky option)", ACCEL),
    Variant(
        "pytest-accel --flaky-history (50 runs) --flaky-quarantine (1,000)",
        [*ACCEL, HISTORY, "--flaky-quarantine={tmp}/quarantine.txt"],
        prepare=[*ACCEL, HISTORY],
    ),
]
WITHOUT = ["-p", "bench.without_step"]  # before the plugin: see bench/without_step.py
STEPS = [
    Variant("pytest-accel (no option)", [*WITHOUT, *ACCEL]),
    Variant("pytest-accel --perf-record", [*WITHOUT, *ACCEL, RECORD]),
    Variant(
        "--perf-record, nothing at the session's end",
        [*WITHOUT, *ACCEL, RECORD],
        env={"PYTEST_ACCEL_WITHOUT": "finish"},
    ),
    Variant(
        "--perf-record, no CPU-wait clock",
        [*WITHOUT, *ACCEL, RECORD],
        env={"PYTEST_ACCEL_WITHOUT": "waits"},
    ),
]
VARIANTS = [
    Variant("bare pytest", []),
    Variant("pytest-accel (no option)", ACCEL),
    Variant("pytest-accel --perf-record", [*ACCEL, RECORD]),
    Variant("pytest-split --store-durations", SPLIT),
    Variant(
        "pytest-accel --perf-record --perf-baseline --flaky-history",
        [*ACCEL, RECORD, BASELINE, HISTORY],
        prepare=[*ACCEL, BASELINE, "--perf-update-baseline", HISTORY],
    ),
]
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def run(
    variant: Variant,
    args: list[str],
    suite: Path,
    workdir: Path,
    *,
    counted: bool,
    valgrind: bool = False,
) -> int:
    """Instructions of one run under valgrind (``counted``), or a run to prepare files;
    ``valgrind`` runs that one under valgrind too, uncounted: timings taken 40x slower
    than the counted run's would make every test a regression."""
    command = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider"]
    command += [a.replace("{tmp}", str(workdir)) for a in args]
    env = {**measured_env(), **variant.env, "PYTHONHASHSEED": "0"}
    if WITHOUT[1] in args:  # bench.without_step, importable from the repository
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if counted or valgrind:
        command = [*VALGRIND, *command]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 5):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    found = _REFS.search(done.stderr)
    return int(found.group(1).replace(",", "")) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--only", help="comma-separated variant numbers (0 = bare)")
    parser.add_argument(
        "--steps",
        action="store_true",
        help="a recording run with its session's end, then its CPU-wait clock, switched off",
    )
    parser.add_argument(
        "--flaky",
        action="store_true",
        help="the flaky features (1,000-entry quarantine, 50-run history) against the plugin",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    chosen = FLAKY if args.flaky else STEPS if args.steps else VARIANTS
    variants = chosen if not args.only else [chosen[int(i)] for i in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        suite = workdir / "suite"
        count = generate(suite, args.tests)
        write_quarantine(workdir / "quarantine.txt", count)
        counts = []
        for variant in variants:
            if variant.prepare:  # a baseline and a history of earlier runs
                for _ in range(3):  # timed under valgrind too, as the counted run will be
                    run(variant, variant.prepare, suite, workdir, counted=False, valgrind=True)
                stretch_history(workdir / "history.json")
            run(variant, variant.args, suite, workdir, counted=False)  # bytecode, page cache
            counts.append(run(variant, variant.args, suite, workdir, counted=True))
            print(f"{variant.name}: {counts[-1]:,}", file=sys.stderr)
    print(f"instructions executed, pytest on {count} generated tests (cachegrind)\n")
    print(f"| variant | instructions (millions) | ratio to {variants[0].name} |")
    print("| --- | ---: | ---: |")
    for variant, refs in zip(variants, counts, strict=True):
        print(f"| {variant.name} | {refs / 1e6:,.0f} | {refs / counts[0]:.3f}x |")


if __name__ == "__main__":
    main()
