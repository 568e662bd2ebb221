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
    # the CPU-wait clock's parts
    build/bench-venv/bin/python bench/instructions.py --tests 2000 --clock
    # the floor: a lean recorder of the same per-test data (bench/lean_recorder.py)
    build/bench-venv/bin/python bench/instructions.py --tests 10000 --lean
    # what each feature adds to a recording run (bench/overhead.py's --set features),
    # also in milliseconds at the pace of a bare run timed outside valgrind
    build/bench-venv/bin/python bench/instructions.py --tests 10000 --features

About 20 s per variant for 1,000 tests (the interpreter runs some 20x slower under
cachegrind; callgrind, which earlier tables used, counts the same within 0.2% at half
the speed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.overhead import (
    ACCEL,
    BASELINE,
    RECORD,
    SPLIT,
    VARIANT_SETS,
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


def _record_without(name: str, steps: str) -> Variant:
    """A recording run with ``steps`` (``bench/without_step.py``'s) switched off."""
    return Variant(name, [*WITHOUT, *ACCEL, RECORD], env={"PYTEST_ACCEL_WITHOUT": steps})


STEPS = [
    Variant("pytest-accel (no option)", [*WITHOUT, *ACCEL]),
    Variant("pytest-accel --perf-record", [*WITHOUT, *ACCEL, RECORD]),
    _record_without("--perf-record, nothing at the session's end", "finish"),
    _record_without("--perf-record, no CPU-wait clock", "waits"),
]


# The CPU-wait clock's parts, garbage collection off in each (a full collection moving
# between two counts would be most of a part's difference).
CLOCK = [
    _record_without("--perf-record, no clock", "waits,gc"),
    _record_without("an empty call wrapper, no figure put on a report", "call-body,put,gc"),
    _record_without("an empty call wrapper, the figures put", "call-body,gc"),
    _record_without("the driver's call wrapper, no figure put on a report", "put,gc"),
    _record_without("the clock as shipped", "gc"),
    _record_without("the clock, no call read at its end", "closing-read,gc"),
    # Under valgrind a call of ``pass`` takes about SHORT_CALL: how many are read again
    # moves with the machine.  Every call read again, as each of a real suite's is.
    _record_without("the clock, every call read at its end", "short-call,gc"),
]
LEAN = ["-p", "bench.lean_recorder"]  # a prototype: the floor under a recorder's cost
LEAN_OUT = {"LEAN_RECORDER_OUT": "{tmp}/lean-record.json"}
LEAN_SET = [
    Variant("bare pytest", []),
    Variant("pytest-split --store-durations", SPLIT),
    Variant("pytest-accel --perf-record", [*ACCEL, RECORD]),
    Variant("lean recorder (bench/lean_recorder.py)", LEAN, env=LEAN_OUT),
    Variant(
        "lean recorder, with the record's other columns and checks",
        LEAN,
        env={**LEAN_OUT, "LEAN_RECORDER_WITH": "record"},
    ),
    Variant(
        "lean recorder, no CPU-wait clock",
        LEAN,
        env={**LEAN_OUT, "LEAN_RECORDER_WITHOUT": "clock"},
    ),
    Variant(
        "lean recorder, nothing at the session's end",
        LEAN,
        env={**LEAN_OUT, "LEAN_RECORDER_WITHOUT": "end"},
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
    env = {**measured_env(), "PYTHONHASHSEED": "0"}
    env.update({k: v.replace("{tmp}", str(workdir)) for k, v in variant.env.items()})
    if any(a.startswith("bench.") for a in args):  # a plugin of bench/, from the repository
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
        "--features",
        action="store_true",
        help="each feature on top of --perf-record, one at a time (overhead.py's set)",
    )
    parser.add_argument(
        "--clock",
        action="store_true",
        help="the CPU-wait clock's parts (its call wrapper, its figures put on reports, the closing"
        " read), garbage collection off",
    )
    parser.add_argument(
        "--lean",
        action="store_true",
        help="the record against a lean recorder of the same per-test data"
        " (bench/lean_recorder.py), with and without its clock and its end",
    )
    parser.add_argument(
        "--flaky",
        action="store_true",
        help="the flaky features (1,000-entry quarantine, 50-run history) against the plugin",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    chosen = VARIANTS
    if args.flaky:
        chosen = FLAKY
    elif args.steps:
        chosen = STEPS
    elif args.lean:
        chosen = LEAN_SET
    elif args.clock:
        chosen = CLOCK
    elif args.features:
        chosen = VARIANT_SETS["features"]
    variants = chosen if not args.only else [chosen[int(i)] for i in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        suite = workdir / "suite"
        count = generate(suite, args.tests)
        write_quarantine(workdir / "quarantine.txt", count)
        counts = []
        pace = bare_pace(suite, workdir) if args.features else 0.0
        for variant in variants:
            if variant.prepare:  # a baseline and a history of earlier runs
                for _ in range(3):  # timed under valgrind too, as the counted run will be
                    run(variant, variant.prepare, suite, workdir, counted=False, valgrind=True)
                if (workdir / "history.json").exists():  # the flaky variants' 50 runs
                    stretch_history(workdir / "history.json")
            run(variant, variant.args, suite, workdir, counted=False)  # bytecode, page cache
            counts.append(run(variant, variant.args, suite, workdir, counted=True))
            print(f"{variant.name}: {counts[-1]:,}", file=sys.stderr)
    print(f"instructions executed, pytest on {count} generated tests (cachegrind)\n")
    if pace:
        _features_table(variants, counts, pace)
        return
    print(f"| variant | instructions (millions) | ratio to {variants[0].name} |")
    print("| --- | ---: | ---: |")
    for variant, refs in zip(variants, counts, strict=True):
        print(f"| {variant.name} | {refs / 1e6:,.0f} | {refs / counts[0]:.3f}x |")


def bare_pace(suite: Path, workdir: Path, rounds: int = 5) -> float:
    """Seconds per instruction of bare pytest on this machine: the median wall time of
    ``rounds`` bare runs outside valgrind over the instructions of one counted run.  It
    turns a feature's instructions into the milliseconds they take at that pace (a
    feature that waits on the disk or misses the cache more takes longer)."""
    bare = Variant("bare pytest", [])
    walls = []
    for _ in range(rounds):
        started = time.perf_counter()
        run(bare, [], suite, workdir, counted=False)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls) / run(bare, [], suite, workdir, counted=True)


def _features_table(variants: list[Variant], counts: list[int], pace: float) -> None:
    """Each variant against bare pytest and against the recording run (the features
    set's variant 2), in instructions and in milliseconds at bare pytest's pace."""
    by_name = dict(zip((v.name for v in variants), counts, strict=True))
    bare, record = by_name["bare pytest"], by_name["--perf-record"]  # --only keeps both
    print(f"bare pytest's pace: {pace * 1e9:.3f} ns an instruction (5 runs outside valgrind)\n")
    print(
        "| variant | instructions (millions) | ratio to bare pytest "
        "| over --perf-record (millions) | over --perf-record (ms) |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for variant, refs in zip(variants, counts, strict=True):
        over = refs - record
        print(
            f"| {variant.name} | {refs / 1e6:,.0f} | {refs / bare:.3f}x "
            f"| {over / 1e6:+,.0f} | {over * pace * 1e3:+,.0f} |"
        )


if __name__ == "__main__":
    main()
