"""Wall time and peak memory of pytest runs with and without pytest-accel, side by side.

Variants run interleaved (round-robin) so that machine noise hits all of them alike;
the table reports the median wall time, its ratio to bare pytest, and peak RSS.  Plugin
autoloading is off in every run: each variant loads exactly the plugin it measures.

    python bench/overhead.py --set collect --tests 10000 --repeat 7
    # peers installed in a separate venv (see docs/benchmarks.md):
    build/bench-venv/bin/python bench/overhead.py --set record --tests 10000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.suite import generate


@dataclass
class Variant:
    name: str
    args: list[str]
    prepare: list[str] = field(default_factory=list)  # one run before the warm-up
    walls: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)


VARIANT_SETS: dict[str, list[Variant]] = {
    "collect": [
        Variant("bare pytest", []),
        Variant("pytest-accel --accel=auto", ["-p", "pytest_accel", "--accel=auto"]),
    ],
    "record": [
        Variant("bare pytest", []),
        Variant("pytest-accel (auto, no record)", ["-p", "pytest_accel"]),
        Variant(
            "pytest-accel --perf-record",
            ["-p", "pytest_accel", "--perf-record={tmp}/record.json"],
        ),
        Variant(
            "pytest-split --store-durations",
            [
                "-p",
                "pytest_split.plugin",
                "--store-durations",
                "--durations-path={tmp}/.test_durations",
            ],
        ),
        Variant("pytest-speedguard (default)", ["-p", "pytest_speedguard.plugin"]),
        Variant("junitxml", ["--junitxml={tmp}/junit.xml"]),
        Variant(
            "pytest-reportlog", ["-p", "pytest_reportlog.plugin", "--report-log={tmp}/log.jsonl"]
        ),
        Variant(
            "pytest-json-report",
            ["-p", "pytest_jsonreport.plugin", "--json-report", "--json-report-file={tmp}/r.json"],
        ),
    ],
    "baseline": [
        Variant("bare pytest", []),
        Variant(
            "pytest-accel --perf-record --perf-baseline",
            [
                "-p",
                "pytest_accel",
                "--perf-record={tmp}/record.json",
                "--perf-baseline={tmp}/baseline.json",
            ],
            prepare=[
                "-p",
                "pytest_accel",
                "--perf-baseline={tmp}/baseline.json",
                "--perf-update-baseline",
            ],
        ),
        Variant("pytest-speedguard (default)", ["-p", "pytest_speedguard.plugin"]),
    ],
}


def run_once(variant: Variant, suite: Path, common: list[str], workdir: Path) -> None:
    args = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider"]
    args += common + [a.replace("{tmp}", str(workdir)) for a in variant.args]
    # Installed packages run from bytecode; let the warm-up round write it for the plugin too.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    start = time.perf_counter()
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=workdir
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 5):
        raise SystemExit(f"{variant.name} failed with exit {code}:\n{stderr[-2000:]}")
    variant.walls.append(wall)
    variant.rss_mb.append(usage.ru_maxrss / 1024)


def table(variants: list[Variant]) -> str:
    bare = statistics.median(variants[0].walls)
    bare_rss = statistics.median(variants[0].rss_mb)
    lines = [
        "| variant | median wall (s) | ratio to bare | peak RSS (MB) | RSS ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for v in variants:
        wall, rss = statistics.median(v.walls), statistics.median(v.rss_mb)
        lines.append(
            f"| {v.name} | {wall:.3f} | {wall / bare:.3f}x | {rss:.0f} | {rss / bare_rss:.3f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--set", choices=sorted(VARIANT_SETS), default="collect")
    parser.add_argument(
        "--only", help="comma-separated variant numbers of the set to run (0 = bare), e.g. 0,2"
    )
    args = parser.parse_args()
    variants = VARIANT_SETS[args.set]
    if args.only:
        variants = [variants[int(i)] for i in args.only.split(",")]
    collect_only = args.set == "collect"
    common = ["--collect-only"] if collect_only else []
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "suite"
        count = generate(suite, args.tests)
        for variant in variants:  # warm-up: page cache, .pyc files, baselines
            if variant.prepare:
                run_once(Variant("prepare", variant.prepare), suite, common, Path(tmp))
            run_once(variant, suite, common, Path(tmp))
            variant.walls.clear()
            variant.rss_mb.clear()
        for _ in range(args.repeat):
            for variant in variants:
                run_once(variant, suite, common, Path(tmp))
    mode = "pytest --collect-only" if collect_only else "pytest"
    print(f"{mode} on {count} generated tests, {args.repeat} interleaved rounds\n")
    print(table(variants))


if __name__ == "__main__":
    main()
