"""``pytest-accel shard``: a duration-balanced plan, printed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_accel.cli.common import EXIT_OK, add_command, positive_int
from pytest_accel.scaleout.options import SHARD_BY

if TYPE_CHECKING:
    from pytest_accel.scaleout.sharding import Unit


def add(commands: Any) -> None:
    shard = add_command(
        commands,
        "shard",
        "a duration-balanced plan of CI shards",
        "Print the plan --accel-shard K/N follows: which tests each shard runs and its"
        " expected seconds. The suite is collected here as `pytest --accel-shard K/N"
        " --perf-baseline PATH` collects it (pytest's arguments after --), so each shard's"
        " list is exactly what that shard runs: tests the durations file does not know"
        " (new ones, warm-ups) weigh the median, tests skipped here weigh nothing.",
        [
            "pytest-accel shard --durations ci/state/baseline.json --splits 4",
            "pytest-accel shard --durations b.json --splits 2 --format json -- tests -m 'not slow'",
            "pytest-accel shard --durations build/record.json --splits 2 --without-collecting",
        ],
    )
    shard.add_argument(
        "--durations",
        required=True,
        metavar="PATH",
        help="a baseline, a record or a pytest-split .test_durations map",
    )
    shard.add_argument(
        "--splits", type=positive_int, required=True, metavar="N", help="how many shards"
    )
    shard.add_argument(
        "--by",
        choices=SHARD_BY,
        default="class",
        help="what a shard takes whole: test, class (default; class fixtures run once) or module",
    )
    shard.add_argument(
        "--accel-key",
        "--env-key",  # its older name
        dest="key",
        metavar="KEY",
        help="the hardware key to read from a baseline (default: the key a run here has;"
        " with --without-collecting, the baseline's first; --env-key is its older name)",
    )
    shard.add_argument(
        "--without-collecting",
        action="store_true",
        help="plan only the tests the durations file knows, without collecting the suite:"
        " a quick look, not what --accel-shard runs (it also runs new tests and warm-ups)",
    )
    shard.add_argument(
        "pytest_args",
        nargs="*",
        metavar="PYTEST_ARGS",
        help="after --: the arguments the shards' pytest runs get (paths, -m, -k, ...)",
    )
    shard.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default): one line per shard; json: every shard's tests",
    )
    shard.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The plan of the suite collected here (``plan_as_pytest``), or, without collecting,
    of the tests a durations file knows: a record knows each test's class and module;
    from a baseline or a pytest-split map they are read from the node ids."""
    # Loaded when this command runs, not for every command's parser.
    from pytest_accel.perf.offline import durations_file
    from pytest_accel.scaleout.sharding import groups_from_node_ids, oversized_note, plan_tests

    # Read first: a bad file is one line naming it, before pytest starts.
    durations = durations_file(args.durations, args.key)
    known = durations.expected
    if args.without_collecting:
        groups = durations.groups or groups_from_node_ids(known)
        plan = plan_tests(known, groups, args.by, args.splits)
    else:
        from pytest_accel.cli.shard_session import plan_as_pytest

        plan = plan_as_pytest(
            args.durations, args.splits, args.by, args.key, list(args.pytest_args)
        )
    loads = plan.loads()
    if args.format == "json":
        payload = {
            "splits": args.splits,
            "by": args.by,
            "basis": durations.basis,
            "imbalance": plan.imbalance(),
            "shards": [
                {"shard": f"{i + 1}/{args.splits}", "estimated": loads[i], "tests": plan.tests(i)}
                for i in range(args.splits)
            ],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return EXIT_OK
    for i in range(args.splits):
        sys.stdout.write(
            f"shard {i + 1}/{args.splits}: {len(plan.tests(i))} test(s),"
            f"{_groups(plan.shards[i], args.by)} estimated {loads[i]:.1f}s\n"
        )
    sys.stdout.write(f"largest shard: {plan.imbalance():.3f}x the ideal ({plan.ideal():.1f}s)\n")
    note = oversized_note(plan, args.by, "--by")
    if note is not None:
        sys.stdout.write(note + "\n")
    sys.stdout.write(BASIS_NOTES[durations.basis] + "\n")
    return EXIT_OK


def _groups(units: Sequence[Unit], by: str) -> str:
    """The classes or modules a shard takes whole, named only where there are some (a
    test outside any class is a unit of its own under ``--by class``)."""
    whole = sum(1 for unit in units if unit.id not in unit.tests)
    if by == "test" or not whole:
        return ""
    return f" {whole} {'class(es)' if by == 'class' else 'module(s)'} whole,"


# What the estimates are of: each shard's tests, never the start-up and collection
# every shard pays once.
BASIS_NOTES = {
    "wall": "estimated: the tests' wall time as measured (setup, call and teardown, JAX"
    " compilation included); each shard also pays its start-up and collection",
    "execution": "estimated: the tests' execution time (JAX compilation left out): this"
    " baseline keeps no wall times yet; a run folded in by pytest-accel 0.4 or later adds"
    " them. Each shard also pays its start-up and collection",
}
