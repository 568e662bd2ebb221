"""Change-aware selection against single-line mutations of a real JAX library.

    python bench/mutation_study.py setup  --repo /work/study/orthax --package orthax \\
        --python /work/study/venv/bin/python --work /work/study/mut
    python bench/mutation_study.py mutate --work /work/study/mut --count 110 --seed 0
    python bench/mutation_study.py replay --work /work/study/mut --commits 30
    python bench/mutation_study.py summary --work /work/study/mut

``setup`` clones the library at its newest commit and makes two independent
measurements of its own suite (run with ``-n 2``):

- the dependency map, by a mapping run (``--accel-map base.db``, program fingerprints
  on): what selection reads;
- the ground truth, by pytest-cov with one context per test (``--cov-context=test``),
  JAX's caches cleared before each test by a ten-line plugin of this script's (so each
  test traces what it calls): which lines each test executes.

``mutate`` draws mutants (``--seed``): one operator or constant of one line that some
test executed, inside a function (module-level lines run at import, in no test), each
committed on its own branch from the base commit.  For each, selection decides
(``planning.select_tests``, as ``--accel-select=changed`` does), and the tests that
execute the line (the ground truth: a test that never executes it behaves as before)
run: those selection kept first, stopping at the first failure; if none fails, those it
deselected, all of them.  A mutant no test fails is a survivor and does not count; one
whose failing tests are all deselected is a miss (a defect of selection).  For
``programs``, the tests that execute the line are mapped again at the mutant
(``--accel-map head.db``), and the tests whose programs changed are what that mode
would run.  ``replay`` maps the commit 30 commits back and replays each later commit
with that map: the share of tests selected, and, where a commit changed Python, whether
a deselected test fails (they are run).  Results go to ``WORK/mutants.jsonl`` and
``WORK/replay.jsonl``; ``summary`` prints the figures docs/selection.md quotes.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import random
import shutil
import subprocess
import time
import tokenize
from pathlib import Path
from typing import Any

CLEAR_PLUGIN = """\
import sys

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
"""

SWAPS = {
    "+": "-",
    "-": "+",
    "*": "/",
    "/": "*",
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "==": "!=",
    "!=": "==",
    "and": "or",
    "or": "and",
    "True": "False",
    "False": "True",
    "**": "*",
    "//": "/",
}


def run(
    command: list[str], cwd: Path, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def git(root: Path, *args: str) -> str:
    done = run(["git", *args], root)
    if done.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def settings(work: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((work / "study.json").read_text())
    return found


def pytest_command(config: dict[str, Any], *args: str) -> list[str]:
    return [config["python"], "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


# -- setup ----------------------------------------------------------------------------


def setup(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    root = work / "repo"
    git(work, "clone", "-q", str(Path(args.repo).resolve()), str(root))
    git(root, "config", "user.name", "study")
    git(root, "config", "user.email", "study@example.invalid")
    (work / "clear_jax_caches.py").write_text(CLEAR_PLUGIN)
    config = {
        "python": args.python,
        "package": args.package,
        "tests": args.tests,
        "base": git(root, "rev-parse", "HEAD"),
        "root": str(root),
    }
    (work / "study.json").write_text(json.dumps(config, indent=2))
    run([args.python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(root)], work)
    started = time.perf_counter()
    mapping = run(
        pytest_command(config, "-n", "2", f"--accel-map={work / 'base.db'}", args.tests),
        root,
    )
    mapped = time.perf_counter() - started
    started = time.perf_counter()
    env_pythonpath = f"PYTHONPATH={work}"
    truth = run(
        [
            "env",
            env_pythonpath,
            *pytest_command(
                config,
                "-n",
                "2",
                "-p",
                "clear_jax_caches",
                f"--cov={args.package}",
                "--cov-context=test",
                "--cov-report=",
                args.tests,
            ),
        ],
        root,
    )
    measured = time.perf_counter() - started
    shutil.move(str(root / ".coverage"), str(work / "truth.coverage"))
    failing = [
        line.split(" ")[1]
        for line in (mapping.stdout + truth.stdout).splitlines()
        if line.startswith("FAILED ")
    ]
    config.update(
        {
            "mapping_seconds": round(mapped, 1),
            "truth_seconds": round(measured, 1),
            "mapping_tail": mapping.stdout.splitlines()[-3:],
            "truth_tail": truth.stdout.splitlines()[-2:],
            "failing_at_base": sorted(set(failing)),
        }
    )
    collected = run(pytest_command(config, "--co", args.tests), root)
    config["collected"] = [
        line for line in collected.stdout.splitlines() if "::" in line and not line.startswith(" ")
    ]
    (work / "study.json").write_text(json.dumps(config, indent=2))
    print(json.dumps({k: v for k, v in config.items() if k != "collected"}, indent=2))
    print(f"collected {len(config['collected'])} tests")
    return 0


# -- the ground truth -----------------------------------------------------------------


def line_tests(work: Path, root: Path) -> dict[str, dict[int, set[str]]]:
    """Per source file (relative to the root), per line, the tests that executed it."""
    import coverage

    data = coverage.CoverageData(basename=str(work / "truth.coverage"))
    data.read()
    found: dict[str, dict[int, set[str]]] = {}
    for filename in data.measured_files():
        try:
            relative = Path(filename).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        lines: dict[int, set[str]] = {}
        for line, contexts in data.contexts_by_lineno(filename).items():
            tests = {c.split("|", 1)[0] for c in contexts if c}
            if tests:
                lines[line] = tests
        found[relative] = lines
    return found


def function_lines(source: str) -> set[int]:
    """Lines inside a function's body (not its ``def`` line or decorators)."""
    inside: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for statement in node.body:
                end = statement.end_lineno or statement.lineno
                inside.update(range(statement.lineno, end + 1))
    return inside


def mutants_of_line(source: str, number: int) -> list[tuple[str, str]]:
    """Each single-token mutation of line ``number``: (description, new source)."""
    lines = source.splitlines(keepends=True)
    line = lines[number - 1]
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    for token in tokens:
        text = token.string
        replacement = None
        if (token.type == tokenize.OP and text in SWAPS) or (
            token.type == tokenize.NAME and text in SWAPS
        ):
            replacement = SWAPS[text]
        elif token.type == tokenize.NUMBER and text.isdigit():
            replacement = str(int(text) + 1)
        if replacement is None:
            continue
        start, end = token.start[1], token.end[1]
        mutated = line[:start] + replacement + line[end:]
        candidate = "".join([*lines[: number - 1], mutated, *lines[number:]])
        try:
            before = ast.dump(ast.parse(source))
            after = ast.dump(ast.parse(candidate))
        except SyntaxError:
            continue
        if before != after:
            found.append((f"line {number}: {text!r} -> {replacement!r}", candidate))
    return found


# -- mutate ---------------------------------------------------------------------------


def failing_tests(output: str) -> set[str]:
    return {
        line.split(" ")[1]
        for line in output.splitlines()
        if line.startswith(("FAILED ", "ERROR ")) and "::" in line
    }


def run_tests(
    config: dict[str, Any], root: Path, tests: list[str], *, first_failure: bool
) -> set[str]:
    if not tests:
        return set()
    args = ["-rfE", "-p", "no:randomly"]
    if first_failure:
        args.append("-x")
    elif len(tests) > 8:
        args += ["-n", "2"]
    done = run(pytest_command(config, *args, *tests), root, timeout=3600)
    return failing_tests(done.stdout)


def decide(
    config: dict[str, Any], root: Path, map_path: Path, mode: str, head: Path | None = None
) -> Any:
    from pytest_accel.selection.options import SelectionOptions
    from pytest_accel.selection.planning import select_tests

    options = SelectionOptions(
        str(map_path), mode, None, str(head) if head else None, 3650.0, "off", None
    )
    always = dict.fromkeys(config.get("failing_at_base", []), "failing at the base commit")
    return select_tests(root, options, list(config["collected"]), always).decision


def mutate(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    config = settings(work)
    root = Path(config["root"])
    truth = line_tests(work, Path(config.get("truth_root", root)))
    package = config["package"]
    candidates = []
    for path in sorted(truth):
        if not path.startswith(f"{package}/") or path.endswith("_version.py"):
            continue
        source = (root / path).read_text()
        inside = function_lines(source)
        for number in sorted(set(truth[path]) & inside):
            candidates.append((path, number))
    rng = random.Random(args.seed)
    rng.shuffle(candidates)
    results_path = work / "mutants.jsonl"
    done_ids = set()
    if results_path.exists():
        done_ids = {json.loads(line)["id"] for line in results_path.read_text().splitlines()}
    valid = sum(
        1
        for line in (results_path.read_text().splitlines() if results_path.exists() else [])
        if json.loads(line)["verdict"] in ("caught", "missed")
    )
    deadline = time.monotonic() + args.hours * 3600
    for index, (path, number) in enumerate(candidates):
        if valid >= args.count or time.monotonic() > deadline:
            break
        mutant_id = f"{path}:{number}"
        if mutant_id in done_ids:
            continue
        git(root, "checkout", "-q", "-f", config["base"])
        source = (root / path).read_text()
        options = mutants_of_line(source, number)
        if not options:
            continue
        description, mutated = rng.choice(options)
        (root / path).write_text(mutated)
        git(root, "checkout", "-q", "-B", f"mutant-{index}")  # -B: a rerun replaces it
        git(root, "commit", "-q", "-am", f"mutant {index}: {path} {description}")
        affected = sorted(truth[path][number])
        record, failing = judge(config, root, work, affected)
        record = {"id": mutant_id, "mutation": f"{path} {description}", **record}
        verdict = record["verdict"]
        programs_done = (
            sum(1 for line in results_path.read_text().splitlines() if '"programs"' in line)
            if results_path.exists()
            else 0
        )
        if verdict in ("caught", "missed") and programs_done < args.programs:
            record["programs"] = programs_for(
                config, root, work, affected, index=index, failed=failing
            )
        with results_path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        if verdict in ("caught", "missed"):
            valid += 1
        kept = f"kept {record['kept']} of {record['collected']}"
        print(f"[{valid}/{args.count}] {record['mutation']}: {verdict}, {kept}", flush=True)
    git(root, "checkout", "-q", "-f", config["base"])
    return 0


def judge(
    config: dict[str, Any], root: Path, work: Path, affected: list[str]
) -> tuple[dict[str, Any], set[str]]:
    """Selection's decision at the committed mutant, and the verdict: the executing
    tests it kept run first (to the first failure), then, if none failed, those it left
    out; with the failing tests found."""
    started = time.perf_counter()
    decision = decide(config, root, work / "base.db", "changed")
    kept = [t for t in affected if t in decision.kept]
    deselected = [t for t in affected if t not in decision.kept]
    failed = run_tests(config, root, kept, first_failure=True)
    missed: set[str] = set()
    if not failed:
        missed = run_tests(config, root, deselected, first_failure=False)
    verdict = "caught" if failed else "missed" if missed else "survived"
    record = {
        "commit": git(root, "rev-parse", "HEAD"),
        "verdict": verdict,
        "kept": len(decision.kept),
        "collected": decision.collected,
        "valves": [v.name for v in decision.valves],
        "executing_tests": len(affected),
        "executing_kept": len(kept),
        "failed_kept": sorted(failed)[:5],
        "failed_deselected": sorted(missed)[:5],
        "seconds": round(time.perf_counter() - started, 1),
    }
    return record, failed | missed


def programs_for(
    config: dict[str, Any],
    root: Path,
    work: Path,
    affected: list[str],
    *,
    index: int,
    failed: set[str],
) -> dict[str, Any]:
    """What ``--accel-select=programs`` runs for this mutant: the executing tests mapped
    again here (their programs), compared with the base map's."""
    head = work / f"head-{index}.db"
    head.unlink(missing_ok=True)
    listing = affected if len(affected) <= 400 else affected[:400]
    run(pytest_command(config, "-n", "2", f"--accel-map={head}", *listing), root, timeout=3600)
    decision = decide(config, root, work / "base.db", "programs", head)
    changed = [t for t, why in decision.kept.items() if "program" in why]
    head.unlink(missing_ok=True)
    return {
        "kept": len(decision.kept),
        "changed_programs": len(changed),
        "failing_among_them": len(set(changed) & failed),
    }


# -- replay ---------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    config = settings(work)
    root = Path(config["root"])
    commits = git(
        root, "rev-list", "--first-parent", f"-{args.commits + 1}", config["base"]
    ).split()
    commits.reverse()
    start = commits[0]
    git(root, "checkout", "-q", "-f", start)
    base_map = work / "replay.db"
    start_file = work / "replay-start.json"
    if args.reuse_map and base_map.exists() and start_file.exists():
        failing_at_start = set(json.loads(start_file.read_text())["failing"])
    else:
        base_map.unlink(missing_ok=True)
        mapping = run(
            pytest_command(config, "-n", "2", f"--accel-map={base_map}", config["tests"]), root
        )
        failing_at_start = failing_tests(mapping.stdout)
        start_file.write_text(json.dumps({"commit": start, "failing": sorted(failing_at_start)}))
    # Tests run (and their verdict known) per state of the package's Python files: a
    # commit that changed no Python file since the last has the same outcomes, so only
    # the tests deselected now that were not run in that state are run.
    verified: dict[str, set[str]] = {}
    collected_at = {}
    out = work / "replay.jsonl"
    out.unlink(missing_ok=True)
    for commit in commits[1:]:
        git(root, "checkout", "-q", "-f", commit)
        listed = run(pytest_command(config, "--co", config["tests"]), root)
        collected = [
            line for line in listed.stdout.splitlines() if "::" in line and not line.startswith(" ")
        ]
        collected_at[commit] = len(collected)
        cfg = {**config, "collected": collected, "failing_at_base": sorted(failing_at_start)}
        decision = decide(cfg, root, base_map, "changed")
        changed_python = [
            name
            for name in git(root, "diff", "--name-only", start, commit).splitlines()
            if name.endswith(".py")
        ]
        deselected = list(decision.deselected)
        state = python_state(root, commit)
        done = verified.setdefault(state, set())
        to_run = [t for t in deselected if t not in done] if changed_python else []
        failed: set[str] = set()
        if to_run:
            failed = run_tests(cfg, root, to_run, first_failure=False)
            done.update(to_run)
        ran_deselected = bool(changed_python and deselected)
        record = {
            "commit": commit,
            "subject": git(root, "log", "-1", "--format=%s", commit)[:70],
            "kept": len(decision.kept),
            "collected": decision.collected,
            "valves": [f"{v.name}: {v.detail}" for v in decision.valves],
            "python_changed_since_map": len(changed_python),
            "deselected_run": ran_deselected,
            "deselected_run_here": len(to_run),
            "deselected_failing": sorted(failed),
        }
        with out.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(
            f"{commit[:10]} {record['subject']}: kept {record['kept']} of"
            f" {record['collected']}; {record['valves'] or ''}",
            flush=True,
        )
    git(root, "checkout", "-q", "-f", config["base"])
    return 0


def python_state(root: Path, commit: str) -> str:
    """The commit's Python files, as their blobs: equal for commits that changed none."""
    listed = git(root, "ls-tree", "-r", commit)
    return "\n".join(line for line in listed.splitlines() if line.endswith(".py"))


# -- summary --------------------------------------------------------------------------


def summary(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    config = settings(work)
    print(
        f"library: {config['package']} at {config['base'][:12]}, {len(config['collected'])} tests"
    )
    if (work / "mutants.jsonl").exists():
        mutants_summary(work, config)
    replay_summary(work)
    return 0


def mutants_summary(work: Path, config: dict[str, Any]) -> None:
    rows = [json.loads(line) for line in (work / "mutants.jsonl").read_text().splitlines()]
    valid = [r for r in rows if r["verdict"] in ("caught", "missed")]
    caught = [r for r in valid if r["verdict"] == "caught"]
    survived = [r for r in rows if r["verdict"] == "survived"]
    share = sum(r["kept"] / r["collected"] for r in valid) / len(valid) if valid else 0.0
    print(
        f"mapping run: {config['mapping_seconds']} s; ground-truth run: {config['truth_seconds']} s"
    )
    print(
        f"mutants: {len(rows)} drawn, {len(survived)} survived (no test fails), {len(valid)} killed"
    )
    print(f"recall: {len(caught)} of {len(valid)} killed mutants kept a failing test")
    print(
        f"tests run by changed: {share:.1%} on average (min"
        f" {min(r['kept'] for r in valid)}, max {max(r['kept'] for r in valid)}"
        f" of {valid[0]['collected']})"
    )
    for r in valid:
        if r["verdict"] == "missed":
            print(f"  MISSED {r['mutation']}: {r['failed_deselected']}")
    programs = [r for r in valid if "programs" in r]
    if programs:
        changed = [r for r in programs if r["programs"]["changed_programs"]]
        # The head map here holds the executing tests only (mapping all 596 again per
        # mutant would take 17 minutes each); a test that does not execute the mutated
        # line lowers what it lowered before, so with a full head map it is deselected:
        # the share run is the tests whose programs changed.
        shares = [r["programs"]["changed_programs"] / r["collected"] for r in programs]
        p_share = sum(shares) / len(shares)
        with_failing = sum(1 for r in changed if r["programs"]["failing_among_them"])
        print(
            f"programs: {len(programs)} mutants mapped again; {len(changed)} changed a compiled"
            f" program; {p_share:.1%} of the tests run on average (those whose programs"
            f" changed); of those that changed a program, {with_failing} ran a failing test"
        )


def replay_summary(work: Path) -> None:
    replay_path = work / "replay.jsonl"
    if not replay_path.exists():
        return
    replayed = [json.loads(line) for line in replay_path.read_text().splitlines()]
    shares = [r["kept"] / r["collected"] for r in replayed]
    bad = [r for r in replayed if r["deselected_failing"]]
    print(
        f"replay: {len(replayed)} commits; share selected: mean {sum(shares) / len(shares):.1%};"
        f" deselected tests failing: {len(bad)} commit(s)"
    )
    for r in replayed:
        failing = f" FAILING {r['deselected_failing']}" if r["deselected_failing"] else ""
        print(
            f"  {r['commit'][:10]} {r['kept']:4d}/{r['collected']}"
            f" {r['subject'][:50]} {'; '.join(r['valves'])[:60]}{failing}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    first = commands.add_parser("setup")
    first.add_argument("--repo", required=True)
    first.add_argument("--package", required=True)
    first.add_argument("--tests", default="tests")
    first.add_argument("--python", required=True)
    first.add_argument("--work", required=True)
    second = commands.add_parser("mutate")
    second.add_argument("--work", required=True)
    second.add_argument("--count", type=int, default=110)
    second.add_argument("--seed", type=int, default=0)
    second.add_argument("--hours", type=float, default=3.0)
    second.add_argument(
        "--programs", type=int, default=0, help="map this many killed mutants again (programs)"
    )
    third = commands.add_parser("replay")
    third.add_argument("--work", required=True)
    third.add_argument("--commits", type=int, default=30)
    third.add_argument(
        "--reuse-map", action="store_true", help="keep WORK/replay.db from an earlier replay"
    )
    fourth = commands.add_parser("summary")
    fourth.add_argument("--work", required=True)
    args = parser.parse_args()
    return {"setup": setup, "mutate": mutate, "replay": replay, "summary": summary}[args.command](
        args
    )


if __name__ == "__main__":
    raise SystemExit(main())
