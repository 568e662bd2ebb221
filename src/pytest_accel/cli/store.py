"""``pytest-accel store``: send records to a store and list what it holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pytest_accel.cli.common import (
    EXIT_OK,
    CliError,
    add_command,
    add_store_options,
    positive_int,
    stored_records,
)
from pytest_accel.text import line_start


def add(commands: Any) -> None:
    store = add_command(
        commands,
        "store",
        "send records to a run store, list its runs",
        "A run store (--accel-store: a directory, file://, s3://, gs://, az://) keeps"
        " each run's record as a new object, by hardware key and time (docs/store.md)."
        " 'push' sends records a run could not send (it kept them on local disk and said"
        " where); 'list' shows the runs the store holds.",
        [
            "pytest-accel store push .pytest_cache/d/pytest-accel-unsent/*.json"
            " --to s3://ci-state/my-repo",
            "pytest-accel store list s3://ci-state/my-repo --key tpu/v5e-8",
        ],
    )
    actions = store.add_subparsers(
        dest="action",
        metavar="ACTION",
        required=True,
        help="push: send records; list: the runs; prune: delete old runs; push-map, pull-map:"
        " dependency maps by commit",
    )
    push = actions.add_parser("push", help="send record files to the store")
    push.add_argument("records", nargs="+", metavar="RECORD", help="records (--perf-record)")
    push.add_argument("--to", required=True, metavar="URL", help="the store")
    push.add_argument(
        "--host", type=int, metavar="N", help="the host index the runs had (--accel-host)"
    )
    listing = actions.add_parser("list", help="the runs the store holds, oldest first")
    listing.add_argument("url", metavar="URL", help="the store")
    listing.add_argument("--key", metavar="KEY", help="only this hardware key's runs")
    prune = actions.add_parser(
        "prune", help="delete old runs: retention by runs or days (the newest always stays)"
    )
    prune.add_argument("url", metavar="URL", help="the store")
    prune.add_argument("--key", metavar="KEY", help="only this hardware key's runs")
    prune.add_argument(
        "--keep-runs", type=positive_int, metavar="N", help="keep the newest N runs of each key"
    )
    prune.add_argument(
        "--keep-days", type=positive_int, metavar="DAYS", help="keep the runs of the last DAYS days"
    )
    push_map = actions.add_parser(
        "push-map", help="send a dependency map (--accel-map) as its commit's"
    )
    push_map.add_argument("map", metavar="MAP", help="a map a mapping run wrote")
    push_map.add_argument("--to", required=True, metavar="URL", help="the store")
    pull_map = actions.add_parser(
        "pull-map", help="fetch the map of the nearest commit at or before REF the store has"
    )
    pull_map.add_argument("url", metavar="URL", help="the store")
    pull_map.add_argument("-o", "--output", required=True, metavar="MAP", help="where to write it")
    pull_map.add_argument(
        "--ref", default="HEAD", metavar="REF", help="the commit to start from (default HEAD)"
    )
    pull_map.add_argument(
        "--depth",
        type=positive_int,
        default=1000,
        metavar="N",
        help="commits before REF to look through (default 1000)",
    )
    store.set_defaults(handler=run)
    add_export(commands)


def run(args: argparse.Namespace) -> int:
    from pytest_accel.store.location import StoreError, open_store

    try:
        if args.action == "prune" and args.keep_runs is None and args.keep_days is None:
            raise CliError("prune: give --keep-runs N or --keep-days DAYS")
        store = open_store(args.to if args.action in ("push", "push-map") else args.url)
        handlers = {
            "push": _push,
            "list": _list,
            "prune": _prune,
            "push-map": _push_map,
            "pull-map": _pull_map,
        }
        return handlers[args.action](store, args)
    except StoreError as exc:
        raise CliError(str(exc)) from None


def _push(store: Any, args: argparse.Namespace) -> int:
    from pytest_accel.files import parse_json, read_bytes
    from pytest_accel.perf.formats.record import check_record
    from pytest_accel.store.history import run_object
    from pytest_accel.store.location import ObjectExists

    checked = []
    for path in args.records:  # every file checked before any is sent
        data = read_bytes(path)
        checked.append((path, data, check_record(path, parse_json(path, data))))
    for path, data, record in checked:
        name = run_object(record, data, args.host).name
        try:
            url = store.put_new(name, data)
        except ObjectExists:
            held = store.read([name])[name]
            if held != data:  # another record under the same run: never overwritten
                raise
            sys.stdout.write(line_start(f"{path}: in the store already") + "\n")
            continue
        sys.stdout.write(line_start(f"{path}: sent to {url}") + "\n")
    return EXIT_OK


def _list(store: Any, args: argparse.Namespace) -> int:
    from pytest_accel.store.layout import newest

    keys = [args.key] if args.key else store.hardware_keys()
    if not keys:
        raise CliError(f"{store.location.shown}: holds no runs")
    for key in keys:
        runs = store.runs_of(key)
        unfinished = store.unfinished_of(key)
        killed = f", {len(unfinished)} that never ended" if unfinished else ""
        sys.stdout.write(line_start(f"{key}: {len(runs)} run(s){killed}") + "\n")
        for found in newest(runs, len(runs)):
            sys.stdout.write(line_start(f"  {found.name}") + "\n")
        for found, parts in unfinished.items():
            tests = _finished_tests(store, parts)
            sys.stdout.write(
                line_start(
                    f"  {found.name}: interrupted: no record (the run was killed); {tests}"
                    f" test(s) finished, in {len(parts)} progress object(s)"
                )
                + "\n"
            )
    return EXIT_OK


def _finished_tests(store: Any, parts: list[str]) -> int:
    """The tests a killed run's progress objects hold (one JSON object a line)."""
    fetched = store.read(parts)
    return sum(value.count(b"\n") for value in fetched.values() if isinstance(value, bytes))


def _prune(store: Any, args: argparse.Namespace) -> int:
    import time

    from pytest_accel.store.layout import ANNOTATIONS, SUMMARY, companion, to_prune

    keys = [args.key] if args.key else store.hardware_keys()
    for key in keys:
        gone = to_prune(store.runs_of(key), args.keep_runs, args.keep_days, time.time())
        names = [
            name
            for run in gone
            for name in (companion(run, SUMMARY), companion(run, ANNOTATIONS), run.name)
        ]
        store.remove(names)
        left = len(store.runs_of(key))
        sys.stdout.write(line_start(f"{key}: {len(gone)} run(s) deleted, {left} kept") + "\n")
    return EXIT_OK


def _push_map(store: Any, args: argparse.Namespace) -> int:
    from pytest_accel.files import read_bytes
    from pytest_accel.selection.mapfile import open_map, read_info
    from pytest_accel.store.maps import send_map

    connection = open_map(args.map)
    try:
        info = read_info(connection, args.map)
    finally:
        connection.close()
    if not info.commit:
        raise CliError(f"{args.map}: a map made outside git: no commit to keep it under")
    url = send_map(store, read_bytes(args.map, limit=1 << 34), info.commit)
    sys.stdout.write(line_start(f"{args.map}: the map of {info.commit[:12]} sent to {url}") + "\n")
    return EXIT_OK


def _pull_map(store: Any, args: argparse.Namespace) -> int:
    from pytest_accel.files import write_atomic
    from pytest_accel.store.maps import NoMap, fetch_map

    try:
        found = fetch_map(store, args.ref, depth=args.depth)
    except NoMap as exc:
        raise CliError(str(exc)) from None
    write_atomic(args.output, [found.data])
    sys.stdout.write(
        line_start(
            f"{args.output}: the map of {found.commit[:12]} ({found.behind} commit(s) before"
            f" {args.ref}) from {store.location.shown}"
        )
        + "\n"
    )
    return EXIT_OK


def add_export(commands: Any) -> None:
    export = add_command(
        commands,
        "export",
        "one JSON line per test per run, for a warehouse",
        "Write one JSON object per test per run, one a line (JSON Lines), flat and typed"
        " alike in every line, for BigQuery, ClickHouse or PostgreSQL: the run (id, start,"
        " commit, branch, shard, exit status, hardware key, jax/jaxlib/torch versions) and"
        " the test (outcome, phases, compilation, device memory, attempts): docs/format.md,"
        " 'Export'. From record files, or a store's runs (--from).",
        [
            "pytest-accel export build/record.json -o runs.jsonl",
            "pytest-accel export --from s3://ci-state/my-repo --key tpu/v5e-8 --last 100"
            " -o runs.jsonl",
        ],
    )
    export.add_argument("records", nargs="*", metavar="RECORD", help="records (--perf-record)")
    add_store_options(export)
    export.add_argument("-o", "--output", required=True, metavar="JSONL", help="where to write")
    export.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from pytest_accel.files import dumps, parse_json, read_bytes, write_atomic
    from pytest_accel.perf.formats.export import export_rows
    from pytest_accel.perf.formats.record import check_record

    if not args.records and not args.store:
        raise CliError("nothing to export: give RECORD files or --from URL")
    sources = [(path, read_bytes(path)) for path in args.records] + stored_records(args)
    records = [(where, check_record(where, parse_json(where, raw))) for where, raw in sources]
    # ``dumps`` ends each object with its newline: one object a line.
    lines = [dumps(row) for where, record in records for row in export_rows(record, where)]
    write_atomic(args.output, lines)
    sys.stdout.write(
        line_start(f"{args.output}: {len(lines)} line(s) from {len(records)} run(s)") + "\n"
    )
    return EXIT_OK
