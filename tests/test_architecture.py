"""The package's shape, checked from its source: the import chart in
docs/architecture.md is the code's and so is every place its glossary names, shared
modules import no feature, features do not import each other, each file format has one
module, and plugin.py only wires."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tests.fakesys import FakeSys

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "pytest_accel"
SHARED = {
    "reports",
    "files",
    "fields",
    "locking",
    "github",
    "settings",
    "text",
    "hookspecs",
    "outcomes",
    "file_uses",
    "process_state",
    "imports",
    "vcs",
}
FEATURES = {"hardware", "scaleout", "perf", "flaky", "cost", "coverage", "selection", "store"}


@pytest.fixture(scope="module")
def graph() -> object:
    path = ROOT / "scripts" / "import_graph.py"
    if not path.exists():
        pytest.skip("the source tree's scripts/ is not here (an installed wheel)")
    spec = importlib.util.spec_from_file_location("import_graph", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


def test_the_chart_in_the_architecture_page_is_the_codes(graph: object) -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert graph.chart() in doc, "run: python scripts/import_graph.py"  # type: ignore[attr-defined]


def test_no_shared_module_imports_a_feature(graph: object) -> None:
    edges = graph.edges()  # type: ignore[attr-defined]
    wrong = sorted((a, b) for a, b in edges if a in SHARED - {"hookspecs"} and b in FEATURES)
    assert wrong == []


def test_features_import_no_other_feature_but_the_detection_they_are_keyed_by(
    graph: object,
) -> None:
    edges = graph.edges()  # type: ignore[attr-defined]
    across = sorted((a, b) for a, b in edges if a in FEATURES and b in FEATURES and b != "hardware")
    assert across == []


def test_there_is_no_import_circle_between_packages(graph: object) -> None:
    edges = graph.edges()  # type: ignore[attr-defined]
    following: dict[str, set[str]] = {}
    for a, b in edges:
        following.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for step in following.get(start, ()):
            if step == goal or (step not in seen and reaches(step, goal, seen | {step})):
                return True
        return False

    circles = sorted(a for a in following if reaches(a, a, {a}))
    assert circles == []


def sources() -> dict[str, str]:
    package = ROOT / "src" / "pytest_accel"
    if not package.exists():
        pytest.skip("the source tree is not here")
    return {
        str(p.relative_to(package)): p.read_text(encoding="utf-8") for p in package.rglob("*.py")
    }


def test_each_file_format_is_named_by_one_module_that_reads_and_writes_it() -> None:
    """Modules split along concepts, not lines: a file format's schema name is defined in
    one module, and that module both checks what it reads and writes the format."""
    owners: dict[str, list[str]] = {}
    for name, text in sources().items():
        for schema in re.findall(r'^[A-Z_]+_SCHEMA = "(pytest-accel/[a-z-]+)"$', text, re.M):
            owners.setdefault(schema, []).append(name)
    assert sorted(owners) == [
        "pytest-accel/baseline",
        "pytest-accel/flaky-history",
        "pytest-accel/flaky-report",
        "pytest-accel/map",
        "pytest-accel/quarantine",
        "pytest-accel/record",
        "pytest-accel/store-index",
    ]
    assert all(len(modules) == 1 for modules in owners.values()), owners
    for schema, (module,) in owners.items():
        if schema == "pytest-accel/flaky-report":
            continue  # written for other tools; the plugin never reads one back
        text = sources()[module]
        assert "InputError" in text, f"{module} does not check what it reads of {schema}"


def test_the_plugin_only_wires() -> None:
    """plugin.py holds no hook class and reaches each feature only through its package's
    front (``OPTIONS``, ``register``, ...), never a module inside it."""
    plugin = sources()["plugin.py"]
    assert not re.search(r"^class ", plugin, re.M)
    inside = re.findall(rf"^from pytest_accel\.({'|'.join(FEATURES)})\.", plugin, re.M)
    assert inside == []


def test_a_features_stash_keys_stay_in_the_feature() -> None:
    """What one feature needs of another is asked through a hook (``hookspecs``), not
    handed over in ``config.stash``: a stash key a feature defines is used only inside it,
    and a feature reads another's facts through a function (``session_facts``)."""
    found = sources()
    leaks = []
    for name, text in found.items():
        package = name.split("/", 1)[0]
        for key in re.findall(r"^(\w+) = pytest\.StashKey", text, re.M):
            if package not in FEATURES:
                continue
            leaks += [
                (key, other)
                for other, source in found.items()
                if other.split("/", 1)[0] != package and re.search(rf"\b{key}\b", source)
            ]
    assert leaks == []


def test_each_class_name_means_one_thing_across_the_package() -> None:
    """One vocabulary: a public class name is defined once (a baseline's key history and
    a flaky history's key outcomes were both ``EnvHistory``), and each feature keeps one
    default per setting (``DEFAULT_WINDOW`` was defined twice in perf and in flaky)."""
    import ast

    where: dict[str, list[str]] = {}
    constants: dict[tuple[str, str], list[str]] = {}
    for name, text in sources().items():
        feature = name.split("/")[0] if "/" in name else ""
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("DEFAULT_"):
                        constants.setdefault((feature, target.id), []).append(name)
    assert {n: m for n, m in where.items() if len(m) > 1} == {}
    assert {k: m for k, m in constants.items() if len(m) > 1} == {}


def test_the_timing_features_layers_point_one_way() -> None:
    """perf/model (what a run and a baseline are) imports nothing above it; perf/analysis
    (judging a run) imports the model alone, never a file format or the options; the
    formats (perf/formats: reading and writing files) import the model alone, never the
    analysis (a baseline file keeps the summary the analysis derives: the caller hands
    the deriving function in) or the options.  No exception."""
    found = sources()
    upward = []
    above_model = r"pytest_accel\.perf\.(analysis|formats|options|plugin|offline|output|result)\b"
    for name, text in found.items():
        if name.startswith("perf/model/"):
            upward += [(name, m) for m in re.findall(above_model, text)]
        if name.startswith("perf/analysis/"):
            upward += [
                (name, m)
                for m in re.findall(
                    r"pytest_accel\.perf\.(formats|options|plugin|offline|output|result)\b", text
                )
            ]
        if name.startswith("perf/formats/"):
            upward += [
                (name, m)
                for m in re.findall(
                    r"pytest_accel\.perf\.(analysis|options|plugin|offline|output|result)\b", text
                )
            ]
    assert upward == []


def _defined_names(text: str) -> set[str]:
    """Every function, class, method and module-level name a module defines."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


# Words the glossary quotes that are file fields or command names, not code.
_NOT_CODE = {"env.key", "envs", "compare"}


def test_every_place_the_glossary_names_is_in_the_code() -> None:
    """A newcomer can go from a concept to its one place: each module the glossary of
    docs/architecture.md names exists, and so does each name it gives beside it."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("| term | what it is | where it lives |") :].split("\n\n")[0]
    defined = {name: _defined_names(text) for name, text in sources().items()}
    everywhere = set().union(*defined.values())
    wrong: list[str] = []
    for row in table.splitlines()[2:]:
        term, *_, where = (cell.strip() for cell in row.strip("|").split(" | "))
        named: list[str] = []  # the row's modules: its bare names are defined in one of them
        bare: list[str] = []
        for token in (quoted.split("(")[0] for quoted in re.findall(r"`([^`]+)`", where)):
            if token.startswith("--") or token in _NOT_CODE:
                continue
            if token.endswith(".py"):
                named.append(token)
                if token not in defined:
                    wrong.append(f"{term}: no module {token}")
                continue
            module, dot, name = token.rpartition(".")
            if dot and (f"{module}.py" in defined or module[:1].islower()):
                if f"{module}.py" not in defined:
                    wrong.append(f"{term}: no module {module}.py (in {token})")
                elif name not in defined[f"{module}.py"]:
                    wrong.append(f"{term}: {module}.py defines no {name}")
                named.append(f"{module}.py")
            else:
                bare.append(token)
        in_row = set().union(*(defined.get(m, set()) for m in named))
        for token in bare:
            owner, _, name = token.rpartition(".")
            found = defined["hookspecs.py"] if token.startswith("pytest_accel_") else in_row
            if name not in found or (owner and owner not in everywhere):
                wrong.append(f"{term}: {token} is not defined where the row says")
    assert wrong == []


def test_the_architecture_page_names_every_hook_and_no_other() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    specs = {n for n in _defined_names(sources()["hookspecs.py"]) if n.startswith("pytest_accel_")}
    assert set(re.findall(r"pytest_accel_[a-z_]+", doc)) == specs


def test_the_alarm_kinds_are_listed_in_one_module_and_every_output_reads_them() -> None:
    """What --perf-fail fails on was written four times (the count, the warnings, the
    annotations, the summary); a kind forgotten in one failed the run unannotated.  Now
    ``ALARM_KINDS`` is the list, ``Comparison.alarm_list`` the one reading of it, and
    an alarm of each kind reaches every output."""
    from pytest_accel.github import Location
    from pytest_accel.perf import output
    from pytest_accel.perf.model import findings
    from pytest_accel.perf.model.findings import (
        Change,
        Comparison,
        Finding,
        MemoryGrowth,
        MemoryVerdict,
        Recompiled,
        RecompileVerdict,
        TimingVerdict,
    )
    from pytest_accel.perf.model.timings import RunIdentity
    from pytest_accel.text import Tone

    defined = [
        path
        for path in SRC.rglob("*.py")
        if re.search(r"^ALARM_KINDS\s*=", path.read_text(encoding="utf-8"), re.M)
    ]
    assert defined == [SRC / "perf" / "model" / "findings.py"]
    assert set(output.ALARM_LABELS) == set(output.ALARM_TITLES) == set(findings.ALARM_KINDS)
    one_of_each = Comparison(
        "cpu/x1",
        TimingVerdict(
            regressions=[Finding("test", "t.py::a", 0.1, 0.5, 5.0, 10)],
            changes=[Change("test", "t.py::b", 0.2, 0.6, 3, RunIdentity("abc"))],
        ),
        recompiles=RecompileVerdict([Recompiled("t.py::c", 9, 0, 5)]),
        device_memory=MemoryVerdict([MemoryGrowth("t.py::d", 4 * 2**30, 2**30, 3)]),
    )
    # The most severe first, whatever its kind: 9 recompilations against none, 5x, 4x, 3x.
    assert [a.kind for a in one_of_each.alarm_list] == [
        "recompiled",
        "regression",
        "memory",
        "slowdown",
    ]
    assert one_of_each.alarms == len(findings.ALARM_KINDS)
    rows = output.terminal_rows(one_of_each, top=20)
    assert sum(row.tone is Tone.ALARM for row in rows) == len(findings.ALARM_KINDS)
    annotations = output.workflow_commands(one_of_each, lambda *_: Location("t.py", 1))
    assert len(annotations) == len(findings.ALARM_KINDS)
    table = output.summary_section(one_of_each, failing=True).rows
    assert [row.split("|")[1].strip() for row in table] == [
        "recompiled",
        "regression",
        "memory",
        "change",
    ]
    assert output.alarm_count(one_of_each) == (
        "1 regression(s) and 1 slowdown change(s) and 1 recompiling test(s)"
        " and 1 device memory growth(s)"
    )


NPU_ROW = """
from pytest_accel.hardware import platforms
from pytest_accel.hardware.detection import Detection, apply_mask


def probe_npu(ctx):
    nodes = sorted(ctx.path("/dev").glob("npu[0-9]*"))
    ctx.note(f"/dev/npu*: {len(nodes)} node(s)")
    if not nodes:
        return None
    visible = apply_mask(ctx, "NPU_VISIBLE_DEVICES", len(nodes))
    return Detection("npu", visible, "NPU v1", "dev", tuple(ctx.evidence)) if visible else None


# The probe and the row: nothing else anywhere.
platforms.PLATFORMS = (
    *platforms.PLATFORMS,
    platforms.Platform(
        "npu",
        probe=probe_npu,
        masks=("NPU_VISIBLE_DEVICES",),
        marker="npu(min_devices=1, kind=None): run only on NPUs.",
        pinning=platforms.mask_pinning("NPU_VISIBLE_DEVICES"),
    ),
)
"""

NPU_SUITE = """
import os
import pathlib

import pytest


@pytest.mark.npu
def test_on_npu(worker_id):
    pathlib.Path(f"seen-{worker_id}").write_text(os.environ.get("NPU_VISIBLE_DEVICES", "-"))


@pytest.mark.npu
def test_on_npu_too(worker_id):
    pathlib.Path(f"seen-{worker_id}").write_text(os.environ.get("NPU_VISIBLE_DEVICES", "-"))


@pytest.mark.accel("npu", min_devices=8)
def test_a_big_slice():
    pass


@pytest.mark.cpu_only
def test_on_the_cpu_tier():
    pass
"""


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_a_new_built_in_platform_is_its_probe_and_its_row(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    """Adding a platform once meant nine files in two features; now detection, the
    options, the markers, the policy that refuses to pretend and the pinning of xdist
    workers all read one table (``hardware/platforms.py``)."""
    pytester.makepyfile(npu_row=NPU_ROW, test_npu=NPU_SUITE)
    pytester.makeconftest(
        "import pytest\n@pytest.fixture\ndef worker_id(request):\n"
        "    return getattr(request.config, 'workerinput', {}).get('workerid', 'main')\n"
    )
    early = ["-p", "npu_row", "-p", "no:randomly", "-p", "no:cacheprovider"]
    # No NPU here: asking for one stops the run, with what was checked.
    missing = pytester.runpytest_subprocess(*early, "--accel=npu")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: --accel=npu: no npu device found *: 0 node(s)*"])
    for index in range(4):
        (fakesys.root / "dev" / f"npu{index}").write_text("")
    result = pytester.runpytest_subprocess(*early, "--accel=npu", "-rs")
    result.stdout.fnmatch_lines(["accel: npu x4 (NPU v1) via dev*"])
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED * requires npu x8 (detected: npu x4 (NPU v1) via dev)",
            "SKIPPED * cpu_only*",
        ]
    )
    assert (pytester.path / "seen-main").read_text() == "-"
    # Every worker runs every test (--dist each): each sees its own half.
    pinned = pytester.runpytest_subprocess(*early, "--accel=npu", "-n", "2", "--dist", "each")
    pinned.assert_outcomes(passed=4, skipped=4)
    seen = {(pytester.path / f"seen-gw{i}").read_text() for i in (0, 1)}
    assert seen == {"0,1", "2,3"}  # each worker its own half of the NPUs


def test_one_platform_table_names_the_visibility_variables() -> None:
    """Which variable masks which platform's devices is said once, in the hardware's
    platform table (and the detection and pinning beside it): no other package keeps a
    second table that could drift from it (device memory names devices through it)."""
    variables = re.compile(r'"(?:CUDA|HIP|ROCR)_VISIBLE_DEVICES"|"TPU_VISIBLE_CHIPS"')
    elsewhere = sorted(
        name
        for name, text in sources().items()
        if not name.startswith("hardware/") and variables.search(text)
    )
    assert elsewhere == []


def test_the_plugin_wires_each_feature_through_its_declared_surface() -> None:
    """Each feature package says what it offers (``__all__``, every name of it defined),
    and the plugin module reaches a feature only through those names: what a feature
    keeps to itself can change without the core noticing."""
    import ast
    import importlib

    from pytest_accel import plugin

    tree = ast.parse(Path(plugin.__file__).read_text(encoding="utf-8"))
    features = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "pytest_accel"
        for alias in node.names
    } & (FEATURES | {"report"})
    packages = {name: importlib.import_module(f"pytest_accel.{name}") for name in features}
    for name, package in packages.items():
        declared = getattr(package, "__all__", None)
        assert declared is not None, f"pytest_accel.{name} declares no __all__"
        assert [n for n in declared if not hasattr(package, n)] == [], name
    used = sorted(
        (node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in packages
        and not node.attr.startswith("__")
    )
    outside = [(f, a) for f, a in used if a not in packages[f].__all__]
    assert outside == []
    assert used  # the check looked at something


def test_the_core_owns_the_sessions_end() -> None:
    """No feature calls another's session end: the features' results for a run are
    asked for, gated and handed to the record by the core's ``session_end`` alone, and
    no feature implements a hook through which another would call it as an event."""
    asked = re.compile(
        r"\.pytest_accel_(run_columns|run_result|finish_timing)\(|\.pytest_accel_run_result\b"
    )
    askers = sorted(name for name, text in sources().items() if asked.search(text))
    assert askers == ["session_end.py"]
    assert not [name for name, text in sources().items() if "pytest_accel_record_sections" in text]
    # Each accounting feature answers with a typed result, the timing feature finishes.
    answering = sorted(
        name
        for name, text in sources().items()
        if re.search(r"def pytest_accel_run_result\(", text) and name != "hookspecs.py"
    )
    assert answering == ["cost/plugin.py", "coverage/plugin.py", "selection/plugin.py"]


def test_one_driver_runs_every_meter() -> None:
    """Each test's figures (CPU wait, compilation, device memory) are measured through
    ``perf.meters``: its driver alone implements the per-test hooks a meter needs and
    puts the figures on the report, as one attribute; each meter says its span and is
    begun and ended with the test's item (``Meter.begin(item)``, ``Meter.end(item)``)."""
    per_test = re.compile(
        r"def pytest_runtest_(call|makereport|logstart|protocol|setup|teardown)\("
    )
    drivers = sorted(
        name
        for name, text in sources().items()
        if name.startswith("perf/") and per_test.search(text)
    )
    assert drivers == ["perf/meters.py"]
    writers = sorted(
        name for name, text in sources().items() if "setattr(report, MEASURES_ATTR" in text
    )
    assert writers == ["perf/meters.py"]
    added = sorted(name for name, text in sources().items() if "add_meter(" in text)
    assert added == ["perf/compiles.py", "perf/device_memory.py", "perf/meters.py", "perf/waits.py"]
    for name in ("perf/compiles.py", "perf/device_memory.py", "perf/waits.py"):
        text = sources()[name]
        meters = len(re.findall(r'span: Span = "(?:call|test)"', text))
        assert meters, name
        for method in ("begin", "end"):
            taking_item = re.findall(rf"def {method}\(self, item: pytest\.Item\)", text)
            assert len(taking_item) == meters, (name, method)
