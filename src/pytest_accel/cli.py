"""The ``pytest-accel`` command (also ``python -m pytest_accel``).

Exit statuses: 0 fine, 1 findings with ``--fail``, 2 bad input or usage (one line on
stderr naming the file and the problem, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from pytest_accel import __version__
from pytest_accel.files import InputError, check_writable, read_json, write_json_atomic
from pytest_accel.flaky.classify import analysis
from pytest_accel.flaky.history import (
    HISTORY_SCHEMA,
    History,
    RecordedRun,
    combine,
    parse_history,
    run_letters,
)
from pytest_accel.flaky.output import analysis_text
from pytest_accel.flaky.quarantine import propose, utc_today
from pytest_accel.flaky.quarantine import to_json as quarantine_json
from pytest_accel.hardware.builtin import detect_builtin
from pytest_accel.hardware.detection import (
    PROBE_TIMEOUT,
    DetectionContext,
    DetectionError,
    cpu_detection,
    sysroot_from_env,
)
from pytest_accel.hardware.probe import ProbeError, probe_and_confirm
from pytest_accel.perf import output
from pytest_accel.perf.merge import MergeError, merge_records
from pytest_accel.perf.offline import (
    accept_changes,
    compare_files,
    durations_file,
    fold_records,
    upgrade_file,
)
from pytest_accel.perf.options import DEFAULT_WINDOW, RULE_FLAGS, rule_from
from pytest_accel.perf.record import RECORD_SCHEMA, attempts_of, check_record
from pytest_accel.reports import problem
from pytest_accel.scaleout.options import SHARD_BY
from pytest_accel.scaleout.sharding import groups_from_node_ids, plan_tests
from pytest_accel.settings import parse_positive_int
from pytest_accel.text import line_start, one_line

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class CliError(Exception):
    """Bad input: printed as one line, exit 2."""


def _detect(args: argparse.Namespace) -> int:
    context = DetectionContext(sysroot_from_env(os.environ), dict(os.environ))
    detection = detect_builtin(context) or cpu_detection(context)
    probe: dict[str, object] | None = None
    if args.probe == "jax":
        try:
            confirmed = probe_and_confirm(detection.platform, detection, args.probe_timeout)
            probe = {"ok": True, **confirmed.to_json()}
            detection = confirmed
        except ProbeError as exc:
            probe = {"ok": False, "error": str(exc)}
    if args.json:
        payload = {**detection.to_json(), "probe": probe}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(f"accel: {detection.describe()}\n")  # one line, whatever was read
        for line in detection.evidence:
            sys.stdout.write(one_line(f"  checked: {line}") + "\n")
        if probe is not None and not probe["ok"]:
            sys.stdout.write(one_line(f"  probe failed: {probe['error']}") + "\n")
    return EXIT_FINDINGS if probe is not None and not probe["ok"] else EXIT_OK


def _rule_values(args: argparse.Namespace) -> dict[str, object]:
    return {
        flag: getattr(args, flag.removeprefix("--perf-").replace("-", "_")) for flag in RULE_FLAGS
    }


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_files(
        args.record,
        args.baseline,
        rule_from(_rule_values(args)),
        args.env_key,
        new_slow=args.new_slow,
    )
    failing = bool(args.fail and comparison.alarms)
    if args.format == "json":
        sys.stdout.write(json.dumps(comparison.to_json(), indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(output.markdown(comparison, failing))
    elif not comparison.found:
        sys.stdout.write(output.missing_env_line(comparison, args.baseline) + "\n")
    else:
        for row in output.terminal_rows(comparison, args.top):
            sys.stdout.write(row + "\n")
        sys.stdout.write(output.summary_line(comparison, failing) + "\n")
    return EXIT_FINDINGS if failing else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    check_writable(args.into)
    if args.records:
        baseline, runs = fold_records(args.records, args.into, args.window)
        tests = sum(len(env.ids["tests"]) for env in baseline.envs.values())
        sys.stdout.write(
            line_start(
                f"{args.into}: added {runs} run(s); {tests} test(s) under"
                f" {', '.join(sorted(baseline.envs))}"
            )
            + "\n"
        )
    if args.accept:
        rule = rule_from(_rule_values(args))
        accepted = accept_changes(args.into, args.accept, rule, args.env_key)
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
    return EXIT_OK


def _upgrade(args: argparse.Namespace) -> int:
    """Version 1 baselines and records, rewritten in place as version 2 (atomically)."""
    for path in args.files:
        kind, version = upgrade_file(path)
        sys.stdout.write(line_start(f"{path}: {kind} version {version} -> 2") + "\n")
    return EXIT_OK


def _merge(args: argparse.Namespace) -> int:
    check_writable(args.output)
    records = [(path, check_record(path, read_json(path))) for path in args.records]
    try:
        results = merge_records(records, by_env=args.by_env)
    except MergeError as exc:
        raise CliError(str(exc)) from None
    for result in results:
        out = args.output if len(results) == 1 else _per_key_path(args.output, result.key)
        write_json_atomic(out, result.record)
        for note in result.notes:
            sys.stderr.write(one_line(f"pytest-accel: note: {note}") + "\n")
        sys.stdout.write(
            line_start(
                f"{out}: merged {len(result.record['run']['merged_from'])} record(s) under"
                f" {result.key}: {len(result.record['tests'])} test(s),"
                f" {len(result.record['classes'])} class(es),"
                f" {len(result.record['modules'])} module(s)"
            )
            + "\n"
        )
    return EXIT_OK


def _per_key_path(output: str, key: str) -> str:
    slug = "".join(c if c.isalnum() else "_" for c in key).strip("_") or "env"
    stem, dot, suffix = output.rpartition(".")
    return f"{stem}.{slug}.{suffix}" if dot else f"{output}.{slug}"


def _shard(args: argparse.Namespace) -> int:
    """A plan from a durations file alone: a record knows each test's class and module;
    from a baseline or a pytest-split map they are read from the node ids."""
    known, groups = durations_file(args.durations, args.env_key)
    shard_plan = plan_tests(known, groups or groups_from_node_ids(known), args.by, args.splits)
    loads = shard_plan.loads()
    if args.format == "json":
        payload = {
            "splits": args.splits,
            "by": args.by,
            "imbalance": shard_plan.imbalance(),
            "shards": [
                {
                    "shard": f"{i + 1}/{args.splits}",
                    "estimated": loads[i],
                    "tests": shard_plan.tests(i),
                }
                for i in range(args.splits)
            ],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        for i in range(args.splits):
            sys.stdout.write(
                f"shard {i + 1}/{args.splits}: {len(shard_plan.tests(i))} test(s),"
                f" {len(shard_plan.shards[i])}"
                f" {args.by} unit(s), estimated {loads[i]:.1f}s\n"
            )
        sys.stdout.write(
            f"largest shard: {shard_plan.imbalance():.3f}x the ideal"
            f" ({sum(loads) / args.splits:.1f}s)\n"
        )
    return EXIT_OK


def _history_inputs(paths: Sequence[str], window: int | None) -> History:
    """Histories and records (each record one run) as one history."""
    histories, runs = [], []
    for path in paths:
        data = read_json(path)
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema == RECORD_SCHEMA:
            record = check_record(path, data)
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


def _flaky(args: argparse.Namespace) -> int:
    report = analysis(_history_inputs(args.files, args.window))
    over = {
        platform: pct
        for platform, pct in report["flaky_pct"].items()
        if args.max_pct is not None and pct > args.max_pct
    }
    report["max_pct"] = args.max_pct
    report["over_limit"] = sorted(over)
    if args.write_quarantine:
        check_writable(args.write_quarantine)
        expires = utc_today() + timedelta(days=args.expires_in)
        entries = propose(report, expires)
        write_json_atomic(args.write_quarantine, quarantine_json(entries))
        sys.stderr.write(
            f"pytest-accel: wrote {len(entries)} flaky test(s) to {args.write_quarantine}"
            f" (expires {expires.isoformat()})\n"
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(analysis_text(report, markdown=args.format == "markdown"))
    return EXIT_FINDINGS if over else EXIT_OK


def _percentage(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage between 0 and 100")
    return value


def _positive_int(text: str) -> int:
    try:
        return parse_positive_int("value", text)
    except pytest.UsageError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-accel", description="Accelerator detection, timing records and reports."
    )
    parser.add_argument("--version", action="version", version=f"pytest-accel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_detect,
        _add_compare,
        _add_baseline,
        _add_upgrade,
        _add_merge,
        _add_flaky,
        _add_shard,
    ):
        add(commands)
    return parser


def _add_detect(commands: Any) -> None:
    detect = commands.add_parser("detect", help="print what the plugin detects and why")
    detect.add_argument("--json", action="store_true", help="print JSON")
    detect.add_argument(
        "--probe", choices=("none", "jax"), default="none", help="confirm with JAX in a subprocess"
    )
    detect.add_argument("--probe-timeout", type=float, default=PROBE_TIMEOUT, metavar="SECONDS")
    detect.set_defaults(handler=_detect)


def _add_compare(commands: Any) -> None:
    comp = commands.add_parser("compare", help="compare a record with a baseline")
    comp.add_argument("record", metavar="RECORD", help="a record written by --perf-record")
    comp.add_argument("--baseline", required=True, help="baseline, record or .test_durations")
    comp.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    comp.add_argument("--fail", action="store_true", help="exit 1 when anything regressed")
    comp.add_argument("--env-key", help="compare under this key instead of the record's")
    comp.add_argument("--top", type=_positive_int, default=20, help="rows in text output")
    for flag in RULE_FLAGS:
        name = flag.removeprefix("--perf-")
        comp.add_argument(f"--{name}", default=None, help=f"as {flag} of the plugin")
    comp.add_argument(
        "--new-slow", type=float, default=1.0, metavar="SECONDS", help="as --perf-new-slow"
    )
    comp.set_defaults(handler=_compare)


def _add_baseline(commands: Any) -> None:
    base = commands.add_parser("baseline", help="add records to a baseline file")
    base.add_argument("records", nargs="*", metavar="RECORD")
    base.add_argument("--into", required=True, metavar="BASELINE")
    base.add_argument("--window", type=_positive_int, default=DEFAULT_WINDOW)
    base.add_argument("--accept", action="append", default=[], metavar="ID")
    base.add_argument("--env-key")
    for flag in RULE_FLAGS:
        name = flag.removeprefix("--perf-")
        base.add_argument(f"--{name}", default=None, help=f"as {flag} of the plugin")
    base.set_defaults(handler=_baseline)


def _add_upgrade(commands: Any) -> None:
    upgrade = commands.add_parser("upgrade", help="rewrite version 1 files as version 2")
    upgrade.add_argument("files", nargs="+", metavar="FILE")
    upgrade.set_defaults(handler=_upgrade)


def _add_merge(commands: Any) -> None:
    merge = commands.add_parser("merge", help="merge the records of shards into one")
    merge.add_argument("records", nargs="+", metavar="RECORD")
    merge.add_argument("-o", "--output", required=True, metavar="OUT")
    merge.add_argument(
        "--by-env",
        action="store_true",
        help="records of different hardware keys: write one OUT.<key>.json per key",
    )
    merge.set_defaults(handler=_merge)


def _add_flaky(commands: Any) -> None:
    flaky = commands.add_parser("flaky", help="flaky and broken tests from histories or records")
    flaky.add_argument("files", nargs="+", metavar="HISTORY_OR_RECORD")
    flaky.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    flaky.add_argument(
        "--max-pct",
        type=_percentage,
        default=None,
        metavar="P",
        help="exit 1 when a platform's flaky share is above P percent",
    )
    flaky.add_argument(
        "--write-quarantine",
        metavar="PATH",
        help="write the flaky tests (never the broken ones) as a JSON quarantine list",
    )
    flaky.add_argument(
        "--expires-in",
        type=_positive_int,
        default=30,
        metavar="DAYS",
        help="days until the written entries expire (default 30)",
    )
    flaky.add_argument(
        "--window",
        type=_positive_int,
        default=None,
        metavar="N",
        help="outcomes kept per test (default: the histories' own, else 50)",
    )
    flaky.set_defaults(handler=_flaky)


def _add_shard(commands: Any) -> None:
    shard = commands.add_parser("shard", help="print a duration-balanced plan")
    shard.add_argument("--durations", required=True, help="baseline, record or .test_durations")
    shard.add_argument("--splits", type=_positive_int, required=True)
    shard.add_argument("--by", choices=SHARD_BY, default="class")
    shard.add_argument("--env-key", help="the hardware key to read from a baseline")
    shard.add_argument("--format", choices=("text", "json"), default="text")
    shard.set_defaults(handler=_shard)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except (CliError, InputError, DetectionError, pytest.UsageError) as exc:
        sys.stderr.write(one_line(f"pytest-accel: error: {exc}") + "\n")
        return EXIT_USAGE
    except OSError as exc:  # a write that failed after the checks (a full disk)
        sys.stderr.write(one_line(f"pytest-accel: error: {problem(exc)}") + "\n")
        return EXIT_USAGE
    return code
