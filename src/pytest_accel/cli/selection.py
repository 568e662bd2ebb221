"""``pytest-accel selection``: what change-aware selection ran and would have missed,
over the records of its runs (docs/selection.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_accel.cli.common import EXIT_FINDINGS, EXIT_OK, add_command, percentage
from pytest_accel.files import read_json
from pytest_accel.text import line_start


def add(commands: Any) -> None:
    parser = add_command(
        commands,
        "selection",
        "the tests selection ran, and its recall",
        "Over records of runs with --accel-select: each run's tests run of those"
        " collected, the mean share, the device-seconds not spent, and, from shadow runs"
        " (--accel-select=shadow: every test runs), the recall: faulty runs where"
        " selection would have kept every failing test, over faulty runs. Every failing"
        " test it would have left out is named.",
        [
            "pytest-accel selection records/*.json",
            "pytest-accel selection records/shadow-*.json --min-recall 100",
        ],
    )
    parser.add_argument(
        "records", nargs="+", metavar="RECORD", help="records written by --perf-record"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or json"
    )
    parser.add_argument(
        "--min-recall",
        type=percentage,
        default=None,
        metavar="P",
        help="exit 1 when the recall of the shadow runs is below P percent (default: no limit)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pytest_accel.perf.formats.record import check_record
    from pytest_accel.selection.section import selection_of, sums

    runs = []
    without = []
    for path in args.records:
        found = selection_of(path, check_record(path, read_json(path)))
        if found is None:
            without.append(path)
        else:
            runs.append(found)
    total = sums(runs)
    if args.format == "json":
        json.dump(
            {
                "runs": [
                    {
                        "record": r.path,
                        "mode": r.mode,
                        "collected": r.collected,
                        "run": len(r.kept),
                        "cut": sorted(r.cut),
                        "failed": sorted(r.failed),
                        "missed": r.missed,
                    }
                    for r in runs
                ],
                "mean_share": round(total.mean_share, 6),
                "faulty_shadow_runs": total.faulty,
                "caught": total.caught,
                "recall": total.recall,
                "device_seconds_not_spent": round(total.device_seconds, 3),
                "without_selection": without,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        for r in runs:
            verb = "would run" if r.mode == "shadow" else "ran"
            line = (
                f"{r.path}: {r.mode}: {verb} {len(r.kept)} of {r.collected} test(s) ({r.share:.1%})"
            )
            if r.cut:
                line += f"; {len(r.cut)} cut by the budget"
            if r.valves:
                line += f"; kept every test: {', '.join(r.valves)}"
            if r.failed:
                line += f"; {len(r.failed)} failed"
            if r.missed:
                line += f"; MISSED {len(r.missed)}: {', '.join(r.missed[:5])}"
            sys.stdout.write(line_start(line) + "\n")
        for path in without:
            sys.stdout.write(
                line_start(f"{path}: no selection section (not run with --accel-select)") + "\n"
            )
        recall = (
            f"{total.recall:.1%} ({total.caught} of {total.faulty} faulty shadow run(s))"
            if total.recall is not None
            else "not measured (no shadow run had a failing test)"
        )
        sys.stdout.write(
            f"{total.runs} run(s) with selection: {total.mean_share:.1%} of the tests run on"
            f" average; {total.device_seconds:,.1f} device-seconds not spent; recall {recall}\n"
        )
    if (
        args.min_recall is not None
        and total.recall is not None
        and 100 * total.recall < args.min_recall
    ):
        return EXIT_FINDINGS
    return EXIT_OK
