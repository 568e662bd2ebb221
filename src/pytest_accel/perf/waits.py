"""CPU waits: the seconds a test's call was ready to run but waited for a CPU.

On a busy runner (other jobs, xdist workers beside JAX's own threads) a test's thread is
often runnable and not running.  Linux counts that time per thread: the second field of
``/proc/<pid>/task/<tid>/schedstat``, "time spent waiting on a runqueue".  It is the
runner's, not the code's, so it is read around each call (a ``pread`` on a file kept
open: about a microsecond) and left out of the timing judged (the record's
``cpu_wait``, ``perf.model.timings.without_waits``), from the call's execution and its
compilation in proportion.  On the bundled examples beside another suite on 2 cores, the
first test's call read 1.45 s of which 0.87 s was waiting; quiet, it takes 0.44 s.

Each wait ends with the thread given a CPU, and the same file counts those arrivals
(its third field): a wait is read as at most ``MAX_WAIT_PER_ARRIVAL`` per arrival.
A newer kernel can count a whole sleep as waiting (Linux 6.12's delayed dequeue, by
all signs; not reproduced on purpose): on this project's CI (Linux 6.18, three xdist
workers on two cores) a test that slept 0.35 s read 0.35 s of waiting, twice in one
run, and was judged on 0.002 s.

Only the test's own thread is counted: work it hands to other threads (XLA's CPU thread
pool) that waits for a CPU is not, so a busy runner still slows such tests somewhat.  A
sleep, I/O or a lock is not waiting for a CPU and stays in.  Where the kernel keeps no
such figure (not Linux; a kernel without scheduler statistics) nothing is measured, the
record has no ``cpu_wait`` and nothing is left out.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from pytest_accel.perf.meters import Span, add_meter

# The longest one wait for a CPU is taken to be: on a loaded runner a thread waits a few
# milliseconds each time it is queued (6 ms at three busy threads a core, 12 ms at a
# load of 9 on two cores, here); 50 ms leaves room for more, and still tells a sleep
# counted as a wait from a real one.
MAX_WAIT_PER_ARRIVAL = 50_000_000  # ns
# A call shorter than this (wall clock, its waits included) is not read again at its
# end: what it waited is less than this, and a test is judged from 100 ms on
# (``Rule.min_duration``); the table counts it as no wait.  Most of a suite of small
# tests then pays one read a call, not two.
SHORT_CALL = 0.001  # seconds
NOTHING: Mapping[str, Any] = {}  # a call's figures where it has none; never written to


class Reading(NamedTuple):
    """A thread's run-queue clock: nanoseconds waited so far, and the arrivals on a CPU
    that ended those waits."""

    waited: int
    arrivals: int


def waited_between(before: Reading, after: Reading) -> int:
    """Nanoseconds waited between two readings, at most ``MAX_WAIT_PER_ARRIVAL`` for each
    arrival between them."""
    arrivals = after.arrivals - before.arrivals
    return min(after.waited - before.waited, arrivals * MAX_WAIT_PER_ARRIVAL)


def waited_seconds(before: bytes, after: bytes) -> float:
    """Seconds waited between two raw readings of one clock, as ``waited_between`` has
    it: where the wait's field did not move (most calls on a quiet runner), no number
    is parsed.  Each call's closing read: parsing both readings as ``Reading`` tuples
    was about 16,000 instructions of its 23,000 (docs/benchmarks.md)."""
    then, now = before.split(), after.split()
    if then[1] == now[1]:
        return 0.0
    waited = int(now[1]) - int(then[1])
    # The arrivals' bound binds only past one arrival's worth, or with none (the counts
    # only grow): otherwise they are not parsed.
    if waited > MAX_WAIT_PER_ARRIVAL or then[2] == now[2]:
        waited = min(waited, (int(now[2]) - int(then[2])) * MAX_WAIT_PER_ARRIVAL)
    return round(waited / 1e9, 6)


def parse(raw: bytes) -> Reading:
    # "<on-cpu ns> <run-queue wait ns> <timeslices>"
    fields = raw.split()
    return Reading(int(fields[1]), int(fields[2]))


class RunQueueClock:
    """How long the thread that opened it has waited for a CPU so far."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

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
            clock.read()
        except (OSError, ValueError, IndexError):  # not the format we know: no clock
            clock.close()
            return None
        return clock

    def read(self) -> Reading:
        # A call's meter reads the file raw (``os.pread``) and parses only what it needs.
        return parse(os.pread(self.fd, 128, 0))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ThreadClock:
    """The run-queue clock of the thread that asks for it: the tests' thread is the one
    that configured the session, unless a runner calls them from another (an older
    execnet ran them off the main thread), and each thread has a figure of its own."""

    def __init__(self, clock: RunQueueClock | None = None) -> None:
        self.clock = clock
        self.thread = 0 if clock is None else threading.get_native_id()

    def current(self) -> RunQueueClock | None:
        """This thread's clock, opened anew where another thread asked last."""
        thread = threading.get_native_id()
        if thread != self.thread:
            self.close()
            self.clock, self.thread = RunQueueClock.open(), thread
        return self.clock

    def close(self) -> None:
        if self.clock is not None:
            self.clock.close()
        self.clock, self.thread = None, 0


class CallWaits:
    """In the process that runs the tests: the meter (``perf.meters``) of each call's
    wait, ``cpu_wait`` on its call report.  Read as the call starts and ends, inside the
    window pytest times the call in: a wait outside it (the runner preempting the thread
    while the setup's report is shown or the call's is made) is a time slice or more on
    a busy runner, which would be taken from a call that never paid it."""

    span: Span = "call"
    read_at_end = True  # by the record's fold and the comparison alone

    def __init__(self, clock: RunQueueClock) -> None:
        self.clocks = ThreadClock(clock)
        self.start: tuple[RunQueueClock, bytes, float] | None = None

    def begin(self, item: pytest.Item) -> None:
        # Per call, so read without a method of its own: this is most of what a suite
        # of small tests pays for the clock.
        clocks = self.clocks
        clock = clocks.clock if threading.get_native_id() == clocks.thread else clocks.current()
        self.start = (
            None if clock is None else (clock, os.pread(clock.fd, 128, 0), time.perf_counter())
        )

    def end(self, item: pytest.Item) -> Mapping[str, float]:
        start = self.start
        if start is None:
            return NOTHING
        self.start = None
        clock, before, started = start
        if time.perf_counter() - started < SHORT_CALL:
            return NOTHING  # it waited less than it took: nothing worth a read, none judged
        return {"cpu_wait": waited_seconds(before, os.pread(clock.fd, 128, 0))}

    def pytest_unconfigure(self) -> None:
        self.clocks.close()


# xdist ``workeroutput``: a worker's threads' seconds on a CPU and waiting for one.
WORKEROUTPUT_THREADS = "pytest_accel_threads_wait"


def threads_clock() -> tuple[int, int] | None:
    """Nanoseconds this process's threads have run and waited for a CPU so far, summed
    over ``/proc/self/task/*/schedstat`` (under ``PYTEST_ACCEL_SYSROOT``, that tree's);
    None where the kernel keeps no such figure.  A scan of every thread: read at a
    session's start and end, never around each test."""
    root = os.environ.get("PYTEST_ACCEL_SYSROOT") or "/"
    tasks = os.path.join(root, "proc", "self", "task")
    try:
        names = os.listdir(tasks)
    except OSError:
        return None
    ran = waited = 0
    found = False
    for name in names:
        try:
            with open(os.path.join(tasks, name, "schedstat"), "rb") as handle:
                fields = handle.read().split()
            ran, waited = ran + int(fields[0]), waited + int(fields[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended as it was read
    return (ran, waited) if found else None


class ThreadsWait:
    """In the process that runs the tests: what all its threads (XLA's CPU pool, a data
    loader: those a test's own clock does not see) ran and waited for a CPU over the
    session, in seconds; a worker hands it to the controller (``WORKEROUTPUT_THREADS``)."""

    def __init__(self, config: pytest.Config, start: tuple[int, int]) -> None:
        self.config = config
        self.start = start
        self.measured: tuple[float, float] | None = None  # (ran, waited) seconds

    @pytest.hookimpl(tryfirst=True)  # before the timing feature's end reads it
    def pytest_sessionfinish(self) -> None:
        end = threads_clock()
        if end is None:
            return
        self.measured = ((end[0] - self.start[0]) / 1e9, (end[1] - self.start[1]) / 1e9)
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_THREADS] = list(self.measured)


def register(config: pytest.Config) -> ThreadsWait | None:
    """Measure waits in this process, where its kernel keeps the figure: each call's,
    and all its threads' over the session (returned)."""
    clock = RunQueueClock.open()
    if clock is not None:
        waits = CallWaits(clock)
        config.pluginmanager.register(waits, "pytest_accel:cpu_waits")  # for its unconfigure
        add_meter(config, waits)
    start = threads_clock()
    if start is None:
        return None
    threads = ThreadsWait(config, start)
    config.pluginmanager.register(threads, "pytest_accel:threads_wait")
    return threads
