"""Change-aware selection against mutants drawn from every kind of line of a real
library, each judged by a full run of its suite (issue 56).

    python bench/selection_study.py setup --repo /work/study/quax \\
        --python /work/study/venv/bin/python --work /work/study/q \\
        --sources quax tests --pytest-args="tests --ignore=tests/test_numpy"
    python bench/selection_study.py mutate --work /work/study/q --per-kind 10 --seed 0
    python bench/selection_study.py summary --work /work/study/q

``setup`` clones the library twice (two mutants run side by side, one per core), runs
its suite plainly, under coverage.py alone (one context per test, as a mapping run
measures) and as a mapping run (``--accel-map``), each timed, and lists the candidate
sites of each kind of line in the files under ``--sources``:

- ``function body``: a statement in a function or method of the library;
- ``module level``: a statement at a module's top level (the library's or a test
  file's: what runs at import and collection);
- ``class body``: a class attribute;
- ``decorator``: a decorator, removed (a registration, a property, a fixture);
- ``default argument``: a default value;
- ``fixture``: a statement of a ``pytest.fixture`` (conftest or test file);
- ``same-named``: a statement of a definition whose name repeats in its scope
  (``@register`` implementations named ``_``, a property's getter and setter);
- ``data file``: a file the suite read (the map's ``data_files``).

``mutate`` draws mutants round-robin over the kinds (``--seed``): one operator,
number or constant of the line (``SWAPS``), a removed decorator, or a changed digit.
The ground truth is what runs show, never coverage: a selecting run
(``--accel-select=changed`` with the base map) runs what selection keeps, and when one
of those tests fails the mutant kills and is caught.  When every kept test passes, a
**full run** of the suite decides: no test fails (a survivor, which does not count), or
a test selection deselected fails, and fails again when run twice more with the mutant
(a miss; one that passes then is ``unreproduced``: a suite with random seeds fails now
and then whatever the code, and it does not count).  Results go to
``WORK/mutants.jsonl``; ``summary`` prints recall and the mean share of tests run per
kind, the figures docs/selection.md quotes.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
import tokenize
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import mutation_study

# mutation_study's operator swaps but ``**`` and ``//`` (the set the 0.5 study drew
# with), and identity and membership.
SWAPS = {
    **{k: v for k, v in mutation_study.SWAPS.items() if k not in ("**", "//")},
    "is": "is not",
    "in": "not in",
}
KINDS = (
    "function body",
    "module level",
    "class body",
    "decorator",
    "default argument",
    "fixture",
    "same-named",
    "data file",
)
# A mutant of one size written within a second would leave a stale .pyc valid.
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
SELECTING_TIMEOUT = 300  # seconds: the suites here take at most 60 s whole


def run(
    command: list[str], cwd: Path, timeout: float = 900, path: str = ""
) -> subprocess.CompletedProcess[str]:
    """``path``: where the library's package is, under ``cwd`` (the copy's, not the
    installed one)."""
    env = {**ENV, "PYTHONPATH": str(cwd / path)} if path else ENV
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


git = mutation_study.git
settings = mutation_study.settings


def pytest(config: dict[str, Any], *args: str) -> list[str]:
    """Paths outside the copy are given with ``=``: pytest takes a separate argument
    that names an existing path as one to find the rootdir from, before it knows a
    plugin's options (``--accel-map /elsewhere/map.db`` moved it to ``/elsewhere``)."""
    return [
        config["python"],
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rfE",
        "--rootdir=.",
        *shlex.split(config["pytest_args"]),
        *args,
    ]


def failing(output: str) -> set[str]:
    """The node ids (or files, for a collection error) a run names as failed."""
    found = set()
    for line in output.splitlines():
        for prefix in ("FAILED ", "ERROR "):
            if line.startswith(prefix):
                found.add(line[len(prefix) :].split(" - ", 1)[0].strip())
    return found


# -- setup ----------------------------------------------------------------------------


def setup(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    roots = [work / f"repo{j}" for j in range(2)]
    for root in roots:
        git(work, "clone", "-q", str(Path(args.repo).resolve()), str(root))
    config: dict[str, Any] = {
        "python": args.python,
        "sources": args.sources,
        "pytest_args": args.pytest_args,
        "base": git(roots[0], "rev-parse", "HEAD"),
        "pythonpath": args.pythonpath,
    }
    root = roots[0]
    times = {}
    outputs = {}
    rc = work / "coveragerc"
    rc.write_text(f"[run]\nsource = {root}\ndynamic_context = test_function\n")
    for name, command in (
        ("plain", pytest(config)),
        (
            "coverage alone",
            [
                config["python"],
                "-m",
                "coverage",
                "run",
                f"--rcfile={rc}",
                "-m",
                "pytest",
                *pytest(config)[3:],
            ],
        ),
        ("mapping, programs off", pytest(config, f"--accel-map={work / 'off.db'}")),
        ("mapping", pytest(config, f"--accel-map={work / 'base.db'}")),
    ):
        if name == "mapping, programs off":
            command.append("--accel-map-programs=off")
        started = time.perf_counter()
        done = run(command, root, path=args.pythonpath)
        times[name] = round(time.perf_counter() - started, 2)
        outputs[name] = done.stdout.splitlines()[-1:] if done.stdout else done.stderr[-300:]
    config["seconds"] = times
    config["tails"] = outputs
    config["failing_at_base"] = sorted(
        failing(run(pytest(config), root, path=args.pythonpath).stdout)
    )
    config["collected"] = [
        line
        for line in run(pytest(config, "--co"), root, path=args.pythonpath).stdout.splitlines()
        if "::" in line and not line.startswith(" ")
    ]
    config["sites"] = {kind: list(found) for kind, found in sites(root, config, work).items()}
    (work / "study.json").write_text(json.dumps(config, indent=2))
    shown = {k: v for k, v in config.items() if k not in ("collected", "sites")}
    print(json.dumps(shown, indent=2))
    print({kind: len(found) for kind, found in config["sites"].items()})
    return 0


def sites(root: Path, config: dict[str, Any], work: Path) -> dict[str, list[list[Any]]]:
    """Each kind's candidate sites: [file, line] (and a column span for defaults)."""
    found: dict[str, list[list[Any]]] = {kind: [] for kind in KINDS}
    for source in config["sources"]:
        for path in sorted((root / source).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            text = path.read_text()
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            mutable = mutable_lines(text)
            is_test = "test" in relative.split("/")[0] or path.name == "conftest.py"

            def add(kind: str, line: int, rel: str = relative, lines: set[int] = mutable) -> None:
                if line in lines:
                    found[kind].append([rel, line])

            for node in tree.body:
                if not isinstance(
                    node,
                    ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import,
                ) and not isinstance(node, ast.ImportFrom | ast.Expr):
                    add("module level", node.lineno)
            for scope in ast.walk(tree):
                body = getattr(scope, "body", None)
                if not isinstance(body, list):
                    continue
                names = [
                    n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
                for node in body:
                    if isinstance(scope, ast.ClassDef) and isinstance(
                        node, ast.Assign | ast.AnnAssign
                    ):
                        add("class body", node.lineno)
                    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                        continue
                    for decorator in node.decorator_list:
                        found["decorator"].append([relative, decorator.lineno])
                    for default in [*node.args.defaults, *node.args.kw_defaults]:
                        if default is not None and default.lineno == default.end_lineno:
                            add("default argument", default.lineno)
                    fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
                    if fixture:
                        kind = "fixture"
                    elif names.count(node.name) > 1:
                        kind = "same-named"
                    elif not is_test:
                        kind = "function body"
                    else:
                        continue  # a test's own body: its own block, trivially kept
                    for statement in ast.walk(node):
                        if isinstance(statement, ast.stmt) and statement is not node:
                            add(kind, statement.lineno)
    import sqlite3

    with sqlite3.connect(work / "base.db") as connection:
        paths = sorted({row[0] for row in connection.execute("SELECT path FROM data_files")})
    found["data file"] = [[p, 0] for p in paths if (root / p).is_file()]
    return found


def mutable_lines(text: str) -> set[int]:
    return {token.start[0] for token in operators(text)}


def operators(text: str) -> Iterator[tokenize.TokenInfo]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.string in SWAPS or (
                token.type == tokenize.NUMBER and not token.string.lower().startswith("0x")
            ):
                yield token
    except (tokenize.TokenError, SyntaxError):
        return


# -- mutants --------------------------------------------------------------------------


def mutant(root: Path, kind: str, site: list[Any], rng: random.Random) -> tuple[str, str] | None:
    """The mutated text of the site's file (and what changed), or None."""
    path = root / site[0]
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    if kind == "data file":
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        if digits:
            i = rng.choice(digits)
            new = str((int(text[i]) + 1) % 10)
            return text[:i] + new + text[i + 1 :], f"digit {text[i]} -> {new} at {i}"
        return text + "\n#\n", "a line appended"
    line = site[1]
    if kind == "decorator":
        decorator = lines[line - 1]
        if not decorator.lstrip().startswith("@") or decorator.rstrip().endswith("("):
            return None
        indent = decorator[: len(decorator) - len(decorator.lstrip())]
        lines[line - 1] = f"{indent}# removed: {decorator.strip()}\n"
        return "".join(lines), f"removed {decorator.strip()}"
    choices = [t for t in operators(text) if t.start[0] == line]
    if not choices:
        return None
    token = rng.choice(choices)
    if token.type == tokenize.NUMBER:
        try:
            value = int(token.string.replace("_", ""))
            new = str(value + 1)
        except ValueError:
            try:
                new = repr(float(token.string) * 2 + 1)
            except ValueError:
                return None
    else:
        new = SWAPS[token.string]
    row = lines[line - 1]
    column = token.start[1]
    lines[line - 1] = row[:column] + new + row[column + len(token.string) :]
    return "".join(lines), f"{token.string} -> {new}"


def judge(config: dict[str, Any], work: Path, root: Path, case: dict[str, Any]) -> None:
    """The selecting run first: a test it kept that fails is a real failure (the
    mutant kills, and is caught).  Where every test it kept passes, the full run is the
    ground truth: no test fails (a survivor), or one that selection left out does (a
    miss)."""
    base = set(config["failing_at_base"])
    record = root / "selecting.json"
    started = time.perf_counter()
    command = pytest(
        config,
        f"--accel-map={work / 'base.db'}",
        "--accel-select=changed",
        f"--perf-record={record}",
    )
    try:
        selecting = run(command, root, timeout=SELECTING_TIMEOUT, path=config["pythonpath"])
    except subprocess.TimeoutExpired:
        # A kept test that never ends (a loop whose bound the mutant moved): the CI job
        # times out, red.  What it kept is collected again.
        listed = run([*command[:-1], "--co"], root, path=config["pythonpath"])
        kept = sum(1 for line in listed.stdout.splitlines() if "::" in line)
        case.update(result="caught", failing=["(a kept test did not end)"], kept=kept)
        case["collected"] = len(config["collected"])
        case["share"] = round(kept / case["collected"], 4) if case["collected"] else 1.0
        return
    case["selecting_seconds"] = round(time.perf_counter() - started, 1)
    # Red: a test failed that passed at the base, or the run could not run its tests
    # (2: interrupted by collection errors, 3: internal error, 4: usage error).
    red = bool(failing(selecting.stdout) - base) or selecting.returncode in (2, 3, 4)
    try:
        section = json.loads(record.read_text()).get("selection") or {}
    except (OSError, ValueError):
        section = {}
    record.unlink(missing_ok=True)
    kept = section.get("kept", {})
    deselected = section.get("deselected", {})
    collected = len(kept) + len(deselected) + len(section.get("cut", {}))
    case["kept"] = len(kept)
    case["collected"] = collected or len(config["collected"])
    case["share"] = round(len(kept) / collected, 4) if collected else 1.0
    case["valves"] = [v.get("name") for v in section.get("valves", [])]
    if red:
        case["failing"] = sorted(failing(selecting.stdout) - base)
        case["result"] = "caught"
        return
    started = time.perf_counter()
    full = run(pytest(config), root, path=config["pythonpath"])
    case["full_seconds"] = round(time.perf_counter() - started, 1)
    case["failing"] = sorted(failing(full.stdout) - base)
    if not case["failing"]:
        case["result"] = "survivor"
        return
    case["missed_tests"] = sorted(t for t in case["failing"] if t in deselected)
    case["selecting_tail"] = selecting.stdout.splitlines()[-3:]
    # A miss must reproduce: the tests that failed, run again twice with the mutant (a
    # suite with random seeds fails now and then whatever the code).
    for _ in range(2):
        again = run(pytest(config, *case["missed_tests"]), root, path=config["pythonpath"])
        if not failing(again.stdout) - base:
            case["result"] = "unreproduced"
            return
    case["result"] = "missed"


def shuffled_sites(
    config: dict[str, Any], skip: list[str], rng: random.Random
) -> dict[str, list[list[Any]]]:
    queues = {
        kind: [s for s in found if not any(fnmatch(s[0], g) for g in skip)]
        for kind, found in config["sites"].items()
    }
    for found in queues.values():
        rng.shuffle(found)
    return queues


def reset(work: Path, jobs: int) -> None:
    """Each copy as committed: a killed run leaves its last mutant in place."""
    for j in range(jobs):
        git(work / f"repo{j}", "checkout", "-q", "--", ".")
        git(work / f"repo{j}", "clean", "-fdq")


def mutate(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    config = settings(work)
    rng = random.Random(args.seed)
    queues = shuffled_sites(config, args.skip, rng)
    out = work / "mutants.jsonl"
    done: list[dict[str, Any]] = []
    if out.exists():
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    killed = {
        kind: sum(1 for d in done if d["kind"] == kind and d["result"] != "survivor")
        for kind in KINDS
    }
    tried = {(d["file"], d["line"], d["kind"]) for d in done}
    attempts = {kind: sum(1 for d in done if d["kind"] == kind) for kind in KINDS}
    reset(work, args.jobs)
    lock = threading.Lock()
    deadline = time.monotonic() + args.minutes * 60

    def next_case(root: Path) -> dict[str, Any] | None:
        with lock:
            for _ in range(len(KINDS) * 50):
                open_kinds = [k for k in KINDS if queues.get(k) and killed[k] < args.per_kind]
                if not open_kinds or time.monotonic() > deadline:
                    return None
                kind = min(open_kinds, key=lambda k: (attempts[k], killed[k]))
                attempts[kind] += 1
                site = queues[kind].pop()
                if (site[0], site[1], kind) in tried:
                    continue
                made = mutant(root, kind, site, rng)
                if made is None:
                    continue
                tried.add((site[0], site[1], kind))
                return {
                    "kind": kind,
                    "file": site[0],
                    "line": site[1],
                    "text": made[0],
                    "what": made[1],
                }
            return None

    def worker(root: Path) -> None:
        while True:
            case = next_case(root)
            if case is None:
                return
            path = root / case["file"]
            original = path.read_bytes()
            path.write_text(case.pop("text"))
            try:
                judge(config, work, root, case)
            except subprocess.TimeoutExpired:
                case["result"] = "timeout"
            finally:
                path.write_bytes(original)
            with lock:
                if case["result"] in ("caught", "missed"):
                    killed[case["kind"]] += 1
                with out.open("a") as handle:
                    handle.write(json.dumps(case) + "\n")
                print(case["kind"], case["file"], case["line"], case["result"], flush=True)

    threads = [threading.Thread(target=worker, args=(work / f"repo{j}",)) for j in range(args.jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 0


def summary(args: argparse.Namespace) -> int:
    work = Path(args.work).resolve()
    config = settings(work)
    cases = [json.loads(line) for line in (work / "mutants.jsonl").read_text().splitlines() if line]
    killing = [c for c in cases if c["result"] in ("caught", "missed")]
    print(f"{work.name}: {len(config['collected'])} tests; seconds {config['seconds']}")
    ratio = config["seconds"]["mapping"] / config["seconds"]["coverage alone"]
    ratio_off = config["seconds"]["mapping, programs off"] / config["seconds"]["coverage alone"]
    print(f"mapping / coverage alone: {ratio:.2f}x (programs off: {ratio_off:.2f}x)")
    print("| kind | mutants tried | killing | caught | missed | mean share of tests run |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in (*KINDS, "all"):
        mine = [c for c in cases if kind in ("all", c["kind"])]
        kills = [c for c in mine if c in killing]
        caught = sum(c["result"] == "caught" for c in kills)
        share = sum(c["share"] for c in kills) / len(kills) if kills else 0.0
        print(
            f"| {kind} | {len(mine)} | {len(kills)} | {caught} | {len(kills) - caught} |"
            f" {share:.1%} |"
        )
    unreproduced = [c for c in cases if c["result"] == "unreproduced"]
    print(
        f"{len(unreproduced)} mutant(s) whose failing tests, all deselected, passed when run"
        " again with the mutant (not counted: the suite fails now and then by itself)"
    )
    for case in [*killing, *unreproduced]:
        if case["result"] in ("missed", "unreproduced"):
            print(case["result"].upper(), json.dumps(case))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(required=True)
    one = commands.add_parser("setup")
    one.add_argument("--repo", required=True)
    one.add_argument("--python", required=True)
    one.add_argument("--work", required=True)
    one.add_argument("--sources", nargs="+", required=True)
    one.add_argument("--pytest-args", default="")
    one.add_argument("--pythonpath", default=".", help="the package's folder in the repo")
    one.set_defaults(handler=setup)
    two = commands.add_parser("mutate")
    two.add_argument("--work", required=True)
    two.add_argument("--per-kind", type=int, default=10)
    two.add_argument("--seed", type=int, default=0)
    two.add_argument("--jobs", type=int, default=2)
    two.add_argument("--minutes", type=float, default=60)
    two.add_argument("--skip", nargs="*", default=[], help="globs of files to draw none from")
    two.set_defaults(handler=mutate)
    three = commands.add_parser("summary")
    three.add_argument("--work", required=True)
    three.set_defaults(handler=summary)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
