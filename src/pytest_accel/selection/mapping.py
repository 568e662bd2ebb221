"""A mapping run (``--accel-map PATH`` without ``--accel-select``): what each test
depends on, measured where tests run and written by the process that owns the session.

Where tests run (serial, or each xdist worker), coverage.py measures the rootdir's
Python files with one dynamic context per unit (``observe.Units``): each test (its
setup to its teardown, reruns included), each test file's collection, each fixture's
setup, each project module's import.  Coverage starts before the initial conftests
load (``start_early``), so what they import is measured too.  Where pytest-cov is
active its coverage is used, not a second one (one tracer at a time), with its own
contexts when ``--cov-context=test`` names them.  Only tests whose call ran and did not
skip itself are mapped: a test that was skipped ran nothing (or only the start of what
it runs elsewhere), and has no entry (selection runs it).  A test that did not pass is
mapped as such (``NOT_PASSED``): selection keeps it until a mapping run sees it pass.

At the end the lines become blocks (``blocks``), and each test depends on:

- the blocks it ran, and the functions of the project's caches that answered it;
- its file's collection unit: what collecting the file ran, and the ``<import>`` block
  (with what running it ran) of every project module the file, its conftests and
  what they import reach, by import statements and by what was seen imported;
- the setup and teardown of every fixture it uses, whatever the fixture's scope, those
  it asked for as it ran (``request.getfixturevalue``) included;
- what the imports it made itself ran (a lazy ``importlib.import_module``);
- what the session ran outside every other unit (a project plugin's hooks, the
  modules it imported before anything could be measured);
- the files it, its fixtures, its file's collection and those imports read, by hash;
- the environment variables the project's code read for it (names, a digest of the
  value); whether it started a subprocess.

A worker hands its measurement to the controller through ``workeroutput``; the
controller folds every process's into the map (``mapfile``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import os
import sys
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import vcs
from pytest_accel.fields import utc_timestamp
from pytest_accel.outcomes import test_id
from pytest_accel.reports import isolated, reports_are_relayed, write_section
from pytest_accel.selection.blocks import IMPORT, WHOLE_FILE, FileBlocks, parse_blocks
from pytest_accel.selection.changes import file_hash, installed_distributions
from pytest_accel.selection.mapfile import NOT_PASSED, MapRun, Program, update_map
from pytest_accel.selection.observe import (
    SESSION,
    ImportLabeller,
    ProjectFiles,
    Seen,
    Units,
    cached_functions,
    is_conftest,
    observe,
    static_imports,
)
from pytest_accel.selection.options import SelectionOptions, check_maps, option
from pytest_accel.selection.programs import ProgramRecorder
from pytest_accel.settings import early_setting
from pytest_accel.text import Line, Tone

WORKEROUTPUT_MAP = "pytest_accel_map"
# Never the project's own code, though under the rootdir.
OMIT = ("*/site-packages/*", "*/dist-packages/*", "*/.venv/*", "*/venv/*", "*/.tox/*", "*/.nox/*")
COLLECT, IMPORTING, FIXTURE = "collect:", "import:", "fixture:"


class Observer:
    """Coverage.py, the units and the import labeller: started as early as the run
    allows (``start_early``), else at the session's start."""

    def __init__(self, root: Path, own: Iterable[str]) -> None:
        self.root = root
        self.files = ProjectFiles(root, OMIT, tuple(own))
        self.units = Units(self.files, None)
        self.labeller = ImportLabeller(self.units)
        self.cov: Any = None
        self.own = self.cov_contexts = False

    def start(self, cov: Any, *, own: bool, contexts: bool) -> None:
        self.cov, self.own, self.cov_contexts = cov, own, contexts
        # Imported before measuring could start (a plugin named by ``-p``, the
        # project's own entry point): by the session itself, so every test's.
        self.units.of(SESSION).imported.update(
            relative
            for module in _project_modules(self.files)
            if (relative := self.files.relative(str(module.__file__))) is not None
            and relative.endswith(".py")
            and not is_conftest(relative)
        )
        if not contexts:  # pytest-cov's test contexts: ours would overwrite them
            self.units.switch = cov.switch_context
        self.labeller.install()
        observe(self.units)

    def stop(self) -> None:
        observe(None)
        self.labeller.remove()
        self.units.switch = None
        if self.own and self.cov is not None:
            self.cov.stop()


def _own_coverage(root: Path) -> Any:
    import coverage

    cov = coverage.Coverage(data_file=None, source=[str(root)], omit=list(OMIT), config_file=False)
    # Contexts need the C or the Python tracer (sys.monitoring's records none); the C
    # one where coverage was built with it.
    cov.set_option("run:core", "ctrace" if _has_ctracer() else "pytrace")
    cov.start()
    return cov


EARLY = pytest.StashKey["Observer"]()


def start_early(early_config: pytest.Config) -> None:
    """A mapping run measures from before the initial conftests load: a package the
    rootdir's conftest imports runs its import-time code here.  Not where pytest-cov
    measures (it starts its own), nor where nothing will run."""
    known = early_config.known_args_namespace
    if not early_setting(early_config, option("--accel-map")):
        return
    if (early_setting(early_config, option("--accel-select")) or "off").lower() != "off":
        return
    if getattr(known, "collectonly", False) or getattr(known, "cov_source", None):
        return
    controller = getattr(known, "numprocesses", None) or getattr(known, "dist", "no") not in (
        "no",
        None,
    )
    if controller and not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist controller: its workers measure
    root = Path(str(early_config.rootpath)).resolve()
    observer = Observer(root, ())
    observer.start(_own_coverage(root), own=True, contexts=False)
    early_config.stash[EARLY] = observer
    early_config.add_cleanup(observer.stop)


class Measurement:
    """Where tests run: coverage with a context per unit, what else each unit did, and
    the programs each test compiled."""

    def __init__(self, config: pytest.Config, options: SelectionOptions) -> None:
        self.config = config
        self.root = Path(str(config.rootpath)).resolve()
        early = config.stash.get(EARLY, None)
        self.observer = early if early is not None else Observer(self.root, ())
        self.observer.files.own = frozenset(_relative_paths(self.root, [options.map or ""]))
        self.units = self.observer.units
        self.programs = ProgramRecorder(fingerprint=options.programs == "auto")
        self.programs.start()
        self.called: set[str] = set()  # tests whose call ran
        self.failed: set[str] = set()  # tests a report of which failed
        self.found: dict[str, set[Program]] = {}
        self.items: dict[str, tuple[str, tuple[str, ...], bool]] = {}  # file, fixtures, doctest
        self.caches: list[tuple[Any, str]] = []
        self.cache_modules = 0
        self.hits: list[int] = []
        self.run: MapRun | None = None  # the measurement, once the tests have run

    @property
    def cov(self) -> Any:
        return self.observer.cov

    # After pytest-cov's: in an xdist worker it starts its coverage here.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.observer.cov is not None:
            return  # started before the conftests loaded
        plugin = self.config.pluginmanager.get_plugin("_cov")
        theirs = getattr(getattr(plugin, "cov_controller", None), "cov", None)
        if theirs is not None:
            by_test = getattr(self.config.option, "cov_context", None) == "test"
            self.observer.start(theirs, own=False, contexts=by_test)
        else:
            self.observer.start(_own_coverage(self.root), own=True, contexts=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        """A test file's collection (its import, parametrize, generated tests) runs as
        its own unit, its classes' too (pytest collects them after the file, where
        ``pytest_generate_tests`` runs for their methods)."""
        if not isinstance(collector, (pytest.File, pytest.Class)):
            return (yield)
        relative = self.observer.files.relative(str(collector.path))
        if relative is None:
            return (yield)
        with self.units.running(COLLECT + relative):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Generator[None, Any, Any]:
        """A fixture's setup and its teardown (the code after its ``yield``, the
        finalizers it added) run as its unit: the teardown of a module's fixture runs
        in whichever test ends the module, often one that does not use it.  pytest runs
        a fixture's finalizers last-added first, so these two bracket its own."""
        unit = FIXTURE + _fixture_id(fixturedef)
        fixturedef.addfinalizer(functools.partial(self.units.leave_unit, unit))
        with self.units.running(unit):
            result = yield
        fixturedef.addfinalizer(functools.partial(self.units.enter, unit))
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            relative = self.observer.files.relative(str(item.path)) or ""
            info = getattr(item, "_fixtureinfo", None)
            definitions = getattr(info, "name2fixturedefs", {}) or {}
            fixtures = tuple(
                FIXTURE + _fixture_id(fixturedef)
                for name in getattr(item, "fixturenames", ())
                for fixturedef in definitions.get(name, ())
            )
            doctest = type(item).__name__ == "DoctestItem"
            self.items[test_id(item.nodeid)] = (relative, fixtures, doctest)

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """The fixtures the test asked for as it ran (``request.getfixturevalue``),
        beside those its signature names: pytest's request keeps every one it gave."""
        request = getattr(item, "_request", None)
        given = getattr(request, "_fixture_defs", None)
        test = test_id(item.nodeid)
        if not isinstance(given, dict) or test not in self.items:
            return
        file, fixtures, doctest = self.items[test]
        more = tuple(
            unit
            for unit in (FIXTURE + _fixture_id(f) for f in given.values())
            if unit not in fixtures
        )
        if more:
            self.items[test] = (file, fixtures + more, doctest)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.units.enter(test_id(nodeid))
        self._cache_snapshot()
        self.programs.before_test()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A call that skipped itself (``pytest.skip`` when no GPU is there,
        # ``importorskip``, an expected failure) ran part of what it runs elsewhere:
        # not mapped, so selection keeps it.
        if report.when == "call" and not report.skipped:
            self.called.add(test_id(report.nodeid))
        if report.failed:  # its call, or an error in its setup or teardown
            self.failed.add(test_id(report.nodeid))

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        test = test_id(nodeid)
        found = self.programs.after_test()
        if found:
            self.found.setdefault(test, set()).update(found)
        self._cache_hits(test)
        while self.units.current is not None and self.units.current != test:
            self.units.leave()  # a unit left open by an error: closed with its test
        self.units.leave()

    def _cache_snapshot(self) -> None:
        """The project's cached functions (looked for again when modules were added),
        and how often each answered so far."""
        if len(sys.modules) != self.cache_modules:
            self.cache_modules = len(sys.modules)
            self.caches = [
                (wrapper, filename)
                for wrapper, filename in cached_functions(_project_modules(self.observer.files))
                if self.observer.files.relative(filename) is not None
            ]
        self.hits = [_hits(wrapper) for wrapper, _ in self.caches]

    def _cache_hits(self, test: str) -> None:
        for (wrapper, filename), before in zip(self.caches, self.hits, strict=False):
            if _hits(wrapper) > before:
                line = wrapper.__wrapped__.__code__.co_firstlineno
                relative = self.observer.files.relative(filename)
                if relative is not None:
                    self.units.of(test).cached.add((relative, line))

    # The innermost wrapper: the measurement is read as the last test ends, before
    # pytest-cov's own wrapper stops its coverage, saves and combines it.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, None, object]:
        try:
            return (yield)
        finally:
            self.finish()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller writes the map
            workeroutput[WORKEROUTPUT_MAP] = self.finish().to_wire()

    def pytest_unconfigure(self) -> None:
        self.stop()

    def stop(self) -> None:
        self.observer.stop()
        self.programs.stop()

    def finish(self) -> MapRun:
        """The measurement as blocks per test (every mapped test, an empty set where it
        ran no measured code); worked out once."""
        if self.run is None:
            self.observer.units.switch = None  # no more contexts: the tests are over
            observe(None)
            self.run = Dependencies(self).measured()
            self.stop()
        return self.run


def _fixture_id(fixturedef: Any) -> str:
    """A fixture definition's name: where it is defined (pytest's ``baseid``: a test
    file, a directory's conftest, "" for the rootdir's and plugins') and its name."""
    return f"{getattr(fixturedef, 'baseid', '')}::{getattr(fixturedef, 'argname', '?')}"


def _hits(wrapper: Any) -> int:
    try:
        return int(wrapper.cache_info().hits)
    except Exception:  # a cache that no longer answers: nothing counted
        return 0


def _project_modules(files: ProjectFiles) -> list[Any]:
    return [
        module
        for module in list(sys.modules.values())
        if isinstance(getattr(module, "__file__", None), str)
        and files.relative(str(module.__file__)) is not None
    ]


def _relative_paths(root: Path, paths: Iterable[str]) -> list[str]:
    found = []
    for path in paths:
        if path:
            with contextlib.suppress(ValueError):
                target = Path(path).resolve()
                found += [
                    target.relative_to(root).as_posix(),
                    target.with_name(f".{target.name}.lock").relative_to(root).as_posix(),
                ]
    return found


class Dependencies:
    """A mapping run's measurement made into each test's dependencies."""

    def __init__(self, measurement: Measurement) -> None:
        self.m = measurement
        self.root = measurement.root
        self.files = measurement.observer.files
        self.seen = measurement.units.seen
        self.parsed: dict[str, tuple[bytes, FileBlocks, ast.AST | None] | None] = {}
        self.hashes: dict[str, str | None] = {}  # files read, by content
        # Imported but not measured: outside pytest-cov's ``--cov`` sources, so what
        # its functions ran is not known and a test that reaches it depends on all of it.
        self.unmeasured: set[str] = set()
        self.measured_files: set[str] = set()
        self.run = MapRun(None, None, utc_timestamp(time.time()))

    def source(self, relative: str) -> tuple[bytes, FileBlocks, ast.AST | None] | None:
        if relative not in self.parsed:
            raw = _read(str(self.root / relative))
            if raw is None:
                self.parsed[relative] = None
            else:
                try:
                    tree: ast.AST | None = ast.parse(raw, relative)
                except (SyntaxError, ValueError):
                    tree = None
                self.parsed[relative] = (raw, parse_blocks(raw, relative), tree)
        return self.parsed[relative]

    def keep_file(self, relative: str) -> bool:
        """The file's blocks go into the map (its checksums recorded)."""
        found = self.source(relative)
        if found is None:
            return False
        if relative not in self.run.files:
            raw, blocks, _ = found
            self.run.files[relative] = (
                _digest(raw),
                {block.name: block.checksum for block in blocks.blocks},
            )
        return True

    def measured(self) -> MapRun:
        run = self.run
        run.tests = {test: set() for test in self.m.called}
        by_unit = self._lines()
        graph = self._imports()
        self.unmeasured = set(graph) - self.measured_files
        imports_of: dict[str, list[str]] = {}  # a test file's collection: the imports it runs
        session = by_unit.get(SESSION, set()) | self._imported_by(SESSION, by_unit, graph)
        if session:
            run.units[SESSION] = session
        for test in run.tests:
            file, fixtures, doctest = self.m.items.get(test, (test.split("::", 1)[0], (), False))
            units = [test, *fixtures, SESSION]
            collect = COLLECT + file
            if file and file not in imports_of:
                reached = sorted(self._reached(file, graph))
                imports_of[file] = [IMPORTING + module for module in reached]
                run.units[collect] = by_unit.get(collect, set()) | self._imports_run(
                    reached, by_unit
                )
            if file:
                units += [*imports_of[file], collect]
            run.test_units[test] = {
                u for u in units[1:] if u.startswith((COLLECT, FIXTURE)) or u in run.units
            }
            for fixture in fixtures:
                imported = self._imported_by(fixture, by_unit, graph)
                if fixture in by_unit or imported:
                    run.units[fixture] = by_unit.get(fixture, set()) | imported
            run.tests[test] |= by_unit.get(test, set()) | self._imported_by(test, by_unit, graph)
            self._cached(test)
            self._others(test, units)
            if doctest and file.endswith(".py") and self.keep_file(file):
                run.tests[test].add((file, WHOLE_FILE))
        self._own_files(run)
        run.programs = {t: found for t, found in self.m.found.items() if t in run.tests}
        run.evidence = {t: NOT_PASSED for t in self.m.failed if t in run.tests}
        return run

    def _lines(self) -> dict[str, set[tuple[str, str]]]:
        """Every unit's blocks, from the lines coverage measured in its context."""
        found: dict[str, set[tuple[str, str]]] = {}
        cov = self.m.cov
        if cov is None:  # the session never started: no test ran
            return found
        data = cov.get_data()
        for filename in data.measured_files():
            relative = self.files.relative(filename)
            if relative is None or self.source(relative) is None:
                continue
            self.measured_files.add(relative)
            _, blocks, _ = self.source(relative)  # type: ignore[misc]
            by_name = blocks.by_name()
            by_unit: dict[str, set[str]] = {}
            for line, contexts in data.contexts_by_lineno(filename).items():
                for context in contexts:
                    # Coverage's default context is the session's own (SESSION).
                    unit = context.split("|", 1)[0] or SESSION
                    if unit.startswith((IMPORTING, COLLECT)):
                        names: Iterable[str] = blocks.at_import(line, by_name)
                    else:
                        names = (blocks.innermost(line),)
                    by_unit.setdefault(unit, set()).update(names)
            if not by_unit:
                continue
            self.keep_file(relative)
            for unit, names in by_unit.items():
                kept = (
                    names if unit.startswith((IMPORTING, COLLECT)) else blocks.with_enclosing(names)
                )
                found.setdefault(unit, set()).update((relative, n) for n in kept)
        return found

    def _imports(self) -> dict[str, set[str]]:
        """The project's import graph: each file to the project files it imports (by
        its import statements, and as seen), each module to its package."""
        by_name: dict[str, str] = {}
        packages: dict[str, bool] = {}
        for module in _project_modules(self.files):
            relative = self.files.relative(str(module.__file__))
            if relative is not None and relative.endswith(".py"):
                by_name[module.__name__] = relative
                packages[relative] = relative.endswith("__init__.py")
        names_of: dict[str, str] = {}
        for name, relative in by_name.items():
            names_of.setdefault(relative, name)
        graph: dict[str, set[str]] = {}
        for relative, name in names_of.items():
            found = self.source(relative)
            edges = graph.setdefault(relative, set())
            if found is not None and found[2] is not None:
                edges.update(
                    by_name[target]
                    for target in static_imports(found[2], name, packages[relative])
                    if target in by_name
                )
            parent = name.rpartition(".")[0]
            if parent in by_name:
                edges.add(by_name[parent])
        for unit, seen in self.seen.items():
            if unit.startswith((IMPORTING, COLLECT)):
                graph.setdefault(unit.split(":", 1)[1], set()).update(seen.imported)
        return graph

    def _imported_by(
        self, unit: str, by_unit: dict[str, set[tuple[str, str]]], graph: dict[str, set[str]]
    ) -> set[tuple[str, str]]:
        """What the imports that ``unit`` made itself ran, and those they reach: a test's
        or a fixture's lazy ``importlib.import_module``, a package's ``__getattr__``; the
        session's plugins named by ``-p``."""
        imported = self.seen.get(unit, _NOTHING).imported
        return self._imports_run(_closure(imported, graph), by_unit) if imported else set()

    def _imports_run(
        self, modules: Iterable[str], by_unit: dict[str, set[tuple[str, str]]]
    ) -> set[tuple[str, str]]:
        blocks: set[tuple[str, str]] = set()
        for module in modules:
            blocks |= self._import_of(module) | by_unit.get(IMPORTING + module, set())
        return blocks

    def _import_of(self, module: str) -> set[tuple[str, str]]:
        """What importing ``module`` runs, as a block: its ``<import>``, or all of it
        where coverage did not measure it."""
        if not self.keep_file(module):
            return set()
        if module in self.unmeasured:
            return {(module, IMPORT), (module, WHOLE_FILE)}
        return {(module, IMPORT)}

    def _reached(self, test_file: str, graph: dict[str, set[str]]) -> set[str]:
        """The project files a test file, its conftests and what it was seen to import
        reach: each runs at its import."""
        starts = {test_file, *self.seen.get(COLLECT + test_file, _NOTHING).imported}
        folder = Path(test_file).parent
        while True:
            conftest = (folder / "conftest.py").as_posix()
            if (self.root / conftest).is_file():
                starts.add(conftest)
            if folder == folder.parent or str(folder) in ("", "."):
                break
            folder = folder.parent
        return _closure(starts, graph)

    def _cached(self, test: str) -> None:
        for relative, line in self.seen.get(test, _NOTHING).cached:
            found = self.source(relative)
            if found is not None and self.keep_file(relative):
                names = found[1].with_enclosing([found[1].innermost(line)])
                self.run.tests[test].update((relative, n) for n in names)

    def _others(self, test: str, units: Iterable[str]) -> None:
        """The files, variables and processes of the test and of the units it uses."""
        reads: set[str] = set()
        env: dict[str, str] = {}
        for unit in units:
            seen = self.seen.get(unit)
            if seen is None:
                continue
            reads |= seen.read
            for name, value in seen.env.items():
                env.setdefault(name, value)
            # A process the test or a fixture started may run the project's code; one
            # started while a module was imported (versioneer asking git for the
            # version) is every importer's, and runs none of it.
            if seen.subprocess and not unit.startswith((IMPORTING, COLLECT)):
                self.run.subprocess.add(test)
        file = test.split("::", 1)[0]
        if not file.endswith(".py"):
            reads.add(file)  # a text file's doctests: the file is the test
        hashes = {}
        for path in sorted(reads - self.m.units.written):
            if path not in self.hashes:  # a file every test of a module read: hashed once
                self.hashes[path] = file_hash(self.root / path)
            content = self.hashes[path]
            if content is not None:
                hashes[path] = content
        if hashes:
            self.run.reads[test] = hashes
        if env:
            self.run.env[test] = env

    def _own_files(self, run: MapRun) -> None:
        """A test whose own file coverage did not measure (pytest-cov measuring only the
        package) depends on the whole of it."""
        measured = {path for blocks in run.tests.values() for path, _ in blocks}
        for test, blocks in run.tests.items():
            path = test.split("::", 1)[0]
            if path in measured or not path.endswith(".py"):
                continue
            if self.keep_file(path):
                blocks.add((path, WHOLE_FILE))


_NOTHING = Seen()


def _closure(starts: Iterable[str], graph: dict[str, set[str]]) -> set[str]:
    """The project files ``starts`` reach through ``graph``, themselves included."""
    reached: set[str] = set()
    todo = [s for s in starts if s.endswith(".py")]
    while todo:
        current = todo.pop()
        if current in reached:
            continue
        reached.add(current)
        todo.extend(graph.get(current, set()) - reached)
    return reached


def _has_ctracer() -> bool:
    try:
        from coverage import tracer
    except ImportError:
        return False
    return hasattr(tracer, "CTracer")


def _read(filename: str) -> bytes | None:
    try:
        with open(filename, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _digest(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


class MapWriter:
    """The process that owns the session: every process's measurement into the map."""

    def __init__(self, config: pytest.Config, path: str, local: Measurement | None) -> None:
        self.config = config
        self.path = path
        self.local = local
        self.runs: list[MapRun] = []
        self.written: MapRun | None = None
        self.interrupted = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        found = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_MAP)
        if found:
            self.runs.append(MapRun.from_wire(found))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self.interrupted = True  # a part of the suite: the map keeps what it had
            if self.local is not None:
                self.local.stop()
            return
        with isolated(session, f"write the dependency map {self.path}"):
            run = self.local.finish() if self.local is not None else MapRun(None, None, "")
            for other in self.runs:
                run.merge(other)
            run.commit, run.branch = vcs.vcs_info(os.environ, cwd=str(self.config.rootpath))
            run.started = utc_timestamp(time.time())
            run.dependencies = installed_distributions(Path(str(self.config.rootpath)).resolve())
            update_map(self.path, run)
            self.written = run

    def pytest_accel_map_written(self) -> tuple[str, str | None] | None:
        return None if self.written is None else (self.path, self.written.commit)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = []
        if self.interrupted:
            lines.append(
                Line(Tone.CHANGE, f"map: not updated: the run was interrupted ({self.path})")
            )
        elif self.written is not None:
            run = self.written
            blocks = sum(len(b) for b in run.tests.values())
            programs = sum(len(p) for p in run.programs.values())
            read = len({path for reads in run.reads.values() for path in reads})
            lines.append(
                Line(
                    Tone.FILE,
                    f"pytest-accel: dependency map of {len(run.tests)} test(s) written to"
                    f" {self.path} ({len(run.files)} file(s) of code, {blocks} test-block"
                    f" link(s), {len(run.units)} shared unit(s), {read} file(s) read,"
                    f" {programs} compiled program(s))",
                )
            )
        problem = self.local.programs.problem if self.local else None
        if problem:
            lines.append(Line(Tone.CHANGE, f"map: {problem}"))
        write_section(terminalreporter, "pytest-accel selection", lines)


def register_mapping(config: pytest.Config, options: SelectionOptions) -> None:
    """A mapping run: measure where tests run, write where the session is owned."""
    assert options.map is not None
    check_maps(options)  # a map that is there must be one this release reads and updates
    local = None
    early = config.stash.get(EARLY, None)
    if reports_are_relayed(config) and early is not None:
        early.stop()  # a controller after all: its workers measure
        del config.stash[EARLY]
    if not reports_are_relayed(config):  # where tests run: not an xdist controller
        local = Measurement(config, options)
        config.pluginmanager.register(local, "pytest_accel:measurement")
    if not hasattr(config, "workerinput"):
        writer = MapWriter(config, options.map, local)
        config.pluginmanager.register(writer, "pytest_accel:map_writer")
