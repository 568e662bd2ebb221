"""CPU waits: the seconds a test's call was ready to run but waited for a CPU.

On a busy runner (other jobs, xdist workers beside JAX's own threads) a test's thread is
often runnable and not running.  Linux counts that time per thread: the second field of
``/proc/<pid>/task/<tid>/schedstat``, "time spent waiting on a runqueue".  It is the
runner's, not the code's, so it is read around each call (a ``pread`` on a file kept
open: about a microsecond) and left out of the timing judged (the record's
``cpu_wait``, ``perf.model.timings.without_waits``), from the call's execution and its
compilation in proportion.  On the bundled examples beside another suite on 2 cores, the
first test's call read 1.45 s of which 0.87 s was waiting; quiet, it takes 0.44 s.

Only the test's own thread is counted: work it hands to other threads (XLA's CPU thread
pool) that waits for a CPU is not, so a busy runner still slows such tests somewhat.  A
sleep, I/O or a lock is not waiting for a CPU and stays in.  Where the kernel keeps no
such figure (not Linux; a kernel without scheduler statistics) nothing is measured, the
record has no ``cpu_wait`` and nothing is left out.
"""

from __future__ import annotations

import os
import threading

import pytest

from pytest_accel.outcomes import CALL_WAIT_ATTR, is_subtest


class RunQueueClock:
    """The nanoseconds the thread that opened it has waited for a CPU so far."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls) -> RunQueueClock | None:
        """This thread's clock, or None where the kernel does not keep one.  Under
        ``PYTEST_ACCEL_SYSROOT`` (the fake trees detection reads), that tree's
        ``proc/thread-self/schedstat``."""
        root = os.environ.get("PYTEST_ACCEL_SYSROOT") or "/"
        paths = [os.path.join(root, "proc", "thread-self", "schedstat")]
        if root == "/":  # a kernel older than 3.17 has no thread-self
            paths.append(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat")
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
                break
            except OSError:
                continue
        else:
            return None
        clock = cls(fd)
        try:
            clock.waited()
        except (OSError, ValueError, IndexError):  # not the format we know: no clock
            clock.close()
            return None
        return clock

    def waited(self) -> int:
        # "<on-cpu ns> <run-queue wait ns> <timeslices>": read afresh at offset 0.
        return int(os.pread(self._fd, 128, 0).split()[1])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CallWaits:
    """In the process that runs the tests: each call's wait, on its call report
    (``CALL_WAIT_ATTR``, which crosses xdist's channel as a float)."""

    def __init__(self, clock: RunQueueClock) -> None:
        self.clock: RunQueueClock | None = clock
        self.thread = threading.get_native_id()
        self.before: tuple[str, int] | None = None  # (test, ns waited) at its setup's end

    def _clock(self) -> RunQueueClock | None:
        """The clock of the thread that runs the tests: the one that opened it, unless a
        runner calls tests from another (an older execnet ran them off the main thread)."""
        thread = threading.get_native_id()
        if thread != self.thread:
            if self.clock is not None:
                self.clock.close()
            self.clock, self.thread = RunQueueClock.open(), thread
        return self.clock

    @pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends the report on
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Read at the end of the setup and of the call: one plain hook, not wrappers
        around the call and its report (a per-test cost on every suite).  What lies
        between besides the call (the setup's report shown, the call's made) is
        microseconds, and only its waiting would count."""
        when = report.when
        if when == "setup":
            clock = self._clock()
            self.before = (report.nodeid, clock.waited()) if clock is not None else None
        elif when == "call" and self.before is not None and self.before[0] == report.nodeid:
            clock = self._clock()
            if clock is not None and not is_subtest(report):
                waited = clock.waited() - self.before[1]
                setattr(report, CALL_WAIT_ATTR, round(waited / 1e9, 6))

    def pytest_unconfigure(self) -> None:
        if self.clock is not None:
            self.clock.close()


def register(config: pytest.Config) -> None:
    """Measure waits in this process, where its kernel keeps the figure."""
    clock = RunQueueClock.open()
    if clock is not None:
        config.pluginmanager.register(CallWaits(clock), "pytest_accel:cpu_waits")
