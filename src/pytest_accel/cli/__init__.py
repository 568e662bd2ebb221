"""The ``pytest-accel`` command (also ``python -m pytest_accel``).

One module per family of commands; each adds its parser (with help for every option
and examples) and its handler.  The work itself is the features': this package only
parses arguments and prints.  Exit statuses: 0 fine, 1 findings with ``--fail`` (or
``--max-pct``), 2 bad input or usage (one line on stderr naming the file and the
problem, never a traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Iterator, Sequence
from typing import NoReturn

from pytest_accel import __version__
from pytest_accel.cli import coverage, detect, flaky, report, selection, shard, store, timing
from pytest_accel.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, CliError, HelpFormatter
from pytest_accel.files import InputError, gc_paused
from pytest_accel.locking import check_lock_timeout
from pytest_accel.settings import usage_errors
from pytest_accel.text import capped, one_line, problem

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "build_parser",
    "console_main",
    "main",
]

EXAMPLES = """\
examples:
  pytest-accel detect
  pytest-accel compare build/record.json --baseline ci/state/baseline.json
  pytest-accel report build/record.json --baseline ci/state/baseline.json -o report.html
  pytest-accel COMMAND --help     (every option, with its default and an example)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-accel",
        description="Accelerator detection, timing records, baselines, flaky tests and"
        " reports, from files: the pytest-accel plugin's companion on the command line.",
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pytest-accel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for family in (detect, timing, flaky, shard, coverage, selection, report, store):
        family.add(commands)
    return parser


# One line on stderr and exit 2 (with pytest's UsageError, from the shared option parsers).
_BAD_INPUT: tuple[type[Exception], ...] = (CliError, InputError)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """Built once per process (8 ms of argparse, where a command may take less): a
    parser reads any number of command lines, each into a namespace of its own."""
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # the tool alone: what it can do
        parser.print_help()
        return EXIT_OK
    # Baselines and records of 100,000 tests: orjson reads and writes them several times
    # faster, and this process exits with little in memory (files.dumps says why a
    # pytest run does without it).
    import orjson  # noqa: F401

    try:
        check_lock_timeout()
        # A short-lived process whose large structures (parsed files, their columns) hold
        # no cycles: a collection would only walk them again, 0.1-0.4 s at 100,000 tests.
        with gc_paused(), _one_blas_thread():
            code: int = args.handler(args)
    except _BAD_INPUT + usage_errors() as exc:
        return _refused(str(exc))
    except OSError as exc:  # a write that failed after the checks (a full disk)
        return _refused(problem(exc))
    return code


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """No command multiplies matrices: without this, importing numpy starts OpenBLAS's
    thread pool, whose threads spin on the other cores (0.1 s of CPU on 2 cores).  Unset
    again afterwards, for a caller of ``main`` in its own process."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _refused(why: str) -> int:
    sys.stderr.write(one_line(capped(f"pytest-accel: error: {why}")) + "\n")
    return EXIT_USAGE


def console_main() -> NoReturn:
    """The command as a process runs it (the ``pytest-accel`` script, ``python -m
    pytest_accel``): ``main``, its output flushed, and out at once, as mypy's hard exit
    is.  The interpreter's teardown would free what the command read, which nothing
    needs: about 50 ms of a comparison of 100,000 tests (0.90-0.92x its time, paired).
    Every file a command writes is closed by then (``files.write_atomic``, the map's
    connection).  Output that cannot be written (a reader that went away) is one line
    and status 2, as a full disk is in ``main``."""
    code = main()
    try:
        sys.stdout.flush()
    except OSError as exc:
        code = _refused(problem(exc))
    sys.stderr.flush()
    os._exit(code)
