"""What pytest's assertion rewriting adds to loading the plugin: pytest imports every
module of a plugin named by an entry point or ``-p`` through its rewriting hook, whose
``_read_pyc`` hashes the module's source and unmarshals the cached code from the open
file.  Counts a generated suite's run with and without the plugin, each with and
without ``--assert=plain`` (cachegrind, as ``bench/instructions.py``), then times
unmarshalling the plugin's cached modules from the file against from its bytes.

    build/bench-venv/bin/python bench/rewritten_imports.py --tests 100

Since issue 59 the package takes its name off the hook's marks (``pytest_accel.__init__``),
so only the package and ``pytest_accel.plugin`` are still rewritten: the plugin's two rows
(with and without ``--assert=plain``) show what is left of the hook's cost, and the
unmarshal timing reads the ``-pytest-`` pycs on disk, two in a fresh checkout.

Run a session with bytecode written first (``instructions.run`` warms each variant): a
module whose rewritten pyc is stale is rewritten, not read, and costs far more.
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.instructions import run
from bench.overhead import ACCEL, Variant
from bench.suite import generate

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "pytest_accel"
VARIANTS = [
    Variant("bare pytest", []),
    Variant("bare pytest --assert=plain", ["--assert=plain"]),
    Variant("pytest-accel", ACCEL),
    Variant("pytest-accel --assert=plain", [*ACCEL, "--assert=plain"]),
]


def unmarshal_times(package: Path = PACKAGE, rounds: int = 5) -> tuple[int, float, float, float]:
    """pytest's cached modules of ``package``: how many, and the seconds to unmarshal
    them all from the open file, from their bytes, and to hash their sources."""
    tag = f"{sys.implementation.cache_tag}-pytest-"
    pycs = [p for p in package.rglob("__pycache__/*.pyc") if tag in p.name]
    sources = [p.parent.parent / (p.name.split(".")[0] + ".py") for p in pycs]

    def from_file(path: Path) -> object:
        with open(path, "rb") as handle:
            handle.read(16)
            return marshal.load(handle)

    def from_bytes(path: Path) -> object:
        return marshal.loads(memoryview(path.read_bytes())[16:])

    def hashed(path: Path) -> object:
        return importlib.util.source_hash(path.read_bytes())

    def timed(read: Callable[[Path], object], paths: list[Path]) -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            for path in paths:
                read(path)
        return (time.perf_counter() - started) / rounds

    return (
        len(pycs),
        timed(from_file, pycs),
        timed(from_bytes, pycs),
        timed(hashed, [s for s in sources if s.exists()]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        suite = workdir / "suite"
        count = generate(suite, args.tests)
        counts = {}
        for variant in VARIANTS:
            run(variant, variant.args, suite, workdir, counted=False)  # bytecode
            counts[variant.name] = run(variant, variant.args, suite, workdir, counted=True)
    print(f"instructions, pytest on {count} generated tests (cachegrind)\n")
    print("| variant | instructions (millions) |")
    print("| --- | ---: |")
    for name, refs in counts.items():
        print(f"| {name} | {refs / 1e6:,.0f} |")
    plugin = counts["pytest-accel"] - counts["bare pytest"]
    plain = counts["pytest-accel --assert=plain"] - counts["bare pytest --assert=plain"]
    print(f"\nthe plugin: {plugin / 1e6:,.0f} M, with --assert=plain {plain / 1e6:,.0f} M")
    modules, from_file, from_bytes, hashing = unmarshal_times()
    print(
        f"unmarshalling the plugin's {modules} rewritten modules: {from_file * 1e3:.1f} ms"
        f" from the open file, {from_bytes * 1e3:.1f} ms from their bytes;"
        f" hashing their sources {hashing * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
