"""``pytest-accel report``: the HTML report from files."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_accel.cli.common import (
    EXIT_OK,
    CliError,
    add_command,
    add_rule_options,
    add_store_options,
    given_of,
)
from pytest_accel.file_uses import FileUse, refuse_shared_files
from pytest_accel.files import check_writable, read_json, write_atomic
from pytest_accel.text import line_start

if TYPE_CHECKING:
    from pytest_accel.perf.formats.baseline import Baseline


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
            "pytest-accel report --from s3://ci-state/my-repo --key tpu/v5e-8 -o report.html",
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
    add_store_options(
        report,
        store="a run store (--accel-store): its newest run, judged against its runs before it",
        key="the hardware key (needed where it holds several)",
        last=1,
        newest="the newest N runs on the page, side by side",
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

    if not (args.records or args.baseline or args.history or args.store):
        raise CliError("nothing to report: give RECORD files, --from, --baseline or --history")
    if (args.key or args.last != 1) and not args.store:
        raise CliError("--key and --last pick runs of a store: give --from URL")
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
    shown = None
    if args.store:
        shown = _from_store(args.store, args.key, args.last)
        records += [*shown.earlier, shown.record]
        baseline = baseline if baseline is not None else shown.baseline
    history = load_history(args.history) if args.history else None
    page = render(build(records, baseline, history, given_of(args)))
    write_atomic(args.output, [page.encode("utf-8")])
    size = len(page.encode("utf-8"))
    sys.stdout.write(line_start(f"{args.output}: HTML report, {size / 1024:.0f} KiB") + "\n")
    if shown is not None:
        for name in shown.killed:
            sys.stdout.write(
                line_start(
                    f"pytest-accel: a later run never ended ({name}: killed, no record; its"
                    " finished tests are in the store as progress): this page shows the"
                    " newest run that ended"
                )
                + "\n"
            )
        _as_the_run_showed_github(shown)
    return EXIT_OK


@dataclass(frozen=True)
class FromStore:
    """A store's newest run: its record (URL, checked data), the store's runs of its
    key folded, and what the run showed GitHub Actions (None: not kept beside it)."""

    record: tuple[str, dict[str, Any]]
    baseline: Baseline
    summary: str | None
    annotations: list[str] | None
    killed: tuple[str, ...] = ()  # newer runs that never ended: no record, progress only
    earlier: tuple[tuple[str, Any], ...] = ()  # the runs before it on the page (--last)


def _as_the_run_showed_github(shown: FromStore) -> None:
    """Under GitHub Actions, what the run would have shown there itself: its workflow
    commands on stdout, its job summary appended to ``GITHUB_STEP_SUMMARY``."""
    from pytest_accel.github import append_summary, in_github_actions

    where = shown.record[0]
    if shown.summary is None or shown.annotations is None:
        sys.stdout.write(
            line_start(f"{where}: no job summary or annotations kept beside it") + "\n"
        )
        return
    if in_github_actions():
        for line in shown.annotations:
            sys.stdout.write(line + "\n")
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path and shown.summary:
        why_not = append_summary(path, shown.summary)
        said = f"pytest-accel: {why_not}" if why_not else f"{path}: the run's job summary appended"
        sys.stdout.write(line_start(said) + "\n")


def _joined(
    where: str, record: dict[str, Any], named: str, objects: Sequence[tuple[str, bytes]]
) -> tuple[str, dict[str, Any]]:
    """The newest run's hosts joined (``merge.join_hosts``): its other hosts' records
    among the store's newest runs; what joining found is said on stdout."""
    from pytest_accel.files import parse_json
    from pytest_accel.perf.formats.merge import MergeError, join_hosts
    from pytest_accel.perf.formats.record import check_record

    hosts = []
    for url, raw in objects:
        data = check_record(url, parse_json(url, raw))
        if (data["run"].get("slice") or {}).get("name") == named and data["env"]["key"] == (
            record["env"]["key"]
        ):
            hosts.append((url, data))
    try:
        joined = join_hosts(hosts or [(where, record)])
    except MergeError as exc:
        raise CliError(f"run {named}: {exc}") from None
    for note in joined.notes:
        sys.stdout.write(line_start(f"pytest-accel: run {named}: {note}") + "\n")
    return f"{where} (run {named}, {len(hosts)} host(s))", joined.record


def _from_store(url: str, key: str | None, last: int = 1) -> FromStore:
    """A store's newest run of ``key`` (the store's only key where not given): judged
    against the store's runs before it, as it was."""
    from pytest_accel.files import parse_json
    from pytest_accel.perf.formats.record import check_record
    from pytest_accel.perf.model import DEFAULT_WINDOW
    from pytest_accel.perf.offline import baseline_of_stored
    from pytest_accel.store.history import newest_runs
    from pytest_accel.store.layout import ANNOTATIONS, SUMMARY, companion, newest
    from pytest_accel.store.location import StoreError, open_store

    try:
        store = open_store(url)
        if key is None:
            keys = store.hardware_keys()
            if len(keys) != 1:
                raise CliError(
                    f"{store.location.shown}: give --key: it holds runs of {', '.join(keys)}"
                    if keys
                    else f"{store.location.shown}: holds no runs"
                )
            key = keys[0]
        runs = newest(store.runs_of(key), 1)
        unfinished = store.unfinished_of(key)
        if not runs:
            killed = f" ({len(unfinished)} run(s) that never ended)" if unfinished else ""
            raise CliError(f"{store.location.shown}: holds no runs of {key!r}{killed}")
        run = runs[0]
        later = [found.name for found in unfinished if found.started > run.started]
        window = max(DEFAULT_WINDOW, last) + 1
        stored = newest_runs(store, key, window)  # the newest run among them
        beside = [companion(run, SUMMARY), companion(run, ANNOTATIONS)]
        fetched = store.read(beside)
        summary, annotations = (fetched[name] for name in beside)
    except StoreError as exc:
        raise CliError(str(exc)) from None
    where = f"{stored.name}/{run.name}"
    value = dict(stored.objects).get(where)
    if value is None:
        raise CliError(f"{where}: could not be read")
    record = check_record(where, parse_json(where, value))
    folded = baseline_of_stored(stored.name, key, stored.objects, window)
    named = (record["run"].get("slice") or {}).get("name")
    if record["run"].get("host") is not None and named:
        where, record = _joined(where, record, named, stored.objects)
    earlier = _earlier(stored.objects, record, last - 1)
    return FromStore(
        (where, record),
        folded.baseline,
        summary.decode("utf-8") if isinstance(summary, bytes) else None,
        annotations.decode("utf-8").splitlines() if isinstance(annotations, bytes) else None,
        tuple(later),
        tuple(earlier),
    )


def _earlier(
    objects: Sequence[tuple[str, bytes]], newest: dict[str, Any], count: int
) -> list[tuple[str, Any]]:
    """The ``count`` runs before ``newest`` among a store's objects (oldest first), the
    hosts of a multi-host run joined, as records."""
    if count <= 0:
        return []
    from pytest_accel.files import parse_json
    from pytest_accel.perf.formats.record import check_record
    from pytest_accel.perf.offline import join_slices

    checked = [(url, check_record(url, parse_json(url, raw))) for url, raw in objects]
    own = {newest["run"].get("id"), (newest["run"].get("slice") or {}).get("name")} - {None}
    others = [
        (url, data)
        for url, data in checked
        if data["run"].get("id") not in own
        and (data["run"].get("slice") or {}).get("name") not in own
    ]
    return list(join_slices(others, []))[-count:]
