"""The ``--perf-record`` feature: collect durations from reports, write the record at the end.

Registered in ``pytest_configure`` only when the option is on.  Under pytest-xdist the
workers attach each test's class, module and worker id to its setup report (reports
are what xdist sends to the controller); only the controller writes the file.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.detection import Detection
from pytest_accel.records import (
    NodeTiming,
    RunInfo,
    encode_record,
    env_key,
    framework_versions,
    record_head,
    vcs_info,
    xdist_worker_id,
)
from pytest_accel.storage import write_atomic

# The report attribute that carries collection-tree facts from a worker to the controller.
NODE_INFO_ATTR = "pytest_accel_node"


# (class node id, module node id, xdist worker): a tuple of strings, which costs the
# garbage collector nothing and crosses xdist's channel as it is.
NodeInfo = tuple[str | None, str | None, str | None]


def collect_node_info(items: list[pytest.Item], worker: str | None) -> dict[str, NodeInfo]:
    """Class and module node ids from the collection tree (unittest classes included).

    Done once per collected item, with one lookup per parent, instead of in a hook that
    runs for every phase of every test.
    """
    by_parent: dict[int, NodeInfo] = {}
    result: dict[str, NodeInfo] = {}
    for item in items:
        info = by_parent.get(id(item.parent))
        if info is None:
            cls = item.getparent(pytest.Class)
            module = item.getparent(pytest.Module)
            info = (
                cls.nodeid if cls is not None else None,
                module.nodeid if module is not None else None,
                worker,
            )
            by_parent[id(item.parent)] = info
        result[item.nodeid] = info
    return result


class NodeInfoSender:
    """In an xdist worker: attach each test's node info to its setup report."""

    def __init__(self) -> None:
        self.info: dict[str, NodeInfo] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.info = collect_node_info(items, xdist_worker_id())

    @pytest.hookimpl(tryfirst=True)  # before xdist serialises the report for the controller
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            setattr(report, NODE_INFO_ATTR, self.info.get(report.nodeid))


class PerfRecorder:
    """Runs in the process that owns the session; writes the record when it ends."""

    def __init__(
        self, config: pytest.Config, path: Path, detection: Detection, key: str | None
    ) -> None:
        self.config = config
        self.path = path
        self.detection = detection
        self.key = env_key(detection, key)
        self.entries: dict[str, NodeTiming] = {}
        self.workers: set[str] = set()
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit: str | None = None
        self.branch: str | None = None
        self.write_error: str | None = None
        # Filled at collection when this process runs the tests itself (no xdist).
        self.node_info: dict[str, NodeInfo] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.add(str(node.gateway.id))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.node_info = collect_node_info(items, None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        entry = self.entries.get(nodeid)
        if entry is None:
            entry = self.entries[nodeid] = NodeTiming(nodeid)
            if nodeid in self.node_info:  # collected in this process
                entry.class_id, entry.module_id, entry.worker = self.node_info[nodeid]
        if entry.worker is None and hasattr(report, "node"):
            # Relayed by xdist: a setup report carries the node info, a crash report does not.
            info = getattr(report, NODE_INFO_ATTR, None)
            if info:
                entry.class_id, entry.module_id, entry.worker = info
            else:
                entry.worker = str(report.node.gateway.id)
        entry.add(
            report.when or "???",
            report.outcome,
            report.duration,
            getattr(report, "start", 0.0),
            getattr(report, "stop", 0.0),
            wasxfail=hasattr(report, "wasxfail"),
        )

    def record_head(self, exitstatus: int) -> dict[str, Any]:
        run = RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=self.commit,
            branch=self.branch,
            shard=None,
            workers=len(self.workers),
            exitstatus=int(exitstatus),
        )
        return record_head(run, self.detection, self.key, framework_versions(), pytest.__version__)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Also runs after failures, -x and Ctrl-C: the record is partial but valid.
        try:
            write_atomic(
                self.path, encode_record(self.entries, self.record_head(session.exitstatus))
            )
        except OSError as exc:
            self.write_error = f"{self.path}: {exc.strerror or exc}"
            sys.stderr.write(
                f"pytest-accel: could not write the timing record {self.write_error}\n"
            )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.write_error is None:
            terminalreporter.write_line(
                f"pytest-accel: timing record of {len(self.entries)} test(s) written to {self.path}"
            )
