"""The offline comparison at scale, as a CI user runs it: 20 records folded into a
baseline by ``pytest-accel baseline``, then ``pytest-accel compare`` of a 21st record
against it.  Reports the median wall time and peak RSS of each command, per size.

    python bench/compare_scale.py --tests 10000,50000,100000,200000 --repeat 3
    python bench/compare_scale.py --tests 100000 --repeat 12 --against ../before

``--against DIR`` (a checkout of another commit, e.g. ``git worktree add ../before
HEAD~1``) also times ``compare`` with that tree's source, paired: each round runs both,
forward and backward in turn, and each ratio (wall, peak RSS, CPU, page faults) is the
median of the rounds' ratios.  That
tree reads the same runs in the newest versions it knows: a record in version 2's
layout (every column a list) for a tree from before version 3 records, a baseline in
version 3's (base64 columns) for one from before version 4 baselines.

The records come from the plugin's own encoder (``bench/synthetic.py``): the exact
format a run writes.  Each size's inputs are built once and reused by every repeat.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import synthetic

RUNS = 20
KEY = "tpu/TPU v6 lite/x8"


@dataclass
class Measured:
    walls: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    # CPU (user and system) and minor page faults: on a shared machine whose steal time
    # moves walls 10% round to round, these move far less.
    cpus: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)

    def row(self) -> str:
        return f"{statistics.median(self.walls):.2f} | {statistics.median(self.rss_mb):.0f}"


def write_records(directory: Path, tests: int, runs: int = RUNS) -> list[Path]:
    """``runs`` baseline records and, last, the record to compare: log-normal spread
    around per-test medians from 10 ms to 5 s, the last run with 1% of tests 2x slower."""
    rng = np.random.default_rng(3)
    medians = np.exp(rng.uniform(np.log(0.01), np.log(5.0), tests))
    ids = [f"tests/test_mod_{i // 100:04d}.py::TestC::test_{i}[case-{i % 7}]" for i in range(tests)]
    groups = {i: (i.rsplit("::", 1)[0], i.split("::")[0]) for i in ids}
    template = synthetic.record(dict.fromkeys(ids, 1.0), key=KEY, groups=groups)
    # Each class and module total is the sum of its tests' seconds, as in a real run.
    group_rows = {}
    for kind, column in (("classes", 0), ("modules", 1)):
        position = {ident: n for n, ident in enumerate(template[kind]["id"])}
        group_rows[kind] = np.array([position[groups[i][column]] for i in ids])
    paths = []
    for run in range(runs + 1):
        values = medians * np.exp(0.1 * rng.standard_normal(tests))
        if run == runs:
            values[: tests // 100] *= 2  # regressions for the comparison to report
        # The template's columns with this run's call seconds: what synthetic.record
        # would give for these values, without re-encoding 21 times.
        record = dict(template)
        record["tests"] = dict(template["tests"])
        calls = [round(v, 6) for v in values.tolist()]
        record["tests"]["call"] = calls
        record["tests"]["total"] = calls
        for kind, rows in group_rows.items():
            totals = np.bincount(rows, weights=values, minlength=len(template[kind]["id"]))
            seconds = [round(v, 6) for v in totals.tolist()]
            record[kind] = dict(template[kind], total=seconds, span=seconds)
        started = f"2026-11-{1 + run // 24:02d}T{run % 24:02d}:00:00Z"
        record["run"] = dict(template["run"], started=started)
        path = directory / f"record-{run:02d}.json"
        path.write_bytes(orjson.dumps(record))
        paths.append(path)
    return paths


def as_version_2(path: Path, into: Path) -> Path:
    """The record at ``path`` as version 2 (``synthetic.as_version_2``), at ``into``."""
    into.write_bytes(orjson.dumps(synthetic.as_version_2(orjson.loads(path.read_bytes()))))
    return into


def reads_version(tree: Path, module: str, constant: str) -> int:
    """The newest version of a file that the source in ``tree`` reads (``RECORD_VERSION``
    in ``perf/formats/record.py``, ``BASELINE_VERSION`` in ``perf/formats/baseline.py``)."""
    package = tree / "src" / "pytest_accel" / "perf"
    path = package / "formats" / module  # perf/<module> before the formats moved
    text = (path if path.exists() else package / module).read_text(encoding="utf-8")
    found = re.search(rf"^{constant} = (\d+)\b", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{tree}: no {constant} in perf/{module}")
    return int(found.group(1))


def for_tree(tree: Path, record: Path, baseline: Path, into: Path) -> tuple[Path, Path]:
    """The record and baseline as the tree at ``tree`` reads them: the same runs, in the
    newest versions it knows (records 2 or 3, baselines 3 or 4)."""
    if reads_version(tree, "record.py", "RECORD_VERSION") < 3:
        record = as_version_2(record, into / "record-v2.json")
    if reads_version(tree, "baseline.py", "BASELINE_VERSION") < 4:
        data = synthetic.as_baseline_version_3(orjson.loads(baseline.read_bytes()))
        baseline = into / "baseline-v3.json"
        baseline.write_bytes(orjson.dumps(data))
    return record, baseline


def timed(command: list[str], into: Measured, env: dict[str, str] | None = None) -> None:
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    into.walls.append(time.perf_counter() - start)
    into.rss_mb.append(usage.ru_maxrss / 1024)
    into.cpus.append(usage.ru_utime + usage.ru_stime)
    into.faults.append(usage.ru_minflt)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise SystemExit(f"{' '.join(command[2:5])} failed with exit {code}:\n{stderr[-2000:]}")


@dataclass
class Paired:
    """``compare`` with this tree (``now``) and with ``--against``'s (``then``)."""

    now: Measured = field(default_factory=Measured)
    then: Measured = field(default_factory=Measured)

    def ratios(self) -> str:
        def median_ratio(a: list[float], b: list[float]) -> float:
            return statistics.median(x / y for x, y in zip(a, b, strict=True))

        now, then = self.now, self.then
        wall = median_ratio(now.walls, then.walls)
        rss = median_ratio(now.rss_mb, then.rss_mb)
        cpu = median_ratio(now.cpus, then.cpus)
        faults = median_ratio(now.faults, then.faults)
        return (
            f"now {now.row()} | then {then.row()} | paired wall ratio {wall:.3f}x"
            f" | paired RSS ratio {rss:.3f}x | paired CPU ratio {cpu:.3f}x"
            f" | paired page-fault ratio {faults:.3f}x"
        )


def measure(
    tests: int, repeat: int, against: Path | None = None
) -> tuple[Measured, Measured, float, float, Paired | None]:
    cli = [sys.executable, "-m", "pytest_accel"]
    fold, compare = Measured(), Measured()
    paired = None
    # Bytecode written, as an installed wheel has it: a tree that compiled its modules
    # on every call would read 0.1 s slower (the first call of each writes them).
    now_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        records = write_records(Path(tmp), tests)
        baseline = Path(tmp) / "baseline.json"
        for _ in range(repeat):
            baseline.unlink(missing_ok=True)
            argv = [*cli, "baseline", "--into", str(baseline), *map(str, records[:-1])]
            timed(argv, fold, now_env)
        command = [*cli, "compare", str(records[-1]), "--baseline", str(baseline)]
        timed([*command, "--format", "json"], Measured(), now_env)  # bytecode
        for _ in range(repeat):
            timed([*command, "--format", "json"], compare, now_env)
        if against is not None:
            paired = Paired()
            then_env = {**now_env, "PYTHONPATH": str(against.resolve() / "src")}
            # The same files in the versions an older tree reads.
            older_record, older_baseline = for_tree(against, records[-1], baseline, Path(tmp))
            then = [*cli, "compare", str(older_record), "--baseline", str(older_baseline)]
            timed([*then, "--format", "json"], Measured(), then_env)  # its bytecode
            for round_ in range(repeat):
                pair = [(paired.now, command, now_env), (paired.then, then, then_env)]
                for into, argv, env in pair if round_ % 2 == 0 else reversed(pair):
                    timed([*argv, "--format", "json"], into, env)
        sizes = baseline.stat().st_size / 1e6, records[-1].stat().st_size / 1e6
    return fold, compare, *sizes, paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--tests", default="100000", help="comma-separated suite sizes (default 100000)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="a checkout to time compare against, paired"
    )
    args = parser.parse_args()
    rows = []
    for tests in (int(n) for n in args.tests.split(",")):
        fold, compare, base_mb, record_mb, paired = measure(tests, args.repeat, args.against)
        if paired is not None:
            print(f"{tests}: compare against {args.against}: {paired.ratios()}")
        rows.append(
            f"| {tests:,} | {base_mb:.0f} | {record_mb:.0f} | {compare.row()} | {fold.row()} |"
        )
        print(f"{tests}: compare {compare.row()}; baseline of {RUNS} records {fold.row()}")
    print(f"\n{RUNS}-run baseline per size; median of {args.repeat} runs of each command\n")
    print(
        "| tests | baseline (MB) | record (MB) | compare wall (s) | compare peak RSS (MB)"
        f" | baseline of {RUNS} records wall (s) | its peak RSS (MB) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
