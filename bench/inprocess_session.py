"""The CPU of one in-process pytest session, as this project's tests run hundreds of them
(``pytester.runpytest``): with JAX imported, as in the test processes, and the unraisable
exception plugin's garbage collection off, as pytester turns it off.

Each variant's median of ``--rounds`` sessions of a one-test suite, the variants
alternating; the installed distributions read afresh each session, then read once
(``tests/kept_distributions.py``, which the root conftest switches on), and then the
plugin's own share: bare pytest, the plugin with no option, and a recording run.

    python bench/inprocess_session.py --rounds 30
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
from _pytest.unraisableexception import gc_collect_iterations_key  # noqa: E402

from tests import kept_distributions  # noqa: E402
from tests.jax_runs import import_jax  # noqa: E402


class _AsPytester:
    """What pytester does to each in-process session: no garbage collection at its end."""

    @staticmethod
    def pytest_configure(config: pytest.Config) -> None:
        config.stash[gc_collect_iterations_key] = 0


def session(*options: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(["-q", "-p", "no:cacheprovider", "test_one.py", *options], [_AsPytester()])


def medians(variants: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    for run in variants.values():  # warm: imports, bytecode
        run()
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            started = time.process_time()
            run()
            cpu[name].append(time.process_time() - started)
    return {name: statistics.median(times) for name, times in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    import numpy  # noqa: F401  # the root conftest imports both before any session

    import_jax()
    with tempfile.TemporaryDirectory() as where:
        os.chdir(where)
        Path("test_one.py").write_text("def test_one():\n    pass\n")

        def fresh() -> None:
            importlib.metadata.distributions = kept_distributions._discover
            session()

        def kept() -> None:
            kept_distributions.keep()
            session()

        reading = medians({"read afresh": fresh, "read once": kept}, args.rounds)
        kept_distributions.keep()
        plugin = medians(
            {
                "bare pytest": lambda: session("-p", "no:pytest_accel"),
                "pytest-accel (no option)": session,
                "pytest-accel --perf-record": lambda: session("--perf-record=r.json"),
            },
            args.rounds,
        )
    print(f"CPU of one in-process session of one test, median of {args.rounds}\n")
    print("| variant | ms |")
    print("| --- | ---: |")
    for name, seconds in {**reading, **plugin}.items():
        print(f"| {name} | {seconds * 1e3:.1f} |")


if __name__ == "__main__":
    main()
