"""Instructions executed by a pytest run, with and without pytest-accel: a count that
does not drift with the machine.

Wall-time ratios on a shared 2-core machine move by 10-20% between identical runs (see
docs/benchmarks.md), which hides a 3% cost.  Valgrind's callgrind counts every
instruction the process executes, the same on every run (``PYTHONHASHSEED`` is fixed),
so the ratio of counts is the cost of the work itself.  It leaves out what counting
instructions cannot see (waiting on the disk, cache misses), so it complements the
paired wall times of ``bench/overhead.py``; it does not replace them.

    build/bench-venv/bin/python bench/instructions.py --tests 1000
    build/bench-venv/bin/python bench/instructions.py --tests 2000 --flaky

About 40 s per variant for 1,000 tests (callgrind runs the interpreter some 40x slower).
"""

from __future__ import annotations

import argparse
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

HISTORY = "--flaky-history={tmp}/history.json"
FLAKY = [
    Variant("pytest-accel (no flaky option)", ACCEL),
    Variant(
        "pytest-accel --flaky-history (50 runs) --flaky-quarantine (1,000)",
        [*ACCEL, HISTORY, "--flaky-quarantine={tmp}/quarantine.txt"],
        prepare=[*ACCEL, HISTORY],
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
_REFS = re.compile(r"Collected : (\d+)")


def run(
    args: list[str], suite: Path, workdir: Path, *, counted: bool, valgrind: bool = False
) -> int:
    """Instructions of one run under callgrind (``counted``), or a run to prepare files;
    ``valgrind`` runs that one under callgrind too, uncounted: timings taken 40x slower
    than the counted run's would make every test a regression."""
    command = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider"]
    command += [a.replace("{tmp}", str(workdir)) for a in args]
    env = {**measured_env(), "PYTHONHASHSEED": "0"}
    if counted or valgrind:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 5):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    found = _REFS.search(done.stderr)
    return int(found.group(1)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--only", help="comma-separated variant numbers (0 = bare)")
    parser.add_argument(
        "--flaky",
        action="store_true",
        help="the flaky features (1,000-entry quarantine, 50-run history) against the plugin",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    chosen = FLAKY if args.flaky else VARIANTS
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
                    run(variant.prepare, suite, workdir, counted=False, valgrind=True)
                stretch_history(workdir / "history.json")
            run(variant.args, suite, workdir, counted=False)  # bytecode, page cache
            counts.append(run(variant.args, suite, workdir, counted=True))
            print(f"{variant.name}: {counts[-1]:,}", file=sys.stderr)
    print(f"instructions executed, pytest on {count} generated tests (callgrind)\n")
    print(f"| variant | instructions (millions) | ratio to {variants[0].name} |")
    print("| --- | ---: | ---: |")
    for variant, refs in zip(variants, counts, strict=True):
        print(f"| {variant.name} | {refs / 1e6:,.0f} | {refs / counts[0]:.3f}x |")


if __name__ == "__main__":
    main()
