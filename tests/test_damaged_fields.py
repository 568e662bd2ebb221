"""Well-formed JSON with a field missing, null or absurd: every command and every pytest
option that reads the file says so in one line naming the file and the field (exit 2 for
the command, 4 for pytest, before any test runs), never a traceback.

The damaged files are made from real ones written by the plugin in the test: every field
of a record, a baseline and a flaky history in turn is deleted, set to null and set to
1.7e308."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main
from pytest_accel.perf.options import PerfOptions
from pytest_accel.perf.plugin import load_for_session
from tests.fakesys import hermetic_environ
from tests.forked import Run, run_forked

SUITE = """
import pytest

class TestPair:
    def test_one(self):
        pass

    def test_two(self):
        pass

def test_alone():
    pass

def test_fails():
    assert False
"""

Doc = dict[str, Any]
Path_ = tuple[str | int, ...]


@pytest.fixture(scope="module")
def real_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Doc]:
    """A record with every optional section (selection's, cost's), a three-run baseline
    and a flaky history, written by the plugin in processes of their own, one after
    another (tests/forked.py)."""
    where = tmp_path_factory.mktemp("real")
    (where / "test_suite.py").write_text(SUITE)
    # As every other test here: judged on clocks that never move, whatever the load.
    environ = hermetic_environ(tmp_path_factory)
    pytest_args = ["-p", "no:cacheprovider", "test_suite.py"]
    mapping = [*pytest_args, "--accel-map=map.db", "--accel-map-programs=off"]
    recording = [
        [
            *pytest_args,
            f"--perf-record=rec{index}.json",
            "--perf-baseline=base.json",
            "--perf-update-baseline",
            "--flaky-history=hist.json",
            "--flaky-reruns=1",
            "--accel-map=map.db",
            "--accel-select=shadow",
            "--accel-price=cpu/*=2",
        ]
        for index in range(3)
    ]
    runs = [Run("pytest", args, where) for args in (mapping, *recording)]
    run_forked(runs, tmp_path_factory.mktemp("forked"), one_after_another=True, environ=environ)
    docs = {
        name: json.loads((where / f"{name}.json").read_text())
        for name in ("rec0", "rec1", "base", "hist")
    }
    assert docs["rec1"]["tests"]["attempts"]  # the failing test's rerun
    assert docs["rec0"]["classes"]["id"] == ["test_suite.py::TestPair"]
    assert set(docs["rec0"]["selection"]) >= {"map", "valves", "saved", "failed", "notes"}
    assert docs["rec0"]["cost"]["top_tests"]
    return docs


def field_paths(doc: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every key of every object, and the first entry of every list, depth first."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from field_paths(value, (*prefix, key))
    elif isinstance(doc, list) and doc:
        yield (*prefix, 0)
        yield from field_paths(doc[0], (*prefix, 0))


def damaged(doc: Doc, path: Path_, how: str) -> Doc:
    copied = copy.deepcopy(doc)
    parent: Any = copied
    for step in path[:-1]:
        parent = parent[step]
    if how == "deleted":
        del parent[path[-1]]
    else:
        parent[path[-1]] = {"null": None, "huge": 1.7e308, "empty": []}[how]
    return copied


def damages(
    doc: Doc, deepest: int = 99, within: Callable[[Path_], bool] = lambda path: True
) -> Iterator[tuple[str, Doc]]:
    """Every field (``within`` those it names), deleted, null, 1.7e308 and an empty
    list, down to ``deepest`` levels."""
    for path in field_paths(doc):
        if len(path) <= deepest and within(path):
            for how in ("deleted", "null", "huge", "empty"):
                yield f"{'.'.join(map(str, path))} {how}", damaged(doc, path, how)


def run_command(argv: list[str]) -> tuple[int, str]:
    """The command in this process: its exit status and stderr.  An exception escaping
    ``main`` is the defect this file looks for, so it is turned into a failure text."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    except Exception as exc:  # what the test reports
        return -1, f"{type(exc).__name__}: {exc}"
    return code, err.getvalue()


def problems_with(argv: list[str], damaged_file: Path) -> str | None:
    """What is wrong with how the command took the damaged file, or None."""
    code, err = run_command(argv)
    if code == -1:
        return f"traceback: {err}"
    if code == 2:
        lines = err.splitlines()
        if len(lines) != 1 or not lines[0].startswith(f"pytest-accel: error: {damaged_file}: "):
            return f"exit 2 without one line naming the file: {err!r:.300}"
    elif code not in (0, 1):
        return f"exit {code}"
    return None


def commands_for(
    kind: str, damaged_file: Path, good: dict[str, Path], out: Path
) -> list[list[str]]:
    f, rec, base = str(damaged_file), str(good["rec1"]), str(good["base"])
    if kind == "record":
        return [
            ["compare", f, "--baseline", base],
            ["compare", rec, "--baseline", f],
            ["baseline", f, "--into", str(out / "new-base.json")],
            ["merge", "-o", str(out / "merged.json"), f, rec],
            ["upgrade", f],
            ["report", f, "-o", str(out / "page.html")],
            ["shard", "--durations", f, "--splits", "2", "--without-collecting"],
            ["flaky", f],
            ["coverage", f],
            ["selection", f],
        ]
    if kind == "baseline":
        return [
            ["compare", rec, "--baseline", f],
            ["report", rec, "--baseline", f, "-o", str(out / "page.html")],
            ["shard", "--durations", f, "--splits", "2", "--without-collecting"],
            ["upgrade", f],
            ["baseline", rec, "--into", f],
            ["baseline", "--into", f, "--accept", "all"],
        ]
    return [["flaky", f], ["report", "--history", f, "-o", str(out / "page.html")]]


# A record's sections that other features write (and the page, merge, coverage and
# selection read): damaged apart from the rest, so the two halves run side by side.
SECTIONS = ("selection", "cost")


@pytest.mark.parametrize(
    ("kind", "name", "within"),
    [
        ("record", "rec0", lambda path: path[0] not in SECTIONS),
        ("record", "rec0", lambda path: path[0] in SECTIONS),
        ("baseline", "base", lambda path: True),
        ("history", "hist", lambda path: True),
    ],
    ids=["record", "record-sections", "baseline", "history"],
)
def test_every_command_takes_every_damaged_field_in_one_line_or_in_its_stride(
    real_files: dict[str, Doc],
    tmp_path: Path,
    kind: str,
    name: str,
    within: Callable[[Path_], bool],
) -> None:
    good = {}
    for other, doc in real_files.items():
        good[other] = tmp_path / f"good-{other}.json"
        good[other].write_text(json.dumps(doc))
    tried, found = through_commands(kind, damages(real_files[name], within=within), good, tmp_path)
    assert tried > 100
    assert found == []


def through_commands(
    kind: str, damaged_docs: Iterator[tuple[str, Doc]], good: dict[str, Path], out: Path
) -> tuple[int, list[str]]:
    """Each damaged file through every command that reads its kind: how many runs,
    and what went wrong in them."""
    damaged_file = out / f"damaged-{kind}.json"
    commands = commands_for(kind, damaged_file, good, out)
    found = []
    tried = 0
    for what, doc in damaged_docs:
        text = json.dumps(doc)
        damaged_file.write_text(text)
        written = _identity(damaged_file)
        for argv in commands:
            tried += 1
            problem = problems_with(argv, damaged_file)
            if problem:
                found.append(f"{what}, {argv[0]}: {problem}")
            if argv[0] in REWRITING:  # so that the next command reads the damaged file
                damaged_file.write_text(text)
                written = _identity(damaged_file)
                (out / "new-base.json").unlink(missing_ok=True)
            elif _identity(damaged_file) != written:
                found.append(f"{what}, {argv[0]}: wrote the file it only reads")
    return tried, found


# The commands that may write the file they read (`upgrade` in place, `baseline --into`)
# or the new baseline another `baseline` starts from: the file is written afresh after
# them, and only after them (a write per command was a tenth of these cases' work).
REWRITING = frozenset({"upgrade", "baseline"})


def _identity(path: Path) -> tuple[int, int, int]:
    """What changes when a file is written in place or replaced."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


@pytest.mark.parametrize(("kind", "name"), [("record", "rec0"), ("baseline", "base")])
def test_pytest_stops_on_a_damaged_baseline_before_any_test_never_with_a_traceback(
    pytester: pytest.Pytester, real_files: dict[str, Doc], kind: str, name: str
) -> None:
    """Every damage is read as the session reads ``--perf-baseline`` before its first
    test (``load_for_session``): refused in one line naming the file, or loaded.  pytest
    then runs once per baseline a damaged file loads as (the session sees nothing else
    of the file, so equal loads run alike) and once per section whose damage it refuses,
    which must stop it with that one line before any test."""
    pytester.makepyfile(test_suite=SUITE)
    found = []
    refused: dict[str, str] = {}  # a damage per section whose damage is refused
    loads: dict[bytes, str] = {}  # a damage per distinct baseline loaded
    refusals = 0
    # Three levels reach every column and section (an entry inside a column is a type
    # error, which tests/test_input_files.py names one by one).
    for what, doc in damages(real_files[name], deepest=3):
        if not what.endswith(("deleted", "null")):
            continue
        (pytester.path / "damaged.json").write_text(json.dumps(doc))
        try:
            baseline = load_for_session(session_options("damaged.json"))
        except pytest.UsageError as exc:
            refusals += 1
            message = str(exc)
            if not message.startswith("--perf-baseline: damaged.json: ") or "\n" in message:
                found.append(f"{what}: not one line naming the file: {message!r}")
            refused.setdefault(what.split()[0].split(".")[0], json.dumps(doc))
        except Exception as exc:  # what the test reports
            found.append(f"{what}: traceback: {type(exc).__name__}: {exc}")
        else:
            loads.setdefault(pickle.dumps(baseline), json.dumps(doc))
    assert refusals > 10
    assert len(refused) >= 2
    assert loads
    for section, text in refused.items():
        (pytester.path / "damaged.json").write_text(text)
        result = pytester.runpytest_inprocess("--perf-baseline=damaged.json", "-p", "no:randomly")
        errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
        if result.ret != pytest.ExitCode.USAGE_ERROR:
            found.append(f"{section}: refused when read, exit {result.ret} in pytest")
        elif errors != [line for line in result.stderr.lines if line.strip()] or not errors[
            0
        ].startswith("ERROR: --perf-baseline: damaged.json: "):
            found.append(f"{section}: not one line naming the file: {result.stderr.lines}")
        if "passed" in result.stdout.str():
            found.append(f"{section}: tests ran before the error")
    for text in loads.values():
        (pytester.path / "damaged.json").write_text(text)
        result = pytester.runpytest_inprocess("--perf-baseline=damaged.json", "-p", "no:randomly")
        output = result.stdout.str() + result.stderr.str()
        if "Traceback" in output or "INTERNALERROR" in output:
            found.append(f"loaded {text:.80}: traceback")
        elif result.ret != pytest.ExitCode.TESTS_FAILED:  # test_fails fails
            found.append(f"loaded {text:.80}: exit {result.ret}")
    assert found == []


def session_options(baseline: str) -> PerfOptions:
    return PerfOptions(
        record=None,
        baseline=baseline,
        rule_settings={},
        top=5,
        fail=False,
        update_baseline=False,
        window=20,
    )


def write(path: Path, doc: Doc) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_cases_named_in_the_audit_each_name_their_field(
    real_files: dict[str, Doc], tmp_path: Path
) -> None:
    record, baseline = real_files["rec0"], real_files["base"]
    base = write(tmp_path / "base.json", baseline)
    cases = [
        (
            ["compare", "{f}", "--baseline", base],
            record,
            ("tests", "class"),
            "deleted",
            "tests.class: missing (expected a list)",
        ),
        (
            ["compare", "{f}", "--baseline", base],
            record,
            ("tests", "module"),
            "deleted",
            "tests.module: missing (expected a list)",
        ),
        (
            ["compare", "{f}", "--baseline", base],
            record,
            ("modules", "whole"),
            "null",
            "modules.whole: expected a list, got null",
        ),
        (
            ["compare", "{f}", "--baseline", base],
            record,
            ("modules", "deselected"),
            "null",
            "modules.deselected: expected a list, got null",
        ),
        (
            ["merge", "-o", str(tmp_path / "m.json"), "{f}", base.replace("base", "r")],
            record,
            ("tests", "call"),
            "null",
            "tests.call: expected a list, got null",
        ),
        (
            ["upgrade", "{f}"],
            record,
            ("tests", "worker"),
            "null",
            "tests.worker: expected a list, got null",
        ),
        (
            ["compare", "{rec}", "--baseline", "{f}"],
            baseline,
            ("envs", "cpu/x1", "runs"),
            "deleted",
            "envs['cpu/x1'].runs: missing (expected a list of runs)",
        ),
        (
            ["shard", "--durations", "{f}", "--splits", "2", "--without-collecting"],
            baseline,
            ("envs", "cpu/x1", "runs"),
            "deleted",
            "envs['cpu/x1'].runs: missing (expected a list of runs)",
        ),
        (
            ["report", "--baseline", "{f}", "-o", str(tmp_path / "p.html")],
            baseline,
            ("envs", "cpu/x1", "summary", "totals", 0),
            "huge",
            "envs['cpu/x1'].summary.totals: 1.7e+308 is implausibly large",
        ),
    ]
    write(tmp_path / "r.json", record)
    for argv, doc, path, how, message in cases:
        target = tmp_path / "damaged.json"
        write(target, damaged(doc, path, how))
        code, err = run_command([part.format(f=target, rec=tmp_path / "r.json") for part in argv])
        assert (code, err) == (2, f"pytest-accel: error: {target}: {message}\n"), argv


JAX_SUITE = """
import jax
import jax.numpy as jnp


def test_doubles():
    assert float(jax.jit(lambda x: x * 2)(jnp.float32(2))) == 4.0
"""


def test_a_damaged_compilation_section_is_read_in_its_stride_by_every_command(
    pytester: pytest.Pytester,
) -> None:
    """The ``compilation`` section (a JAX run's, so apart from the records above, whose
    suite does not use JAX) is read leniently: a damaged field is no compilation, or a
    count left out of a merge, never a traceback or a number JSON cannot hold."""
    pytest.importorskip("jax")
    from tests.jax_runs import run_jax_suite

    pytester.makepyfile(test_jax=JAX_SUITE)
    run_jax_suite(pytester, "--perf-record=good.json").assert_outcomes(passed=1)
    good = pytester.path / "good.json"
    record = json.loads(good.read_text())
    assert record["compilation"]["count"] >= 1
    partners = {"rec1": good, "base": good}  # a record serves as a baseline too
    in_compilation = damages(record, within=lambda path: path[0] == "compilation")
    tried, found = through_commands("record", in_compilation, partners, pytester.path)
    assert tried > 100
    assert found == []


@pytest.mark.processes
def test_a_number_beyond_any_double_is_refused_alike_by_pytest_and_the_command(
    pytester: pytest.Pytester, real_files: dict[str, Doc]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    text = json.dumps(real_files["rec0"]).replace('"duration": ', '"duration": 1e400, "was": ', 1)
    (pytester.path / "inf.json").write_text(text)
    # A pytest process parses with the standard library, the command with orjson.
    result = pytester.runpytest_subprocess("--perf-baseline=inf.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --perf-baseline: inf.json: is not valid JSON"
            " (number 1e400 is infinity when parsed as double)"
        ]
    )
    code, err = run_command(
        ["compare", str(pytester.path / "inf.json"), "--baseline", str(pytester.path / "inf.json")]
    )
    assert code == 2
    assert "inf.json: is not valid JSON (number is infinity when parsed as double" in err
