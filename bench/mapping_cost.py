"""What a mapping run costs on a real suite, paired: the wall time of a recording run
with coverage alone (``--perf-record`` and pytest-cov's ``--cov``), of a mapping run
without program fingerprints (``--accel-map --accel-map-programs=off``: coverage
contexts per test, JAX's caches cleared before each test) and of one with them
(``--accel-map``: every lowered module written and hashed), each round running the
three in turn (the order reversed every other round), the ratios taken per round.

    python bench/mapping_cost.py --python /work/study/venv/bin/python \\
        --root /work/study/orthax --package orthax --rounds 3 tests/test_polynomial.py

The suite's own python must have pytest-accel, pytest-cov and the suite's
dependencies installed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stdout[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--package", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("tests", nargs="+")
    args = parser.parse_args()
    root = Path(args.root)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        base = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.tests]
        variants = {
            "coverage alone": [
                *base,
                f"--cov={args.package}",
                "--cov-report=",
                "--perf-record",
                str(out / "r.json"),
            ],
            "map, no programs": [
                *base,
                "--perf-record",
                str(out / "r.json"),
                "--accel-map",
                str(out / "a.db"),
                "--accel-map-programs=off",
            ],
            "map with programs": [
                *base,
                "--perf-record",
                str(out / "r.json"),
                "--accel-map",
                str(out / "b.db"),
            ],
        }
        names = list(variants)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        for round_index in range(args.rounds):
            order = names if round_index % 2 == 0 else names[::-1]
            for name in order:
                for stale in out.glob("*.db*"):
                    stale.unlink()
                seconds[name].append(timed(variants[name], root))
            print(
                f"round {round_index + 1}: "
                + ", ".join(f"{n} {seconds[n][-1]:.1f} s" for n in names),
                flush=True,
            )
    reference = seconds[names[0]]
    for name in names:
        ratios = [s / r for s, r in zip(seconds[name], reference, strict=True)]
        print(
            f"{name}: median {statistics.median(seconds[name]):.1f} s;"
            f" paired ratio to coverage alone {statistics.median(ratios):.2f}x"
            f" (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
