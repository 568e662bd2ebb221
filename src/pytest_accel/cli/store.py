"""``pytest-accel store``: send records to a store and list what it holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pytest_accel.cli.common import EXIT_OK, CliError, add_command
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
        dest="action", metavar="ACTION", required=True, help="push: send records; list: the runs"
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
    store.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pytest_accel.store.location import StoreError, open_store

    try:
        store = open_store(args.to if args.action == "push" else args.url)
        return _push(store, args) if args.action == "push" else _list(store, args)
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
        sys.stdout.write(line_start(f"{key}: {len(runs)} run(s)") + "\n")
        for found in newest(runs, len(runs)):
            sys.stdout.write(line_start(f"  {found.name}") + "\n")
    return EXIT_OK
