"""``pytest-accel report``: the HTML report from files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pytest_accel.cli.common import EXIT_OK, CliError, add_command, add_rule_options, given_of
from pytest_accel.file_uses import FileUse, refuse_shared_files
from pytest_accel.files import check_writable, read_json, write_atomic
from pytest_accel.text import line_start


def add(commands: Any) -> None:
    report = add_command(
        commands,
        "report",
        "one HTML page: trends, slowest tests, flaky grid",
        "Write one HTML file that works offline: the runs' summary, regressions and changes"
        " with their duration trends, the slowest tests, classes and modules, the same tests"
        " across hardware keys, the flaky history as a grid, and shard balance"
        " (docs/report.md). --accel-report writes the same page at the end of a run.",
        [
            "pytest-accel report build/record.json --baseline ci/state/baseline.json"
            " --history ci/state/flaky-history.json -o build/report.html",
            "pytest-accel report --baseline ci/state/baseline.json -o trends.html",
        ],
    )
    report.add_argument(
        "records", nargs="*", metavar="RECORD", help="records written by --perf-record"
    )
    report.add_argument(
        "--baseline", metavar="PATH", help="a baseline: trends, changes, hardware side by side"
    )
    report.add_argument(
        "--history", metavar="PATH", help="a flaky history (--flaky-history): the grid"
    )
    report.add_argument(
        "-o", "--output", required=True, metavar="HTML", help="where to write the page"
    )
    add_rule_options(report)
    report.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pytest_accel.flaky.history import load_history
    from pytest_accel.perf.formats.baseline import load_baseline
    from pytest_accel.perf.formats.record import check_record
    from pytest_accel.report.data import build
    from pytest_accel.report.page import render

    if not (args.records or args.baseline or args.history):
        raise CliError("nothing to report: give RECORD files, --baseline or --history")
    inputs = (("--baseline", args.baseline), ("--history", args.history))
    refuse_shared_files(
        [
            *(FileUse("RECORD", path, reads=True) for path in args.records),
            *(FileUse(flag, path, reads=True) for flag, path in inputs if path),
            FileUse("-o", args.output, writes=True),
        ]
    )
    check_writable(args.output, example="report.html")
    records = [(path, check_record(path, read_json(path))) for path in args.records]
    baseline = load_baseline(args.baseline) if args.baseline else None
    history = load_history(args.history) if args.history else None
    page = render(build(records, baseline, history, given_of(args)))
    write_atomic(args.output, [page.encode("utf-8")])
    size = len(page.encode("utf-8"))
    sys.stdout.write(line_start(f"{args.output}: HTML report, {size / 1024:.0f} KiB") + "\n")
    return EXIT_OK
