"""Full garbage collections, timed per test.

A full (generation 2) collection walks every object the process holds: with JAX and a
few hundred tests loaded it takes about 0.1 s.  When one runs depends on everything the
process allocated before, so which test pays for it moves whenever anything changes
(another test, a library, this plugin's own data): on chex's suite one such pause made
an unchanged 0.07 s test read 0.17 s, run after run.  The pause is the process's, not
the test's, so it is measured (``gc.callbacks``) and left out of the timing judged:
one that starts in a call is kept apart (the record's ``gc``), one that starts in a
setup or teardown is taken out of that phase's seconds (on a 10,000-test run, the full
collections of a teardown made a module of 0.014 s read 0.13 s).
Collections of the younger generations are short and track what the test allocates:
they stay in.

Only the collections of the thread that runs the tests are timed.  Another thread's
(xdist's channel, a thread the test started) holds the tests' thread up only while it
needs the interpreter; during a sleep, a device wait or a compile outside the
interpreter it did not, and taking it out made a test that slept 0.5 s read 0.29 s.
One that did hold a test up stays in that test's time, as before this module existed.
"""

from __future__ import annotations

import gc
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import pytest

# xdist ``workeroutput``: a worker's pauses, as (wall-clock start, seconds) pairs.
WORKEROUTPUT_PAUSES = "pytest_accel_gc"

Pause = tuple[float, float]  # when it started (time.time(), as pytest's reports), seconds


class FullCollections:
    """The full collections of this process, each with its wall-clock start.

    No per-test hook: the collection times are matched to the tests' call phases once,
    at the end (``attribute``), from the reports' own start and stop times.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.pauses: list[Pause] = []
        self._started = 0.0
        self._wall = 0.0
        self.thread = threading.get_ident()  # the tests' (``pytest_runtestloop``'s)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            if threading.get_ident() == self.thread:
                self._started, self._wall = perf_counter(), time.time()
        elif self._started:
            self.pauses.append((self._wall, perf_counter() - self._started))
            self._started = 0.0

    def install(self) -> None:
        gc.callbacks.append(self._callback)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self) -> None:
        """The tests run in the thread that runs their loop, an xdist worker's too (an
        older execnet ran them off the main thread)."""
        self.thread = threading.get_ident()

    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_PAUSES] = self.pauses

    def pytest_unconfigure(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)


pauses_key = pytest.StashKey[FullCollections]()


def attribute(
    pauses: Sequence[Pause],
    starts: Sequence[float],
    stop: Callable[[int], float],
    owner: Callable[[int], str | None] | None = None,
    process: str | None = None,
) -> dict[int, float]:
    """Each pause of ``process`` given to the phase it started in; the seconds per phase.

    ``starts`` are the session's test phases' starts, sorted (indexes into them are the
    keys); ``stop(at)`` a phase's stop, ``owner(at)`` the process that ran it (None: one
    process ran them all).  A bisection per pause, a step back over other processes'
    phases: no list of spans per phase (3 MB for 10,000 tests), nor of stops, for the
    handful of pauses a run has.
    """
    found: dict[int, float] = {}
    for when, seconds in pauses:
        at = bisect_right(starts, when) - 1
        while owner is not None and at >= 0 and owner(at) != process:
            at -= 1
        if at >= 0 and when <= stop(at):
            found[at] = found.get(at, 0.0) + seconds
    return found


def register(config: pytest.Config) -> None:
    """Time full collections in the process that runs the tests (each xdist worker)."""
    collections = FullCollections(config)
    collections.install()
    config.stash[pauses_key] = collections
    config.pluginmanager.register(collections, "pytest_accel:full_collections")
