"""Change-aware selection on a 10,000-test map: the map's size on disk, and the time and
memory of deciding which tests a one-line change needs (``planning.select_tests``: the
map opened and checked, git asked what changed, the changed file parsed, the tests of
its changed blocks found, every test's reason written).

    python bench/selection_scale.py --tests 10000 --files 200 --repeat 5

A synthetic project in a temporary git repository: FILES modules of 50 functions each;
each test ran 20 functions spread over 4 modules, and shares its test file's collection
unit, which reaches the ``<import>`` block of 50 modules, and reads one data file of its
test file (the map is written by the plugin's own writer, ``mapfile.update_map``).
One function of one module is then changed in the work tree.  Each repetition runs in
a fresh process, so its peak RSS is the decision's alone on top of the interpreter and
the modules it imports (reported apart; Linux's ``VmHWM``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

FUNCTIONS = 50
BLOCKS_PER_TEST = 20
FILES_PER_TEST = 4


def module_source(index: int) -> str:
    return "\n\n".join(
        f"def f{index}_{j}(x):\n    y = x + {j}\n    return y * {index + 1}\n"
        for j in range(FUNCTIONS)
    )


def make_project(root: Path, tests: int, files: int) -> None:
    from pytest_accel.selection.blocks import parse_blocks
    from pytest_accel.selection.mapfile import MapRun, update_map
    from pytest_accel.selection.mapping import _digest

    package = root / "pkg"
    package.mkdir()
    run = MapRun(None, "main", "2026-11-26T00:00:00Z")
    parsed = {}
    for i in range(files):
        source = module_source(i).encode()
        (package / f"m{i}.py").write_bytes(source)
        blocks = parse_blocks(source)
        parsed[i] = blocks
        run.files[f"pkg/m{i}.py"] = (_digest(source), {b.name: b.checksum for b in blocks.blocks})
    rng = random.Random(0)
    data = root / "tests" / "data"
    data.mkdir(parents=True)
    for k in range(files):
        run.units[f"collect:tests/test_m{k}.py"] = {
            (f"pkg/m{i}.py", "<import>") for i in rng.sample(range(files), min(50, files))
        }
        (data / f"d{k}.json").write_text(f"[{k}]\n")
    for t in range(tests):
        k = t % files
        run.test_units[f"tests/test_m{k}.py::test_{t}"] = {f"collect:tests/test_m{k}.py"}
        run.reads[f"tests/test_m{k}.py::test_{t}"] = {
            f"tests/data/d{k}.json": _digest(f"[{k}]\n".encode())
        }
    for t in range(tests):
        chosen = rng.sample(range(files), FILES_PER_TEST)
        links = {(f"pkg/m{i}.py", "<module>") for i in chosen}
        for _ in range(BLOCKS_PER_TEST):
            i = rng.choice(chosen)
            links.add((f"pkg/m{i}.py", f"f{i}_{rng.randrange(FUNCTIONS)}"))
        run.tests[f"tests/test_m{t % files}.py::test_{t}"] = links
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "s"],
        check=True,
    )
    run.commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    from pytest_accel.selection.changes import installed_distributions

    run.dependencies = installed_distributions()
    update_map(root / "map.db", run)
    # The change: one line of one function.
    changed = package / "m0.py"
    changed.write_text(changed.read_text().replace("y = x + 7\n", "y = x + 8\n"))


DECIDE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path

    def peak_mb():  # VmHWM: this process's own peak (ru_maxrss keeps the parent's over exec)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

    sys.path.insert(0, {src!r})
    root = Path({root!r})
    before = peak_mb()
    from pytest_accel.selection.options import SelectionOptions
    from pytest_accel.selection.planning import select_tests
    imported = peak_mb()
    collected = [f"tests/test_m{{t % {files}}}.py::test_{{t}}" for t in range({tests})]
    options = SelectionOptions(str(root / "map.db"), "changed", None, None, 14.0, "off", None)
    start = time.perf_counter()
    found = select_tests(root, options, collected, {{}})
    seconds = time.perf_counter() - start
    peak = peak_mb()
    print(json.dumps({{"seconds": seconds, "kept": len(found.decision.kept),
        "deselected": len(found.decision.deselected),
        "valves": [v.name for v in found.decision.valves],
        "rss_start_mb": before, "rss_imported_mb": imported,
        "rss_peak_mb": peak}}))
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        make_project(root, args.tests, args.files)
        size = (root / "map.db").stat().st_size
        src = str(Path(__file__).resolve().parent.parent / "src")
        code = DECIDE.format(src=src, root=str(root), files=args.files, tests=args.tests)
        runs = []
        for _ in range(args.repeat):
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            runs.append(json.loads(done.stdout))
    seconds = [r["seconds"] for r in runs]
    first = runs[0]
    print(
        f"map: {args.tests} tests, {args.files} files of {FUNCTIONS} functions,"
        f" {BLOCKS_PER_TEST} functions per test: {size / 1e6:.1f} MB on disk"
    )
    print(
        f"decision: {first['kept']} kept, {first['deselected']} deselected,"
        f" valves {first['valves'] or 'none'}"
    )
    print(
        f"select_tests: median {statistics.median(seconds):.3f} s"
        f" (min {min(seconds):.3f}, max {max(seconds):.3f}) over {len(seconds)} runs"
    )
    print(
        f"peak RSS: {max(r['rss_peak_mb'] for r in runs):.0f} MB"
        f" (interpreter {first['rss_start_mb']:.0f} MB, after imports"
        f" {first['rss_imported_mb']:.0f} MB): the decision adds"
        f" {max(r['rss_peak_mb'] - r['rss_imported_mb'] for r in runs):.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
