"""``pytest-accel flaky``: flaky and broken tests from histories and records."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

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
from pytest_accel.file_uses import FileUse, refuse_shared_files
from pytest_accel.files import (
    InputError,
    check_writable,
    parse_json,
    read_json,
    write_json_atomic,
)
from pytest_accel.text import line_start, one_line

if TYPE_CHECKING:
    from pytest_accel.flaky.history import History
    from pytest_accel.flaky.quarantine import Entry


def add(commands: Any) -> None:
    flaky = add_command(
        commands,
        "flaky",
        "flaky and broken tests, and the flaky share",
        "Classify every test of flaky histories (--flaky-history) and records (each record"
        " one run) as flaky, broken or fine, report the flaky share per platform, and"
        " propose a quarantine list of the flaky ones (docs/flaky.md).",
        [
            "pytest-accel flaky ci/state/flaky-history.json --max-pct 5",
            "pytest-accel flaky history.json --write-quarantine ci/quarantine.json",
            "pytest-accel flaky --from s3://ci-state/my-repo --last 50 --max-pct 5",
        ],
    )
    flaky.add_argument(
        "files", nargs="*", metavar="HISTORY_OR_RECORD", help="flaky histories and records"
    )
    add_store_options(flaky)
    flaky.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (default), json (the --flaky-report shape) or markdown",
    )
    flaky.add_argument(
        "--max-pct",
        type=percentage,
        default=None,
        metavar="P",
        help="exit 1 when a platform's flaky share is above P percent (default: no limit)",
    )
    flaky.add_argument(
        "--write-quarantine",
        metavar="PATH",
        help="write the flaky tests (never the broken ones) as a JSON quarantine list,"
        " indented for review; the entries PATH holds already (text or JSON) are kept",
    )
    flaky.add_argument(
        "--quarantine",
        metavar="PATH",
        action="append",
        default=[],
        help="a quarantine list in use (text or JSON) whose entries --write-quarantine"
        " keeps, e.g. the text list you move to JSON (repeatable)",
    )
    flaky.add_argument(
        "--expires-in",
        type=positive_int,
        default=30,
        metavar="DAYS",
        help="days until the written entries expire (default 30)",
    )
    flaky.add_argument(
        "--window",
        type=positive_int,
        default=None,
        metavar="N",
        help="outcomes kept per test (default: the histories' own, else 50)",
    )
    flaky.set_defaults(handler=run)


def history_inputs(
    paths: Sequence[str], window: int | None, stored: Sequence[tuple[str, bytes]] = ()
) -> History:
    """Histories and records (each record one run; ``stored``: a store's, as their URLs
    and bytes) as one history."""
    from pytest_accel.flaky.history import (
        HISTORY_SCHEMA,
        RecordedRun,
        combine,
        parse_history,
        run_letters,
    )
    from pytest_accel.outcomes import interrupted
    from pytest_accel.perf.formats.record import RECORD_SCHEMA, attempts_of, check_record

    histories, runs = [], []
    inputs = [(path, read_json(path)) for path in paths]
    inputs += [(url, parse_json(url, raw)) for url, raw in stored]
    for path, data in inputs:
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema == RECORD_SCHEMA:
            record = check_record(path, data)
            if interrupted(record):
                sys.stderr.write(
                    one_line(
                        f"pytest-accel: note: {path}: not read: an interrupted run (exit"
                        " status 2) adds nothing to a history"
                    )
                    + "\n"
                )
                continue
            tests = record["tests"]
            runs.append(
                RecordedRun(
                    record["run"]["started"],
                    path,
                    record["env"]["key"],
                    record["env"]["platform"],
                    run_letters(
                        dict(zip(tests["id"], tests["outcome"], strict=True)), attempts_of(record)
                    ),
                )
            )
        elif schema == HISTORY_SCHEMA:
            histories.append(parse_history(path, data))
        else:
            raise InputError(path, f"is neither a flaky history nor a record (schema {schema!r})")
    return combine(histories, runs, window)


def why_none_proposed(report: dict[str, Any]) -> str:
    """What a proposal needs, and what the history held: why it proposed nothing."""
    from pytest_accel.flaky.classify import FLAKY_MIN_FAILURES, FLAKY_MIN_RUNS

    seen = ", ".join(f"{key} {env['runs']} run(s)" for key, env in report["envs"].items())
    return (
        f"none proposed: a test is flaky after at least {FLAKY_MIN_RUNS} runs of a key with"
        f" {FLAKY_MIN_FAILURES} or more failed first attempts (docs/flaky.md); the history"
        f" held {seen or 'no run'}"
    )


def run(args: argparse.Namespace) -> int:
    # The feature's modules load when this command runs, not for every command's parser.
    from pytest_accel.flaky.classify import analysis
    from pytest_accel.flaky.output import analysis_text
    from pytest_accel.flaky.quarantine import load_quarantine, merged_entries, propose, utc_today
    from pytest_accel.flaky.quarantine import to_json as quarantine_json

    if args.quarantine and not args.write_quarantine:
        raise CliError("--quarantine: keeps entries in --write-quarantine's list; give that too")
    kept: list[Entry] = []
    if args.write_quarantine:
        refuse_shared_files(
            [
                *(FileUse("HISTORY_OR_RECORD", path, reads=True) for path in args.files),
                *(FileUse("--quarantine", path, reads=True) for path in args.quarantine),
                FileUse("--write-quarantine", args.write_quarantine, reads=True, writes=True),
            ]
        )
        check_writable(args.write_quarantine, example="quarantine.json")
        # What the lists in use hold is kept: a proposal never drops a reviewed entry.
        sources = [*args.quarantine]
        if os.path.exists(args.write_quarantine):
            sources.append(args.write_quarantine)
        kept = [entry for path in sources for entry in load_quarantine(path).entries]
    if not args.files and not args.store:
        raise CliError("nothing to classify: give HISTORY_OR_RECORD files or --from URL")
    report = analysis(history_inputs(args.files, args.window, stored_records(args)))
    over = {
        platform: pct
        for platform, pct in report["flaky_pct"].items()
        if args.max_pct is not None and pct > args.max_pct
    }
    report["max_pct"] = args.max_pct
    report["over_limit"] = sorted(over)
    if args.write_quarantine:
        expires = utc_today() + timedelta(days=args.expires_in)
        proposed = propose(report, expires)
        entries, added = merged_entries(kept, proposed)
        write_json_atomic(args.write_quarantine, quarantine_json(entries), indent=True)
        sys.stderr.write(
            line_start(
                f"pytest-accel: wrote {len(entries)} entries to {args.write_quarantine}:"
                f" {len(entries) - added} kept from the lists in use, {added} new flaky"
                f" test(s) (expire {expires.isoformat()})"
                + ("" if proposed else f"; {why_none_proposed(report)}")
            )
            + "\n"
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(analysis_text(report, markdown=args.format == "markdown"))
    return EXIT_FINDINGS if over else EXIT_OK
