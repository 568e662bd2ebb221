"""The timing commands: ``compare``, ``baseline``, ``upgrade`` and ``merge``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pytest_accel.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    CliError,
    add_command,
    add_rule_options,
    given_of,
    non_negative_float,
    positive_int,
    rule_of,
)
from pytest_accel.file_uses import FileUse, refuse_shared_files
from pytest_accel.files import (
    check_writable,
    dumps,
    read_json,
    write_json_atomic,
)
from pytest_accel.perf import output
from pytest_accel.perf.formats.baseline import BASELINE_VERSION
from pytest_accel.perf.formats.record import RECORD_VERSION, check_record, record_json
from pytest_accel.perf.offline import accept_changes, compare_files, fold_records, upgrade_file
from pytest_accel.perf.options import DEFAULT_WINDOW
from pytest_accel.text import line_start, one_line

if TYPE_CHECKING:
    from pytest_accel.perf.formats.merge import Merged


def add(commands: Any) -> None:
    for adder in (_add_compare, _add_baseline, _add_upgrade, _add_merge):
        adder(commands)


def _add_compare(commands: Any) -> None:
    comp = add_command(
        commands,
        "compare",
        "a record against a baseline: regressions, changes",
        "Compare a timing record with a baseline, as --perf-baseline does in a run: single-run"
        " regressions and improvements, changes over the baseline's runs, new and missing"
        " tests (docs/regressions.md).",
        [
            "pytest-accel compare build/record.json --baseline ci/state/baseline.json",
            "pytest-accel compare merged.json --baseline baseline.json --format markdown --fail",
        ],
    )
    comp.add_argument("record", metavar="RECORD", help="a record written by --perf-record")
    comp.add_argument(
        "--baseline",
        required=True,
        metavar="PATH",
        help="a baseline file, a record, or a pytest-split .test_durations map",
    )
    comp.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (default): the terminal section; json: what the record's comparison"
        " holds; markdown: the job-summary table",
    )
    comp.add_argument(
        "--fail",
        action="store_true",
        help="exit 1 when anything regressed or changed to slower (default: exit 0)",
    )
    comp.add_argument(
        "--accel-key",
        "--env-key",  # its older name
        dest="key",
        metavar="KEY",
        help="compare under this hardware key instead of the record's (default: the record's;"
        " --env-key is its older name)",
    )
    comp.add_argument(
        "--top", type=positive_int, default=20, metavar="N", help="rows of each kind (default 20)"
    )
    comp.add_argument(
        "--new-slow",
        type=non_negative_float,
        default=None,
        metavar="SECONDS",
        help="name a new test that took SECONDS or more (default: what the run used, 1.0"
        " where the record does not say)",
    )
    add_rule_options(comp)
    comp.set_defaults(handler=compare)


def compare(args: argparse.Namespace) -> int:
    comparison, judged_by = compare_files(args.record, args.baseline, given_of(args), args.key)
    # An interrupted run is a part of the suite: --fail never passes on it.
    failing = bool(args.fail and (comparison.alarms or comparison.interrupted))
    if args.format == "json":
        payload = {**comparison.to_json(), "judged_by": judged_by}
        sys.stdout.buffer.write(dumps(payload, indent=True))
    elif args.format == "markdown":
        sys.stdout.write(output.markdown(comparison, failing, "--fail"))
    elif not comparison.found:
        sys.stdout.write(output.missing_env_line(comparison, args.baseline) + "\n")
    else:
        for row in output.terminal_rows(comparison, args.top):
            sys.stdout.write(row.text + "\n")
        sys.stdout.write(one_line(judged_by) + "\n")
        sys.stdout.write(output.summary_line(comparison, failing, "--fail") + "\n")
    return EXIT_FINDINGS if failing else EXIT_OK


def _add_baseline(commands: Any) -> None:
    base = add_command(
        commands,
        "baseline",
        "add records to a baseline, or accept a change",
        "Fold records into a baseline file (created if missing) as its newest runs, oldest"
        " first, under the same file lock as --perf-update-baseline; or accept a change the"
        " baseline's own runs show, so that its new level is the baseline and the alarm stops.",
        [
            "pytest-accel baseline --into ci/state/baseline.json shard-*.json",
            "pytest-accel baseline --into ci/state/baseline.json --accept 't.py::test_a'",
        ],
    )
    base.add_argument(
        "records", nargs="*", metavar="RECORD", help="records written by --perf-record"
    )
    base.add_argument(
        "--into", required=True, metavar="BASELINE", help="the baseline file to add to"
    )
    base.add_argument(
        "--window",
        type=positive_int,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"runs kept per hardware key (default {DEFAULT_WINDOW})",
    )
    base.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="ID",
        help="accept the change of this test, class or module (repeatable; 'all' accepts"
        " every change)",
    )
    base.add_argument(
        "--accel-key",
        "--env-key",  # its older name
        dest="key",
        metavar="KEY",
        help="accept changes under this hardware key only (default: every key; --env-key is"
        " its older name)",
    )
    add_rule_options(base)
    base.set_defaults(handler=baseline)


def baseline(args: argparse.Namespace) -> int:
    refuse_shared_files(
        [
            *(FileUse("RECORD", path, reads=True) for path in args.records),
            FileUse("--into", args.into, reads=True, writes=True),
        ]
    )
    check_writable(args.into, example="baseline.json")
    if args.records:
        folded = fold_records(args.records, args.into, args.window, rule_of(args).time)
        for note in folded.notes:
            sys.stderr.write(one_line(f"pytest-accel: note: {note}") + "\n")
        envs = folded.baseline.envs
        # A test sampled as its process's first (``warmup``) is one of the suite's too.
        tests = sum(len({*env.ids["tests"], *env.ids["warmup"]}) for env in envs.values())
        sys.stdout.write(
            line_start(
                f"{args.into}: added {folded.added} run(s); {tests} test(s) under"
                f" {', '.join(sorted(envs)) or 'no key yet'}"
            )
            + "\n"
        )
    if args.accept:
        accepted = accept_changes(args.into, args.accept, rule_of(args), args.key)
        for change in accepted:
            sys.stdout.write(one_line(f"accepted {output.describe_change(change)}") + "\n")
        unknown = set(args.accept) - {"all"} - {change.id for change in accepted}
        if unknown:
            raise CliError(
                f"{args.into}: no change to accept for {', '.join(sorted(unknown))}"
                " (its runs show none; `pytest-accel compare` lists the changes)"
            )
        if not accepted:
            sys.stdout.write(f"{args.into}: no change to accept\n")
    elif not args.records:
        raise CliError("give RECORD files to add, or --accept ID")
    return EXIT_OK


def _add_upgrade(commands: Any) -> None:
    upgrade = add_command(
        commands,
        "upgrade",
        "rewrite older baselines and records in the current version",
        "Rewrite baselines and records of older versions in place, atomically: records as"
        f" version {RECORD_VERSION} (a class's or module's tests share one entry), baselines"
        f" as version {BASELINE_VERSION} (the samples as hexadecimal columns, read many times"
        " faster and held in a fraction of the memory) with their summary (what lets a run"
        " of fast tests be compared without numpy). Every reader still accepts the older"
        " versions and a baseline without a summary; this is for files you keep.",
        ["pytest-accel upgrade ci/state/baseline.json build/record.json"],
    )
    upgrade.add_argument(
        "files", nargs="+", metavar="FILE", help="baselines and records to rewrite"
    )
    upgrade.set_defaults(handler=upgrade_files)


def upgrade_files(args: argparse.Namespace) -> int:
    for path in args.files:
        kind, before, now = upgrade_file(path)
        summary = ", with its summary" if kind == "baseline" else ""
        sys.stdout.write(line_start(f"{path}: {kind} version {before} -> {now}{summary}") + "\n")
    return EXIT_OK


def _add_merge(commands: Any) -> None:
    merge = add_command(
        commands,
        "merge",
        "merge the records of shards into one",
        "Merge the records of CI shards (or of any runs of one hardware key) into one record:"
        " a test in two records keeps the later run; classes and modules are recomputed."
        " Dependency maps (--accel-map) of shards merge into one map the same way (a test"
        " in two keeps the later map's entry; OUT is created or updated).",
        [
            "pytest-accel merge -o build/record.json shard-1.json shard-2.json",
            "pytest-accel merge --by-env -o build/record.json tpu-*.json cpu-*.json",
            "pytest-accel merge -o ci/map.db map-shard-1.db map-shard-2.db",
            "pytest-accel merge --hosts -o build/record.json host-0.json host-1.json",
        ],
    )
    merge.add_argument(
        "records",
        nargs="+",
        metavar="RECORD",
        help="the records to merge, or dependency maps (--accel-map) of shards",
    )
    merge.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="where to write the merged record"
    )
    merge.add_argument(
        "--by-env",
        action="store_true",
        help="records of different hardware keys: write one OUT.<key>.json per key"
        " (default: refuse to mix them)",
    )
    merge.add_argument(
        "--hosts",
        action="store_true",
        help="the records of one multi-host run's hosts (run.host): a test failed if it"
        " failed on any host, its times are its slowest host's; a host that never reported"
        " is named (default: shards, each test from the later run)",
    )
    merge.set_defaults(handler=merge_files)


def merge_files(args: argparse.Namespace) -> int:
    from pytest_accel.perf.formats.merge import MergeError, join_hosts, merge_records
    from pytest_accel.selection.mapfile import is_map, merge_maps

    maps = [is_map(path) for path in args.records]
    if any(maps):
        if not all(maps):
            first = args.records[maps.index(True)]
            other = args.records[maps.index(False)]
            raise CliError(
                f"{other}: not a map (a map is an SQLite file), while {first} is one:"
                " merge maps with maps and records with records"
            )
        reading = [FileUse("MAP", path, reads=True) for path in args.records]
        refuse_shared_files([*reading, FileUse("-o", args.output, writes=True)])
        count = merge_maps(args.records, args.output)
        sys.stdout.write(
            line_start(f"{args.output}: merged {len(args.records)} map(s): {count} test(s)") + "\n"
        )
        return EXIT_OK
    reading = [FileUse("RECORD", path, reads=True) for path in args.records]
    refuse_shared_files([*reading, FileUse("-o", args.output, writes=True)])
    check_writable(args.output)
    records = [(path, check_record(path, read_json(path))) for path in args.records]
    if args.hosts and args.by_env:
        raise CliError("--hosts joins one run's hosts, of one hardware key: drop --by-env")
    try:
        results = (
            [join_hosts(records)] if args.hosts else merge_records(records, by_env=args.by_env)
        )
    except MergeError as exc:
        raise CliError(str(exc)) from None
    outputs = _output_paths(args.output, [result.key for result in results])
    refuse_shared_files(
        [*reading, *(FileUse(f"-o for {key}", out, writes=True) for key, out in outputs)]
    )
    for _, out in outputs:
        check_writable(out)
    for result in results:
        _merge_cost(result, records)
        _merge_selection(result, records)
    for result, (_, out) in zip(results, outputs, strict=True):
        write_json_atomic(out, record_json(result.record))
        for note in result.notes:
            sys.stderr.write(one_line(f"pytest-accel: note: {note}") + "\n")
        sys.stdout.write(
            line_start(
                f"{out}: merged {len(result.record['run']['merged_from'])} record(s) under"
                f" {result.key}: {len(result.record['tests']['id'])} test(s),"
                f" {len(result.record['classes']['id'])} class(es),"
                f" {len(result.record['modules']['id'])} module(s)"
            )
            + "\n"
        )
    return EXIT_OK


def _merge_cost(result: Merged, records: list[tuple[str, dict[str, Any]]]) -> None:
    """The shards' ``cost`` sections added up into the merged record's, where every
    shard of its key has one at one price; a note where they cannot be."""
    from pytest_accel.cost.model import merged_section

    mine = [data for _, data in records if data["env"]["key"] == result.key]
    sections = [data["cost"] for data in mine if isinstance(data.get("cost"), dict)]
    if not sections:
        return
    section = merged_section(sections) if len(sections) == len(mine) else None
    if section is None:
        result.notes.append(
            f"cost: {len(sections)} of {len(mine)} record(s) have a cost section"
            + (" at different prices" if len(sections) == len(mine) else "")
            + "; the merged record has none (give every shard the same --accel-price)"
        )
        return
    result.record["cost"] = section


def _merge_selection(result: Merged, records: list[tuple[str, dict[str, Any]]]) -> None:
    """The shards' ``selection`` sections as one: each shard decided alike over the
    whole suite (selection runs before sharding), so the decision is any shard's and
    the failures are all of theirs; a note where they decided otherwise."""
    from pytest_accel.selection.section import check_selection, merged_selection

    mine = [(path, data) for path, data in records if data["env"]["key"] == result.key]
    sections = [
        check_selection(path, data["selection"])
        for path, data in mine
        if data.get("selection") is not None
    ]
    if not sections:
        return
    section = merged_selection(sections) if len(sections) == len(mine) else None
    if section is None:
        result.notes.append(
            f"selection: {len(sections)} of {len(mine)} record(s) have a selection section"
            " deciding alike; the merged record has none (run every shard with the same map)"
        )
        return
    result.record["selection"] = section


def _output_paths(output_path: str, keys: list[str]) -> list[tuple[str, str]]:
    """(key, path) per merged record: OUT itself for one, OUT.<key>.json for several.
    Keys that come to one file name (``cpu/x1``, ``cpu_x1``) are refused before anything
    is written: each would replace the last."""
    if len(keys) == 1:
        return [(keys[0], output_path)]
    paths: dict[str, str] = {}
    for key in keys:
        out = _per_key_path(output_path, key)
        clash = next((other for other, path in paths.items() if path == out), None)
        if clash is not None:
            raise CliError(
                f"{out}: hardware keys {clash!r:.60} and {key!r:.60} both come to this file"
                " name with --by-env; merge them apart (one -o each) or rename a key"
                " (--accel-key)"
            )
        paths[key] = out
    return list(paths.items())


def _per_key_path(output_path: str, key: str) -> str:
    slug = "".join(c if c.isalnum() else "_" for c in key).strip("_") or "env"
    stem, dot, suffix = output_path.rpartition(".")
    return f"{stem}.{slug}.{suffix}" if dot else f"{output_path}.{slug}"
