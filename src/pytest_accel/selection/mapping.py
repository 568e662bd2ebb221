"""A mapping run (``--accel-map PATH`` without ``--accel-select``): what each test ran
and compiled, measured where tests run and written by the process that owns the
session.

Where tests run (serial, or each xdist worker), coverage.py measures the rootdir's
Python files with one dynamic context per test (``Coverage.switch_context``: the test's
node id from its setup to its teardown; reruns included); where pytest-cov is active its
coverage is used, not a second one (one tracer at a time), with its own contexts when
``--cov-context=test`` names them.  Only tests whose call ran are mapped: a test that
was skipped ran nothing, and has no entry (selection runs it).  At the end the lines
become blocks (``blocks``), and a worker hands its measurement to the controller through
``workeroutput``; the controller folds every process's into the map (``mapfile``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import vcs
from pytest_accel.fields import utc_timestamp
from pytest_accel.outcomes import test_id
from pytest_accel.reports import isolated, reports_are_relayed, write_section
from pytest_accel.selection.blocks import WHOLE_FILE, parse_blocks
from pytest_accel.selection.mapfile import MapRun, Program, update_map
from pytest_accel.selection.options import SelectionOptions, check_maps
from pytest_accel.selection.programs import ProgramRecorder
from pytest_accel.text import Line, Tone

WORKEROUTPUT_MAP = "pytest_accel_map"
# Never the project's own code, though under the rootdir.
OMIT = ("*/site-packages/*", "*/dist-packages/*", "*/.venv/*", "*/venv/*", "*/.tox/*", "*/.nox/*")


class Measurement:
    """Where tests run: coverage with a context per test, and their programs."""

    def __init__(self, config: pytest.Config, options: SelectionOptions) -> None:
        self.config = config
        self.root = Path(str(config.rootpath)).resolve()
        self.cov: Any = None
        self.own = self.cov_contexts = False
        self.programs = ProgramRecorder(fingerprint=options.programs == "auto")
        self.programs.start()
        self.called: set[str] = set()  # tests whose call ran
        self.found: dict[str, set[Program]] = {}
        self.current: str | None = None
        self.run: MapRun | None = None  # the measurement, once the tests have run

    # After pytest-cov's: in an xdist worker it starts its coverage here.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.cov, self.own, self.cov_contexts = self._coverage(self.config)

    def _coverage(self, config: pytest.Config) -> tuple[Any, bool, bool]:
        """pytest-cov's coverage where it measures this process, else ours, started."""
        plugin = config.pluginmanager.get_plugin("_cov")
        theirs = getattr(getattr(plugin, "cov_controller", None), "cov", None)
        if theirs is not None:
            by_test = getattr(config.option, "cov_context", None) == "test"
            return theirs, False, by_test
        import coverage

        cov = coverage.Coverage(
            data_file=None, source=[str(self.root)], omit=list(OMIT), config_file=False
        )
        # Contexts need the C or the Python tracer (sys.monitoring's records none); the C
        # one where coverage was built with it.
        cov.set_option("run:core", "ctrace" if _has_ctracer() else "pytrace")
        cov.start()
        return cov, True, False

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = test_id(nodeid)
        if self.cov is not None and not self.cov_contexts:
            self.cov.switch_context(self.current)
        self.programs.before_test()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.called.add(test_id(report.nodeid))

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        found = self.programs.after_test()
        if found:
            self.found.setdefault(test_id(nodeid), set()).update(found)
        if self.cov is not None and not self.cov_contexts:
            self.cov.switch_context("")
        self.current = None

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
        if self.own and self.cov is not None:
            self.cov.stop()
        self.programs.stop()

    def finish(self) -> MapRun:
        """The measurement as blocks per test (every mapped test, an empty set where it
        ran no measured code); worked out once."""
        if self.run is None:
            self.run = self._measured()
            self.stop()
        return self.run

    def _measured(self) -> MapRun:
        run = MapRun(None, None, utc_timestamp(time.time()))
        run.tests = {test: set() for test in self.called}
        if self.cov is None:  # the session never started: no test ran
            return run
        data = self.cov.get_data()
        for filename in data.measured_files():
            try:
                relative = Path(filename).resolve().relative_to(self.root).as_posix()
            except ValueError:
                continue  # outside the rootdir: not the project's own code
            by_test: dict[str, set[str]] = {}
            raw = _read(filename)
            if raw is None:
                continue
            blocks = parse_blocks(raw, relative)
            for line, contexts in data.contexts_by_lineno(filename).items():
                name = blocks.innermost(line)
                for context in contexts:
                    test = context.split("|", 1)[0]
                    if test in run.tests:
                        by_test.setdefault(test, set()).add(name)
            if not by_test:
                continue  # run at import alone, in no test's context
            checksums = {block.name: block.checksum for block in blocks.blocks}
            run.files[relative] = (_digest(raw), checksums)
            for test, names in by_test.items():
                run.tests[test].update((relative, n) for n in blocks.with_enclosing(names))
        self._own_files(run)
        run.programs = {t: found for t, found in self.found.items() if t in run.tests}
        return run

    def _own_files(self, run: MapRun) -> None:
        """A test whose own file coverage did not measure (pytest-cov measuring only the
        package) depends on the whole of it."""
        measured = set(run.files)
        for test, blocks in run.tests.items():
            path = test.split("::", 1)[0]
            if path in measured or not path.endswith(".py"):
                continue
            if path not in run.files:
                raw = _read(str(self.root / path))
                if raw is None:
                    continue
                whole = parse_blocks(raw, path).by_name()[WHOLE_FILE]
                run.files[path] = (_digest(raw), {WHOLE_FILE: whole.checksum})
            blocks.add((path, WHOLE_FILE))


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
            from pytest_accel.selection.changes import installed_distributions

            run = self.local.finish() if self.local is not None else MapRun(None, None, "")
            for other in self.runs:
                run.merge(other)
            run.commit, run.branch = vcs.vcs_info(os.environ, cwd=str(self.config.rootpath))
            run.started = utc_timestamp(time.time())
            run.dependencies = installed_distributions(Path(str(self.config.rootpath)).resolve())
            update_map(self.path, run)
            self.written = run

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
            lines.append(
                Line(
                    Tone.NOTE,
                    f"pytest-accel: dependency map of {len(run.tests)} test(s) written to"
                    f" {self.path} ({len(run.files)} file(s) of code, {blocks} test-block"
                    f" link(s), {programs} compiled program(s))",
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
    if not reports_are_relayed(config):  # where tests run: not an xdist controller
        local = Measurement(config, options)
        config.pluginmanager.register(local, "pytest_accel:measurement")
    if not hasattr(config, "workerinput"):
        writer = MapWriter(config, options.map, local)
        config.pluginmanager.register(writer, "pytest_accel:map_writer")
