"""Wall time and peak memory of pytest runs with and without pytest-accel, paired.

Every round runs each variant once, in alternating order (forward, then backward), so
machine noise falls on all of them alike.  A variant's ratio is the median over rounds
of its wall time (and peak RSS) divided by the reference's in the same round: the
median of per-pair ratios, steadier on a noisy machine than a ratio of medians.  Plugin
autoloading is off in every run: each variant loads exactly the plugin it measures.

    python bench/overhead.py --set collect --tests 10000 --repeat 7
    # peers installed in a separate venv (see docs/benchmarks.md):
    build/bench-venv/bin/python bench/overhead.py --set everything --tests 10000 --repeat 9
    build/bench-venv/bin/python bench/overhead.py --set flaky --reference 1 --repeat 9
    # a compile-heavy JAX suite: the compile listeners against the same run without them
    python bench/overhead.py --set compile --tests 80 --reference 1 --repeat 15
    # what each feature adds to a run that records timings (issue 39)
    python bench/overhead.py --set features --tests 10000 --reference 2 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.suite import generate


@dataclass
class Variant:
    name: str
    args: list[str]
    prepare: list[str] = field(default_factory=list)  # one run before the warm-up
    env: dict[str, str] = field(default_factory=dict)  # {tmp} expanded, as in args
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # user + system seconds of the run
    rss_mb: list[float] = field(default_factory=list)


ACCEL = ["-p", "pytest_accel"]
RECORD = "--perf-record={tmp}/record.json"
BASELINE = "--perf-baseline={tmp}/baseline.json"
SPLIT = ["-p", "pytest_split.plugin", "--store-durations", "--durations-path={tmp}/.durations"]

VARIANT_SETS: dict[str, list[Variant]] = {
    "collect": [
        Variant("bare pytest", []),
        Variant("pytest-accel --accel=auto", [*ACCEL, "--accel=auto"]),
    ],
    # Issue 17: everything on, the record alone, and pytest-split storing durations.
    "everything": [
        Variant("bare pytest", []),
        Variant("pytest-accel (no option)", ACCEL),
        Variant(
            "pytest-accel --perf-record --perf-baseline --flaky-history",
            [*ACCEL, RECORD, BASELINE, "--flaky-history={tmp}/history.json"],
            prepare=[*ACCEL, BASELINE, "--perf-update-baseline"],
        ),
        Variant("pytest-accel --perf-record", [*ACCEL, RECORD]),
        Variant("pytest-split --store-durations", SPLIT),
    ],
    "record": [
        Variant("bare pytest", []),
        Variant("pytest-accel (no option)", ACCEL),
        Variant("pytest-accel --perf-record", [*ACCEL, RECORD]),
        Variant("pytest-split --store-durations", SPLIT),
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
            [*ACCEL, RECORD, BASELINE],
            prepare=[*ACCEL, BASELINE, "--perf-update-baseline"],
        ),
        Variant("pytest-speedguard (default)", ["-p", "pytest_speedguard.plugin"]),
    ],
    # {tmp}/quarantine.txt: 1,000 entries; {tmp}/history.json stretched to 50 runs, both
    # written by main() for this set.  Issue 15 measures against variant 1.
    "flaky": [
        Variant("bare pytest", []),
        Variant("pytest-accel (no flaky option)", ACCEL),
        Variant(
            "pytest-accel --flaky-history (50 runs) --flaky-quarantine (1,000)",
            [
                *ACCEL,
                "--flaky-history={tmp}/history.json",
                "--flaky-quarantine={tmp}/quarantine.txt",
            ],
        ),
        Variant(
            "pytest-accel --flaky-history (50 runs)", [*ACCEL, "--flaky-history={tmp}/history.json"]
        ),
        Variant("pytest-accel --flaky-reruns=2 (nothing fails)", [*ACCEL, "--flaky-reruns=2"]),
        Variant(
            "pytest-rerunfailures --reruns=2 (nothing fails)",
            ["-p", "pytest_rerunfailures", "--reruns=2"],
        ),
    ],
    # Issue 39: each feature on top of recording (variant 2), one at a time; the compile
    # listener's share on a suite without JAX is the record with it blocked.
    "features": [
        Variant("bare pytest", []),
        Variant("pytest-accel (no option)", ACCEL),
        Variant("--perf-record", [*ACCEL, RECORD]),
        Variant(
            "--perf-record, compile listener blocked",
            [*ACCEL, RECORD, "-p", "no:pytest_accel:compiles"],
        ),
        Variant(
            "--perf-record --perf-baseline (compare)",
            [*ACCEL, RECORD, BASELINE],
            prepare=[*ACCEL, BASELINE, "--perf-update-baseline"],
        ),
        Variant("--perf-record --flaky-history", [*ACCEL, RECORD, "--flaky-history={tmp}/h.json"]),
        Variant("--perf-record --accel-price (cost)", [*ACCEL, RECORD, "--accel-price=*=2.5"]),
        Variant(
            "--perf-record --accel-min-coverage (coverage)",
            [*ACCEL, RECORD, "--accel-min-coverage=0"],
        ),
        # A run with nothing to judge writes no job summary: the comparison's is measured,
        # and the summary's own cost is this row less the comparison's.
        Variant(
            "--perf-record --perf-baseline, job summary ($GITHUB_STEP_SUMMARY)",
            [*ACCEL, RECORD, BASELINE],
            prepare=[*ACCEL, BASELINE, "--perf-update-baseline"],
            env={"GITHUB_STEP_SUMMARY": "{tmp}/summary.md"},
        ),
        Variant(
            "--perf-record --accel-report (the page)",
            [*ACCEL, RECORD, "--accel-report={tmp}/r.html"],
        ),
    ],
    # Issue 27: the jax.monitoring listeners (perf.compiles) on a suite where most of
    # the time is compiling; blocked by name, the run is the same but for them.
    "compile": [
        Variant("bare pytest", []),
        Variant(
            "pytest-accel --perf-record, compile listeners blocked",
            [*ACCEL, RECORD, "-p", "no:pytest_accel:compiles"],
        ),
        Variant("pytest-accel --perf-record (compile listeners on)", [*ACCEL, RECORD]),
    ],
}

JAX_MODULE = """
import jax
import jax.numpy as jnp


def chain(x, k):
    for i in range(40):  # unrolled: each test compiles a function of its own
        x = jnp.sin(x * (k + i)) + jnp.cos(x)
    return x
"""
JAX_TEST = """

def test_compiles_{n}():
    f = jax.jit(lambda x: chain(x, {n}))
    assert f(jnp.ones(({size},))).shape == ({size},)
"""


def generate_jax(root: Path, tests: int) -> int:
    """``tests`` JAX tests, ten per module, each compiling a function of its own."""
    root.mkdir(parents=True)
    for module in range(0, tests, 10):
        body = JAX_MODULE + "".join(
            JAX_TEST.format(n=n, size=8 + n % 5) for n in range(module, min(module + 10, tests))
        )
        (root / f"test_jax_{module // 10:03d}.py").write_text(body)
    return tests


def write_quarantine(path: Path, tests: int, entries: int = 1000) -> None:
    """``entries`` node ids of the generated suite's plain functions, 25 per module."""
    ids = [
        f"test_mod_{module:04d}.py::test_function_{module}_{function}"
        for module in range(tests // 100)
        for function in range(25)
    ]
    path.write_text("# generated by bench/overhead.py\n" + "\n".join(ids[:entries]) + "\n")


def stretch_history(path: Path, runs: int = 50) -> None:
    """A one-run history made ``runs`` runs long, one test in a hundred flaky in one of
    them: the window full, as a suite's nightly history is after 50 nights."""
    data = orjson.loads(path.read_bytes())
    for env in data["envs"].values():
        env["runs"] = env["runs"] * runs
        for n, (test, letters) in enumerate(env["tests"].items()):
            stretched = letters * runs
            if n % 100 == 0:
                stretched = stretched[:-7] + "K" + stretched[-6:]
            env["tests"][test] = stretched[-runs:]
    path.write_bytes(orjson.dumps(data))


def stretch_baseline(path: Path, runs: int) -> None:
    """A baseline made ``runs`` runs long from its newest run, each sample within 5% of
    it (a seeded wobble): the window full, as a suite's baseline is after ``runs``
    nightly runs.  Written by the plugin's own code, summary and all."""
    from pytest_accel.perf.formats.baseline import KINDS, Run, load_baseline
    from pytest_accel.perf.model.columns import Columns
    from pytest_accel.perf.offline import baseline_json

    baseline = load_baseline(path)
    wobble = random.Random(7)
    for env in baseline.envs.values():
        newest = env.runs[-1]
        env.runs = [
            Run(
                newest.identity,
                Columns(
                    {
                        kind: [
                            None if v is None else round(v * wobble.uniform(0.95, 1.05), 6)
                            for v in newest.values[kind]
                        ]
                        for kind in KINDS
                    }
                ),
                newest.layout,
            )
            for _ in range(runs)
        ]
        env.changed()
    path.write_bytes(orjson.dumps(baseline_json(baseline)))


def measured_env() -> dict[str, str]:
    """The environment of a measured pytest run: no plugin but those a variant names, and
    bytecode written (installed packages run from bytecode; the warm-up round writes the
    plugin's too)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def run_once(variant: Variant, suite: Path, common: list[str], workdir: Path) -> None:
    args = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider"]
    args += common + [a.replace("{tmp}", str(workdir)) for a in variant.args]
    env = measured_env()
    env.update({k: v.replace("{tmp}", str(workdir)) for k, v in variant.env.items()})
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
    variant.cpus.append(usage.ru_utime + usage.ru_stime)
    variant.rss_mb.append(usage.ru_maxrss / 1024)


def paired(values: list[float], reference: list[float]) -> float:
    return statistics.median(v / r for v, r in zip(values, reference, strict=True))


def table(variants: list[Variant], reference: int) -> str:
    ref = variants[reference]
    lines = [
        f"| variant | median wall (s) | paired wall ratio to {ref.name} | paired ms over it"
        " | paired CPU ratio | paired CPU ms over it"
        " | peak RSS (MB) | paired RSS ratio | paired MB over it |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for v in variants:
        wall, rss = statistics.median(v.walls), statistics.median(v.rss_mb)
        more_ms = 1000 * statistics.median(a - b for a, b in zip(v.walls, ref.walls, strict=True))
        more_cpu = 1000 * statistics.median(a - b for a, b in zip(v.cpus, ref.cpus, strict=True))
        more_mb = statistics.median(a - b for a, b in zip(v.rss_mb, ref.rss_mb, strict=True))
        lines.append(
            f"| {v.name} | {wall:.3f} | {paired(v.walls, ref.walls):.3f}x | {more_ms:+.0f}"
            f" | {paired(v.cpus, ref.cpus):.3f}x | {more_cpu:+.0f}"
            f" | {rss:.0f} | {paired(v.rss_mb, ref.rss_mb):.3f}x | {more_mb:+.1f} |"
        )
    return "\n".join(lines)


def memory_table(variants: list[Variant], reference: int) -> str:
    ref = variants[reference].rss_mb[0]
    lines = [
        f"| variant | peak RSS (MB) | ratio to {variants[reference].name} | MB over it |",
        "| --- | ---: | ---: | ---: |",
    ]
    for v in variants:
        rss = v.rss_mb[0]
        lines.append(f"| {v.name} | {rss:.0f} | {rss / ref:.3f}x | {rss - ref:+.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7, help="rounds (pairs); at least 5")
    parser.add_argument("--set", choices=sorted(VARIANT_SETS), default="collect")
    parser.add_argument(
        "--only", help="comma-separated variant numbers of the set to run (0 = bare), e.g. 0,2"
    )
    parser.add_argument(
        "--reference", type=int, default=0, help="the variant the ratios are to (default 0)"
    )
    parser.add_argument(
        "--baseline-runs",
        type=int,
        default=20,
        help="runs in the baseline a variant compares with (default 20: a full window)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="peak memory only: one run of each variant, no warm-up round (memory does"
        " not move with the machine's load; at 100,000 tests a round is minutes)",
    )
    args = parser.parse_args()
    if args.repeat < 5 and not args.memory:
        parser.error("--repeat: at least 5 pairs")
    variants = VARIANT_SETS[args.set]
    if args.only:
        variants = [variants[int(i)] for i in args.only.split(",")]
    collect_only = args.set == "collect"
    common = ["--collect-only"] if collect_only else []
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "suite"
        count = (
            generate_jax(suite, args.tests)
            if args.set == "compile"
            else generate(suite, args.tests)
        )
        if args.set == "flaky":
            write_quarantine(Path(tmp) / "quarantine.txt", count)
            history = ["-p", "pytest_accel", "--flaky-history={tmp}/history.json"]
            run_once(Variant("prepare", history), suite, common, Path(tmp))
            stretch_history(Path(tmp) / "history.json")
        for variant in variants:  # warm-up: page cache, .pyc files, baselines
            if variant.prepare:
                run_once(Variant("prepare", variant.prepare), suite, common, Path(tmp))
                if "--perf-update-baseline" in variant.prepare and args.baseline_runs > 1:
                    stretch_baseline(Path(tmp) / "baseline.json", args.baseline_runs)
            if args.memory:
                continue
            run_once(variant, suite, common, Path(tmp))
            variant.walls.clear()
            variant.cpus.clear()
            variant.rss_mb.clear()
        for round_number in range(1 if args.memory else args.repeat):
            order = variants if round_number % 2 == 0 else variants[::-1]
            for variant in order:
                run_once(variant, suite, common, Path(tmp))
    mode = "pytest --collect-only" if collect_only else "pytest"
    depth = f", a {args.baseline_runs}-run baseline" if any(v.prepare for v in variants) else ""
    if args.memory:
        print(f"{mode} on {count} generated tests, peak memory of one run each{depth}\n")
        print(memory_table(variants, args.reference))
        return
    print(f"{mode} on {count} generated tests, {args.repeat} alternating rounds{depth}\n")
    print(table(variants, args.reference))


if __name__ == "__main__":
    main()
