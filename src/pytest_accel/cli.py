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

import pytest

from pytest_accel import __version__, ci_output
from pytest_accel.baseline import (
    DEFAULT_WINDOW,
    current_from_record,
    load_baseline,
    load_record,
    median_durations,
    parse_baseline,
    record_key,
    samples_from_record,
    update_baseline_file,
)
from pytest_accel.detection import (
    PROBE_TIMEOUT,
    DetectionContext,
    cpu_detection,
    detect_builtin,
    sysroot_from_env,
)
from pytest_accel.merge import MergeError, check_record, merge_records
from pytest_accel.options import SHARD_BY, parse_positive_int, rule_from
from pytest_accel.probe import ProbeError, confirm, confirmed_detection, run_jax_probe
from pytest_accel.records import RECORD_SCHEMA
from pytest_accel.regression import Comparison, compare
from pytest_accel.sharding import make_units, plan, weights_for
from pytest_accel.storage import InputError, read_json, write_json_atomic

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
            result = run_jax_probe(timeout=args.probe_timeout)
            confirmed = confirm(detection.platform, result)
            probe = {"ok": True, **confirmed.to_json(), "jax": result.jax_version}
            detection = confirmed_detection(detection, confirmed)
        except ProbeError as exc:
            probe = {"ok": False, "error": str(exc)}
    if args.json:
        payload = {**detection.to_json(), "probe": probe}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(f"accel: {detection.describe()}\n")
        for line in detection.evidence:
            sys.stdout.write(f"  checked: {line}\n")
        if probe is not None and not probe["ok"]:
            sys.stdout.write(f"  probe failed: {probe['error']}\n")
    return EXIT_FINDINGS if probe is not None and not probe["ok"] else EXIT_OK


RULE_FLAGS = ("threshold", "min-delta", "min-duration", "min-samples", "mad-k", "normalize")
GROUPS = ("tests", "classes", "modules")


def compare_record(record_path: str, baseline_path: str, args: argparse.Namespace) -> Comparison:
    rule = rule_from(
        {f"--perf-{flag}": getattr(args, flag.replace("-", "_")) for flag in RULE_FLAGS}
    )
    key, data = load_record(record_path)
    key = args.env_key or key
    baseline = load_baseline(baseline_path)
    env = baseline.for_key(key)
    if env is None:
        return Comparison(key, available_envs=sorted(baseline.envs))
    now = current_from_record(record_path, data, env.test_metric)
    return compare(key, now, {g: env.group(g) for g in GROUPS}, rule)


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_record(args.record, args.baseline, args)
    failing = bool(args.fail and comparison.regressions)
    if args.format == "json":
        sys.stdout.write(json.dumps(comparison.to_json(), indent=2) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(ci_output.markdown(comparison, failing))
    elif comparison.available_envs:
        sys.stdout.write(ci_output.missing_env_line(comparison, args.baseline) + "\n")
    else:
        for row in ci_output.terminal_rows(comparison, args.top):
            sys.stdout.write(row + "\n")
        sys.stdout.write(ci_output.summary_line(comparison, failing) + "\n")
    return EXIT_FINDINGS if failing else EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    runs = []
    for path in args.records:
        key, data = load_record(path)
        runs.append((key, samples_from_record(path, data)))
    baseline = update_baseline_file(args.into, runs, args.window)
    tests = sum(len(env.tests) for env in baseline.envs.values())
    sys.stdout.write(
        f"{args.into}: folded {len(runs)} record(s); {tests} test(s) under"
        f" {', '.join(sorted(baseline.envs))}\n"
    )
    return EXIT_OK


def _merge(args: argparse.Namespace) -> int:
    records = [(path, check_record(path, read_json(path))) for path in args.records]
    try:
        results = merge_records(records, by_env=args.by_env)
    except MergeError as exc:
        raise CliError(str(exc)) from None
    for result in results:
        out = args.output if len(results) == 1 else _per_key_path(args.output, result.key)
        write_json_atomic(out, result.record)
        for note in result.notes:
            sys.stderr.write(f"pytest-accel: note: {note}\n")
        sys.stdout.write(
            f"{out}: merged {len(result.record['run']['merged_from'])} record(s) under"
            f" {result.key}: {len(result.record['tests'])} test(s),"
            f" {len(result.record['classes'])} class(es),"
            f" {len(result.record['modules'])} module(s)\n"
        )
    return EXIT_OK


def _per_key_path(output: str, key: str) -> str:
    slug = "".join(c if c.isalnum() else "_" for c in key).strip("_") or "env"
    stem, dot, suffix = output.rpartition(".")
    return f"{stem}.{slug}.{suffix}" if dot else f"{output}.{slug}"


def _shard(args: argparse.Namespace) -> int:
    """A plan from a durations file alone: tests, and classes and modules by node id.

    (A pytest run knows its collection tree; here a record's class and module fields are
    used when the file is a record, and node ids are split otherwise.)
    """
    data = read_json(args.durations)
    groups: dict[str, str | None] = {}
    if isinstance(data, dict) and data.get("schema") == RECORD_SCHEMA:
        _, data = record_key(args.durations, data)
        known = current_from_record(args.durations, data, "total")["tests"]
        field = "class" if args.by == "class" else "module"
        groups = {t: data["tests"][t].get(field) for t in known}
    else:
        baseline = parse_baseline(args.durations, data)
        env = (
            baseline.for_key(args.env_key)
            if args.env_key
            else next(iter(baseline.envs.values()), None)
        )
        if env is None:
            raise CliError(
                f"{args.durations}: no timings for {args.env_key!r}"
                f" (it has: {', '.join(sorted(baseline.envs))})"
            )
        known = median_durations(env)
        for test in known:
            parts = test.split("::")
            groups[test] = (
                parts[0]
                if args.by == "module"
                else ("::".join(parts[:-1]) if len(parts) > 2 else None)
            )
    tests = sorted(known)
    shard_plan = plan(make_units(tests, groups, weights_for(tests, known), args.by), args.splits)
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


def _flaky(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from pytest_accel.flaky import utc_today
    from pytest_accel.history import analysis, history_from_files
    from pytest_accel.quarantine import Entry
    from pytest_accel.quarantine import to_json as quarantine_json

    history = history_from_files(args.files, args.window)
    report = analysis(history)
    over = {
        platform: pct
        for platform, pct in report["flaky_pct"].items()
        if args.max_pct is not None and pct > args.max_pct
    }
    report["max_pct"] = args.max_pct
    report["over_limit"] = sorted(over)
    if args.write_quarantine:
        expires = utc_today() + timedelta(days=args.expires_in)
        platforms: dict[str, list[str]] = {}
        reasons: dict[str, str] = {}
        for key, env in report["envs"].items():  # flaky ones only: a broken test needs a fix
            for verdict in env["flaky"]:
                names = platforms.setdefault(verdict["test"], [])
                if env["platform"] not in names:
                    names.append(env["platform"])
                reasons.setdefault(
                    verdict["test"],
                    f"flaky on {key}: failed {verdict['failures']} of {verdict['runs']} run(s)"
                    f", flaky in {verdict['flaky_runs']}, flip rate {verdict['flip_rate']:.2f}",
                )
        entries = [
            Entry(test, tuple(platforms[test]), reasons[test], None, expires)
            for test in sorted(platforms)
        ]
        write_json_atomic(args.write_quarantine, quarantine_json(entries))
        sys.stderr.write(
            f"pytest-accel: wrote {len(entries)} flaky test(s) to {args.write_quarantine}"
            f" (expires {expires.isoformat()})\n"
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(_flaky_text(report, markdown=args.format == "markdown"))
    return EXIT_FINDINGS if over else EXIT_OK


def _flaky_text(report: dict[str, object], *, markdown: bool) -> str:
    envs = report["envs"]
    assert isinstance(envs, dict)
    lines = ["### pytest-accel flaky tests", ""] if markdown else []
    for key, env in envs.items():
        lines.append(
            f"{key} ({env['runs']} run(s), {env['tests']} test(s)):"
            f" {len(env['flaky'])} flaky, {len(env['broken'])} broken"
        )
        rows = [("flaky", v) for v in env["flaky"]] + [("broken", v) for v in env["broken"]]
        if markdown and rows:
            lines += ["", "| status | test | failed | flip rate |", "| --- | --- | ---: | ---: |"]
        for status, v in rows:
            detail = f"{v['failures']} of {v['runs']}"
            if markdown:
                lines.append(
                    f"| {status} | {ci_output.escape_cell(v['test'])} | {detail} |"
                    f" {v['flip_rate']:.2f} |"
                )
            else:
                lines.append(
                    f"  {status:<6} {v['test']}  failed {detail} run(s)"
                    + (f", flaky in {v['flaky_runs']}" if v["flaky_runs"] else "")
                    + f", flip rate {v['flip_rate']:.2f}"
                )
        if markdown:
            lines.append("")
    shares = report["flaky_pct"]
    assert isinstance(shares, dict)
    limit = report.get("max_pct")
    for platform, pct in shares.items():
        verdict = ""
        if isinstance(limit, (int, float)):
            verdict = f" (over --max-pct {limit:g})" if pct > limit else f" (within {limit:g})"
        lines.append(f"flaky_pct {platform}: {pct:.2f}%{verdict}")
    return "\n".join(lines) + "\n"


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
    detect = commands.add_parser("detect", help="print what the plugin detects and why")
    detect.add_argument("--json", action="store_true", help="print JSON")
    detect.add_argument(
        "--probe", choices=("none", "jax"), default="none", help="confirm with JAX in a subprocess"
    )
    detect.add_argument("--probe-timeout", type=float, default=PROBE_TIMEOUT, metavar="SECONDS")
    detect.set_defaults(handler=_detect)

    comp = commands.add_parser("compare", help="compare a record with a baseline")
    comp.add_argument("record", metavar="RECORD", help="a record written by --perf-record")
    comp.add_argument("--baseline", required=True, help="baseline, record or .test_durations")
    comp.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    comp.add_argument("--fail", action="store_true", help="exit 1 when anything regressed")
    comp.add_argument("--env-key", help="compare under this key instead of the record's")
    comp.add_argument("--top", type=_positive_int, default=20, help="rows in text output")
    for flag in RULE_FLAGS:
        comp.add_argument(f"--{flag}", default=None, help=f"as --perf-{flag} of the plugin")
    comp.set_defaults(handler=_compare)

    base = commands.add_parser("baseline", help="fold records into a baseline file")
    base.add_argument("records", nargs="+", metavar="RECORD")
    base.add_argument("--into", required=True, metavar="BASELINE")
    base.add_argument("--window", type=_positive_int, default=DEFAULT_WINDOW)
    base.set_defaults(handler=_baseline)

    merge = commands.add_parser("merge", help="merge the records of shards into one")
    merge.add_argument("records", nargs="+", metavar="RECORD")
    merge.add_argument("-o", "--output", required=True, metavar="OUT")
    merge.add_argument(
        "--by-env",
        action="store_true",
        help="records of different hardware keys: write one OUT.<key>.json per key",
    )
    merge.set_defaults(handler=_merge)

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

    shard = commands.add_parser("shard", help="print a duration-balanced plan")
    shard.add_argument("--durations", required=True, help="baseline, record or .test_durations")
    shard.add_argument("--splits", type=_positive_int, required=True)
    shard.add_argument("--by", choices=SHARD_BY, default="class")
    shard.add_argument("--env-key", help="the hardware key to read from a baseline")
    shard.add_argument("--format", choices=("text", "json"), default="text")
    shard.set_defaults(handler=_shard)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except (CliError, InputError, pytest.UsageError) as exc:
        sys.stderr.write(f"pytest-accel: error: {exc}\n")
        return EXIT_USAGE
    return code
