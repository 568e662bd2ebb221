"""``--accel-store URL``: the session's side of the store.

In the process that owns the session only (xdist's workers send their tests to it).
While the session configures it fetches the store's newest runs of the session's
hardware key for the timing feature, which folds them into its baseline
(``pytest_accel_stored_runs``); at the end it sends the run's record as a new object.
A store that cannot be read or written changes neither the tests' outcome nor the exit
status: one line says what happened, and a record that could not be sent is kept on
local disk with the command that sends it later.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_accel.files import write_atomic
from pytest_accel.hardware.facts import session_facts
from pytest_accel.reports import (
    is_xdist_worker,
    isolated,
    kept_job_summary,
    last_line,
    summary_key,
    write_section,
)
from pytest_accel.settings import usage_error
from pytest_accel.store.history import StoredRuns, compact, newest_runs
from pytest_accel.store.layout import ANNOTATIONS, SUMMARY, RunObject, companion, stamp_of
from pytest_accel.store.location import Store, StoreError, open_store, parse_location
from pytest_accel.store.maps import NoMap, fetch_map, send_map
from pytest_accel.store.progress import EVERY, ProgressWriter
from pytest_accel.text import Line, Tone

UNSENT = "pytest-accel-unsent"  # the cache folder that keeps records not sent
DEFAULT_INDEXED = 20  # runs an index keeps where no run asked for its window


class StorePlugin:
    def __init__(
        self,
        config: pytest.Config,
        shown: str,
        store: Store | None,
        *,
        problem: str | None = None,
        host: int | None = None,
        every: float = EVERY,
    ) -> None:
        self.config = config
        self.shown = shown  # the store's URL as outputs show it
        self.store = store  # None: it could not be opened, for ``problem``
        self.problem = problem or "the store could not be opened"
        self.host = host
        self.lines: list[Line] = []
        self.sent: RunObject | None = None  # the run's record, once in the store
        self.every = every
        self.window = DEFAULT_INDEXED  # runs the key's index keeps (the timing window)
        self.progress: ProgressWriter | None = None  # the tests finished, as they finish
        self.annotations: tuple[str, ...] = ()

    def pytest_accel_stored_runs(self, key: str, count: int) -> StoredRuns | None:
        """The newest ``count`` runs of ``key``; None where the store failed (said)."""
        if self.store is None:
            self.lines.append(
                Line(Tone.FILE, f"store: {self.problem}; this run is compared with nothing")
            )
            return None
        self.window = count  # what the index keeps for this key
        try:
            return newest_runs(self.store, key, count)
        except StoreError as exc:
            self.lines.append(Line(Tone.FILE, f"store: {exc}; this run is compared with nothing"))
            return None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.store is not None:
            key = session_facts(session.config).key
            run = RunObject(key, stamp_of(time.time()), secrets.token_hex(8), self.host)
            self.progress = ProgressWriter(self.store, run, self.every)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.progress is not None:
            self.progress.report(report)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None]:
        result = yield  # every feature's session end: the record is built
        progress = self.progress
        if progress is not None:
            progress.close()  # what finished before the end is in the store, or failed
        with isolated(session, f"send the record to the store {self.shown}"):
            self._send()
        if progress is not None and self.sent is not None:
            progress.remove_sent()  # the record holds every test: no run reads these
        if self.sent is not None:
            with isolated(session, f"compact the store's index {self.shown}"):
                self._compact(self.sent.key)
        with isolated(session, f"send the dependency map to the store {self.shown}"):
            self._send_map()
        return result

    def fetch_map(self) -> None:
        """Before a selecting run reads its map: where no file is there, the map of the
        nearest commit the store holds (none: the selection keeps every test, said)."""
        wanted = self.config.hook.pytest_accel_map_to_fetch(config=self.config)
        if wanted is None or self.store is None:
            return
        try:
            found = fetch_map(self.store, "HEAD", cwd=str(self.config.rootpath))
            write_atomic(wanted, [found.data])
        except (NoMap, StoreError) as exc:
            self.lines.append(Line(Tone.FILE, f"store: {exc}; no map: every test runs"))
            return
        self.lines.append(
            Line(
                Tone.FILE,
                f"store: the map of {found.commit[:12]} ({found.behind} commit(s) before HEAD)"
                f" fetched to {wanted}",
            )
        )

    def _send_map(self) -> None:
        """After a mapping run: its map, as the map of the commit it was made at."""
        written = self.config.hook.pytest_accel_map_written(config=self.config)
        if written is None or self.store is None:
            return
        path, commit = written
        if not commit:
            self.lines.append(Line(Tone.CHANGE, f"store: {path} was made outside git: not sent"))
            return
        try:
            url = send_map(self.store, Path(path).read_bytes(), commit)
        except (OSError, StoreError) as exc:
            self.lines.append(Line(Tone.FILE, f"store: the map {path} not sent: {exc}"))
            return
        self.lines.append(
            Line(Tone.FILE, f"store: the dependency map of {commit[:12]} sent to {url}")
        )

    def _compact(self, key: str) -> None:
        """Every few runs, the key's newest runs into its index (a lost race, a store
        that fails: the next run's compaction does it; readers never depend on it)."""
        assert self.store is not None
        try:
            held = compact(self.store, key, self.window)
        except StoreError:
            return
        if held is not None:
            self.lines.append(
                Line(Tone.DETAIL, f"store: the index of {key} now holds its newest {held} run(s)")
            )

    def _send(self) -> None:
        timing = self.config.hook.pytest_accel_timing_result(config=self.config)
        if timing is None:
            return
        data = b"".join(timing.record())
        info = timing.info
        run = RunObject(timing.key, stamp_of(info.started), info.run_id or "run", self.host)
        count = len(timing.table)
        if self.store is not None:
            try:
                url = self.store.put_new(run.name, data)
            except StoreError as exc:
                problem = str(exc)
            else:
                self.sent = run
                self.annotations = timing.annotations
                self.lines.append(
                    Line(Tone.FILE, f"store: record of {count} test(s) sent to {url}")
                )
                return
        else:
            problem = self.problem
        kept = self._keep(run, data)
        self.lines.append(
            Line(
                Tone.FILE,
                f"store: {problem}; the record of {count} test(s) is kept at {kept}: send it"
                f" with 'pytest-accel store push {kept} --to {self.shown}'",
            )
        )

    def _keep(self, run: RunObject, data: bytes) -> str:
        """The record on local disk, in pytest's cache (or the system's temporary folder
        where the cache is off), under its store name."""
        cache = getattr(self.config, "cache", None)
        folder = (
            Path(cache.mkdir(UNSENT)) if cache is not None else Path(tempfile.gettempdir()) / UNSENT
        )
        target = folder / run.name.replace("/", "_")
        write_atomic(target, [data])
        return str(target)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write_section(terminalreporter, "pytest-accel store", self.lines)

    def send_companions(self, session: pytest.Session) -> None:
        """Beside the record sent, what the run showed GitHub Actions, as it showed it:
        the job summary (every feature's section, the terminal's included) and the
        alarms' workflow commands, for ``pytest-accel report --from`` on a runner the
        run's files never reach (a pod, a container)."""
        if self.store is None or self.sent is None:
            return
        summary = session.config.stash.get(summary_key, None)
        text = "" if summary is None else summary.rendered()
        try:
            self.store.put_new(companion(self.sent, SUMMARY), text.encode("utf-8"))
            body = "".join(f"{line}\n" for line in self.annotations).encode("utf-8")
            self.store.put_new(companion(self.sent, ANNOTATIONS), body)
        except StoreError as exc:
            last_line(
                session.config,
                f"pytest-accel: store: {exc}: the run's job summary and annotations were not"
                " sent beside its record",
            )


class CompanionSender:
    """The store's last step, after the job summary is complete (the outermost session
    end: registered after the plugin's own wrapper, which writes the summary file)."""

    def __init__(self, plugin: StorePlugin) -> None:
        self.plugin = plugin

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None]:
        result = yield
        with isolated(session, "send the job summary to the store"):
            self.plugin.send_companions(session)
        return result


def register_feature(config: pytest.Config, url: str, every: float) -> None:
    if is_xdist_worker(config):
        return
    try:
        location = parse_location(url)
    except ValueError as exc:
        raise usage_error(f"--accel-store: {exc}") from None
    found = session_facts(config).slice
    host = None if found is None else found.host
    try:
        plugin = StorePlugin(config, location.shown, open_store(url), host=host, every=every)
    except StoreError as exc:
        if "pip install" in str(exc):  # a backend not installed: the set-up, not the store
            raise usage_error(f"--accel-store: {exc}") from None
        plugin = StorePlugin(config, location.shown, None, problem=str(exc), host=host)
    plugin.fetch_map()  # before the selection (configured after) reads it
    kept_job_summary(config)  # kept for the runner, where no GITHUB_STEP_SUMMARY names a file
    config.pluginmanager.register(plugin, "pytest_accel:store")
    config.pluginmanager.register(CompanionSender(plugin), "pytest_accel:store_companions")
