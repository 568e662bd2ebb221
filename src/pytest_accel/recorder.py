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
    build_record,
    env_key,
    framework_versions,
    vcs_info,
    xdist_worker_id,
)
from pytest_accel.storage import write_json_atomic

# The report attribute that carries collection-tree facts from a worker to the controller.
NODE_INFO_ATTR = "pytest_accel_node"


def node_info(item: pytest.Item) -> dict[str, str | None]:
    """Class and module node ids from the collection tree (unittest classes included)."""
    cls = item.getparent(pytest.Class)
    module = item.getparent(pytest.Module)
    return {
        "class": cls.nodeid if cls is not None else None,
        "module": module.nodeid if module is not None else None,
        "worker": xdist_worker_id(),
    }


class NodeInfoReporter:
    """Runs wherever tests run (in-process or in xdist workers)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if call.when == "setup":
            setattr(report, NODE_INFO_ATTR, node_info(item))
        return report


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

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.time()
        self.started_monotonic = time.perf_counter()
        self.commit, self.branch = vcs_info(os.environ, cwd=str(self.config.rootpath))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.add(str(node.gateway.id))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.entries.get(report.nodeid)
        if entry is None:
            entry = self.entries[report.nodeid] = NodeTiming(report.nodeid)
        info = getattr(report, NODE_INFO_ATTR, None)
        if info:
            entry.class_id = info["class"]
            entry.module_id = info["module"]
            entry.worker = info["worker"]
        elif entry.worker is None and hasattr(report, "node"):
            entry.worker = str(report.node.gateway.id)  # a crash report from xdist
        entry.add(
            report.when or "???",
            report.outcome,
            report.duration,
            getattr(report, "start", 0.0),
            getattr(report, "stop", 0.0),
            wasxfail=hasattr(report, "wasxfail"),
        )

    def record(self, exitstatus: int) -> dict[str, Any]:
        run = RunInfo(
            started=self.started,
            duration=time.perf_counter() - self.started_monotonic,
            commit=self.commit,
            branch=self.branch,
            shard=None,
            workers=len(self.workers),
            exitstatus=int(exitstatus),
        )
        return build_record(
            self.entries,
            run=run,
            detection=self.detection,
            key=self.key,
            frameworks=framework_versions(),
            pytest_version=pytest.__version__,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Also runs after failures, -x and Ctrl-C: the record is partial but valid.
        try:
            write_json_atomic(self.path, self.record(session.exitstatus))
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
