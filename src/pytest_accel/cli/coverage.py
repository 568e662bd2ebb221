"""``pytest-accel coverage``: enablement coverage per hardware key, side by side, from
records."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_accel.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    CliError,
    add_command,
    add_store_options,
    percentage,
    positive_int,
    stored_records,
)
from pytest_accel.files import parse_json, read_json
from pytest_accel.text import one_line


def add(commands: Any) -> None:
    cover = add_command(
        commands,
        "coverage",
        "tests passing per hardware key, side by side",
        "Enablement coverage per hardware key from records (one per run, any keys): how"
        " many collected tests pass there, fail, are expected to fail, are skipped by"
        " pytest-accel's markers (and why) or otherwise; never a skip or xfail counted as"
        " covered. The newest record of each key is its coverage, the older ones its trend;"
        " tests that pass on one key and are absent, skipped or failing on another are"
        " named (docs/coverage.md).",
        [
            "pytest-accel coverage records/cpu-*.json records/tpu-*.json",
            "pytest-accel coverage records/*.json --min-pct 80 --format markdown",
            "pytest-accel coverage --from s3://ci-state/my-repo --last 10",
        ],
    )
    cover.add_argument(
        "records", nargs="*", metavar="RECORD", help="records written by --perf-record"
    )
    add_store_options(cover)
    cover.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (default), json or markdown (a job-summary table)",
    )
    cover.add_argument(
        "--min-pct",
        type=percentage,
        default=None,
        metavar="P",
        help="exit 1 when a key's newest coverage is below P percent (default: no limit)",
    )
    cover.add_argument(
        "--top",
        type=positive_int,
        default=20,
        metavar="N",
        help="tests named per gap between two keys (default 20)",
    )
    cover.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pytest_accel.coverage.model import by_key, coverage_of, gaps
    from pytest_accel.perf.formats.record import check_record, run_columns

    if not args.records and not args.store:
        raise CliError("nothing to cover: give RECORD files or --from URL")
    sources = [(path, read_json(path)) for path in args.records]
    sources += [(url, parse_json(url, raw)) for url, raw in stored_records(args)]
    keyed = by_key(coverage_of(run_columns(check_record(where, data))) for where, data in sources)
    latest = {key: runs[-1] for key, runs in keyed.items()}
    found = gaps(latest)
    below = sorted(
        k for k, c in latest.items() if args.min_pct is not None and c.below(args.min_pct)
    )
    if args.format == "json":
        payload = {
            "keys": {
                key: {**latest[key].to_json(), "trend": [c.to_json() for c in runs]}
                for key, runs in keyed.items()
            },
            "gaps": [
                {
                    "covered_on": gap.covered_on,
                    "missing_on": gap.missing_on,
                    "count": gap.count,
                    "tests": gap.tests,
                }
                for gap in found
            ],
            "min_pct": args.min_pct,
            "below": below,
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(markdown(keyed, found, args.top))
    else:
        sys.stdout.write(text(keyed, found, args.top, args.min_pct, below))
    return EXIT_FINDINGS if below else EXIT_OK


def text(
    keyed: dict[str, Any], found: list[Any], top: int, min_pct: float | None, below: list[str]
) -> str:
    from pytest_accel.coverage.model import LABELS, describe, trend_line

    lines = []
    for key, runs in keyed.items():
        lines.append(describe(runs[-1]))
        if len(runs) > 1:
            lines.append(f"  trend on {key}: {trend_line(runs)}")
    for gap in found:
        kinds = ", ".join(f"{len(t)} {LABELS[what]}" for what, t in sorted(gap.tests.items()))
        lines.append(
            f"passing on {gap.covered_on}, not on {gap.missing_on}: {gap.count} test(s) ({kinds})"
        )
        named = [(t, what) for what, tests in sorted(gap.tests.items()) for t in tests]
        lines += [f"  {test} ({LABELS[what]})" for test, what in named[:top]]
        if len(named) > top:
            lines.append(f"  ... and {len(named) - top} more (--top)")
    if min_pct is not None:
        keys = [
            f"{key} (an interrupted run)" if keyed[key][-1].interrupted else key for key in below
        ]
        lines.append(
            f"--min-pct {min_pct:g}: "
            + (f"below on {', '.join(keys)}" if below else "every key within")
        )
    return "".join(one_line(line) + "\n" for line in lines)


def markdown(keyed: dict[str, Any], found: list[Any], top: int) -> str:
    from pytest_accel.coverage.model import BUCKETS, LABELS
    from pytest_accel.github import escape_cell

    heads = ["hardware key", "tests", *(LABELS[b] for b in BUCKETS), "covered"]
    lines = ["### pytest-accel coverage", "", "| " + " | ".join(heads) + " |"]
    lines.append("| --- " * len(heads) + "|")
    for key, runs in keyed.items():
        c = runs[-1]
        cells = [escape_cell(key), str(c.tests), *(str(c.counts.get(b, 0)) for b in BUCKETS)]
        lines.append("| " + " | ".join([*cells, f"{c.pct:.2f}%"]) + " |")
    for gap in found:
        lines += [
            "",
            f"{gap.count} test(s) pass on `{escape_cell(gap.covered_on)}` but not on"
            f" `{escape_cell(gap.missing_on)}`",
            "",
        ]
        named = [(t, what) for what, tests in sorted(gap.tests.items()) for t in tests][:top]
        lines += [f"- `{escape_cell(t)}` ({LABELS[what]})" for t, what in named]
    return "\n".join(lines) + "\n"
