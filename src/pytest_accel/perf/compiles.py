"""How much of each test's time was compiling, where the suite uses JAX or torch.compile.

Nothing here imports jax: the moment the suite has it (imported already, or as soon as
its first import finishes, in a test's body too), it gets ``jax.monitoring`` listeners,
and per-test hooks that say which test and which phase they belong to.  A suite without
jax pays an attribute write per test.

Per test it keeps the compile steps' spans (tracing, lowering to MLIR, the backend's
compile) and counts the backend compilations, the functions compiled more than once
(``recompiles``) and the persistent cache's hits and misses.  Seconds are the *union*
of the spans: JAX traces a jitted function called inside another one within the outer
trace, and summing both would count that time twice.  The call's share rides on the
call report (what ``timings.without_compiles`` takes out of the judged call), the
test's whole tally on its teardown report; pytest-xdist carries both from a worker.

Where the kernel keeps a run-queue clock (``perf.waits``), the thread's wait is read as
each test starts and at each compile step's end: a trace's span lies within what was
waited since the reading before it, so its wait is at most that, and at most the span.
On a busy runner that is taken out of the test's tracing instead of the call's wait in
proportion (``timings.without_waits``): tracing, Python on the test's thread, can take
far more than its share of a call that is mostly the backend compiling.

``torch.compile`` is counted the same way from the moment ``torch._dynamo`` is
imported, through its compile callbacks (``torch._dynamo.callback``): each graph Dynamo
compiles is a compilation of its frame (the code object, ``frame/compile`` in the
callback's compile id), one compiled again is a recompilation, and the span from start
to end (Dynamo's tracing, AOTAutograd and the backend) is compiling time.  Torch has no
tracing or backend split, and no persistent-cache events there: those figures stay JAX's.

The compiler's imports inside a test (``torch._dynamo``'s and ``torch._inductor``'s
modules, which ``torch.compile`` imports as it needs them, before any callback too)
are compiling time as well: the process's first compilation, paid by whichever test
compiles first.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_accel.imports import AfterImport, ImportsTimed, after_import, imports_timed
from pytest_accel.outcomes import CompileFigures
from pytest_accel.perf.meters import Span, add_meter
from pytest_accel.perf.pauses import FullCollections, Pause
from pytest_accel.perf.waits import Reading, ThreadClock, waited_between

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
TRACE = "/jax/core/compile/jaxpr_trace_duration"
# Tracing, lowering to MLIR and the backend's compile: a test's compilation seconds.
COMPILE_STEPS = frozenset(
    {
        TRACE,
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        BACKEND_COMPILE,
    }
)
CACHE_HIT = "/jax/compilation_cache/cache_hits"
CACHE_MISS = "/jax/compilation_cache/cache_misses"
# torch.compile's compile id: "frame/compile", maybe with a restart ("0/1_1") or a
# compiled-autograd prefix ("!0/0/1"): the frame is the function compiled.
TORCH_COMPILE_ID = re.compile(r"(\d+)/(\d+)")
# What torch.compile imports as it needs it, outside its compile callbacks too:
# Inductor by ``torch.compile()`` itself (0.8 s on a CPU, of 2.1 s before a first
# compilation), a debugging wrapper of the backend (0.3 s in einops' suite).
COMPILER_PACKAGES = ("torch._dynamo", "torch._inductor")


def covered_seconds(spans: list[tuple[float, float]], pauses: Sequence[Pause] = ()) -> float:
    """The seconds ``spans`` (start, end) cover, each instant once: nested steps (a
    jitted function traced inside another's trace) are not counted twice.  Full garbage
    collections within them (``pauses``: start, seconds) are left out: those are
    ``perf.pauses``'s, taken out of the judged time on their own."""
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    covered = sum(end - start for start, end in merged)
    if merged:
        first = merged[0][0]
        for when, seconds in reversed(pauses):  # newest first: only this test's matter
            if when + seconds < first:
                break
            covered -= sum(
                max(0.0, min(end, when + seconds) - max(start, when)) for start, end in merged
            )
    return max(covered, 0.0)


class CompileTally:
    """One test's compile activity so far."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self.trace_spans: list[tuple[float, float]] = []
        self.backend_spans: list[tuple[float, float]] = []
        self.functions: Counter[str] = Counter()  # backend compilations per function name
        # Traces of a jitted function (not an eager operation's) per (name, caller's
        # qualified name, path, line): two lambdas called from two places are two.
        self.traces: Counter[tuple[str, str, str, int]] = Counter()
        self.hits = 0
        self.misses = 0
        self.call_from = 0  # the first span of the call phase
        # What the test's thread waited for a CPU while JAX traced, at most (None: not
        # measured, for the whole test once one of its traces could not be).
        self.trace_wait: float | None = 0.0

    def summary(self, pauses: Sequence[Pause] = ()) -> CompileFigures:
        """The test's figures; recompiles: compilations of a function this test had
        compiled already (new shapes, new static arguments, or a new function object
        each call)."""
        count = sum(self.functions.values())
        tracing = round(covered_seconds(self.trace_spans, pauses), 6)
        return CompileFigures(
            count,
            round(covered_seconds(self.spans, pauses), 6),
            self.hits,
            self.misses,
            count - len(self.functions),
            tracing,
            round(covered_seconds(self.backend_spans, pauses), 6),
            max(self.functions.values(), default=0),
            -1.0 if self.trace_wait is None else round(min(self.trace_wait, tracing), 6),
        )

    def most_compiled(self) -> list[str | int] | None:
        """``[function, caller, path, line, traces]`` of the jitted function traced most
        from one place, where that is more than once (``recompiling``, perf.meters): each trace
        of a jitted function at the top level is a compilation of it.  Eager operations
        (``jnp.add`` on new shapes, JAX's own ``convert_element_type``) are not
        candidates: compiled once per shape and dtype, they are the process's warm-up,
        never a function jitted anew.  (JAX reports no trace of a function jitted inside
        another's trace: then the outer one is what is compiled anew.)"""
        if not self.traces:
            return None
        (name, caller, path, line), count = self.traces.most_common(1)[0]
        return [name, caller, path, line, count] if count >= 2 else None


WORKEROUTPUT_PROBLEM = "pytest_accel_compile_problem"


def running_test() -> str | None:
    """The node id of the test whose setup, call or teardown runs now (pytest's
    ``PYTEST_CURRENT_TEST``: read where it is needed, no hook on every test)."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" (", 1)[0] if current else None


class CompileCounter:
    """Registered wherever tests run, with the timing feature; listens from the moment
    the suite has jax: at once if it is imported already, else as soon as its first
    import finishes, wherever that is (collection, a fixture, a test's body).  Nothing
    jax's monitoring does wrong stops the run: a failure is one note (``problem``) and
    the timings go on whole, without compile figures."""

    def __init__(self, collections: FullCollections | None = None) -> None:
        self.current: str | None = None
        self.tally = CompileTally()
        self.monitoring: Any = None
        self.collections = collections  # the full collections, timed (perf.pauses)
        self.config: pytest.Config | None = None
        self.problem: str | None = None  # why compilation is not measured, if it is not
        self.hook: AfterImport | None = None
        self.torch_hook: AfterImport | None = None
        self.compiler_imports: ImportsTimed | None = None  # once torch._dynamo is in
        self.torch_callbacks: Any = None  # torch._dynamo's handler, once listened to
        self.torch_started: dict[str, float] = {}  # compile id -> when it started
        self.counting = False  # its meters added (perf.meters)
        self.torch_problem: str | None = None  # why torch.compile is not counted, if not
        # The run-queue clock of the thread that runs the tests (perf.waits), read at a
        # test's start and at each compile step: the wait within each trace, at most.
        self.clocks = ThreadClock()
        self.last_wait: Reading | None = None
        self.last_read = 0.0  # when, by JAX's clock (time.time)
        # Where the frames a trace's caller is not in live (JAX's, jaxlib's, ours), and the
        # rootdir a caller's path is given relative to (set as listening starts).
        self.library_dirs: tuple[str, ...] = (os.path.dirname(__file__),)
        self.root = ""

    @property
    def pauses(self) -> Sequence[Pause]:
        return () if self.collections is None else self.collections.pauses

    def heard(self, event: str, duration_secs: float, **facts: str | int) -> None:
        if self.current is None or event not in COMPILE_STEPS:
            return
        end = time.time()  # JAX times its steps by this clock, and so do the pauses
        span = (end - duration_secs, end)
        tally = self.tally
        tally.spans.append(span)
        since = self.last_read  # the span's part after it is the wait's to share
        waited = self._waited_since_last(end)
        if event == BACKEND_COMPILE:
            tally.functions[str(facts.get("fun_name", "?"))] += 1
            tally.backend_spans.append(span)
        elif event == TRACE:
            tally.trace_spans.append(span)
            caller = self._caller()
            if caller is not None:
                qualname, path, line = caller
                tally.traces[(str(facts.get("fun_name", "?")), qualname, path, line)] += 1
            if waited is None or tally.trace_wait is None:
                tally.trace_wait = None
            else:  # what was waited since lies partly in the trace: at most all of it
                tally.trace_wait += min(waited, max(end - max(span[0], since), 0.0))

    def _caller(self) -> tuple[str, str, int] | None:
        """The first frame outside JAX, jaxlib and this plugin as a trace ends: the code
        that called the traced function, ``(qualified name, path, line)``; the path is
        relative to the rootdir where it is under it.  None for an eager operation's
        trace (JAX's ``apply_primitive`` below it): no function of the project's."""
        skipped, root = self.library_dirs, self.root
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if frame.f_code.co_name == "apply_primitive" and path.endswith("dispatch.py"):
                return None
            if not path.startswith(skipped):
                shown = path[len(root) :] if root and path.startswith(root) else path
                name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)  # 3.11+
                return str(name), shown, frame.f_lineno
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def mark_wait(self) -> None:
        """Read the thread's CPU wait as a test starts: the first trace's span lies after."""
        clock = self.clocks.current()
        self.last_wait = None if clock is None else clock.read()
        self.last_read = time.time()
        if clock is None:  # no clock here: nothing this test traces is measured
            self.tally.trace_wait = None

    def _waited_since_last(self, now: float) -> float | None:
        """Seconds the thread waited for a CPU since the test's start or its last
        compile step, read at ``now``; None where not measured (no clock, another
        thread).  Readings split the time: a trace that holds another (a jitted function
        called while tracing one) gets only the wait after the inner one's end."""
        clock, last = self.clocks.clock, self.last_wait
        if clock is None or last is None or threading.get_native_id() != self.clocks.thread:
            return None
        self.last_wait, self.last_read = clock.read(), now
        return waited_between(last, self.last_wait) / 1e9

    def heard_event(self, event: str, **_: str | int) -> None:
        if self.current is None:
            return
        if event == CACHE_HIT:
            self.tally.hits += 1
        elif event == CACHE_MISS:
            self.tally.misses += 1

    def heard_torch_start(self, args: Any = None) -> None:
        self.torch_started[str(getattr(args, "compile_id", ""))] = time.time()

    def heard_torch_end(self, args: Any = None) -> None:
        """One torch.compile compilation ended: a graph of its frame (a lazy backward
        or a CUDA graph recording adds seconds, not a compilation)."""
        compile_id = str(getattr(args, "compile_id", ""))
        began = self.torch_started.pop(compile_id, None)
        if self.current is None or began is None:
            return
        self.tally.spans.append((began, time.time()))
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "DYNAMO")
        if trigger == "DYNAMO":
            frame = TORCH_COMPILE_ID.search(compile_id)
            self.tally.functions[f"torch.compile:{frame.group(1) if frame else '?'}"] += 1

    def start(self, config: pytest.Config) -> None:
        """Listen now if jax (torch._dynamo) is imported, else once it is."""
        self.config = config
        if "jax" in sys.modules:
            self._listen()
        else:
            self.hook = after_import("jax", self._imported)
        if "torch._dynamo" in sys.modules:
            self._listen_torch()
        else:
            self.torch_hook = after_import("torch._dynamo", self._torch_imported)

    def _torch_imported(self) -> None:
        hook, self.torch_hook = self.torch_hook, None
        if hook is not None:
            hook.stop()
        self._listen_torch()
        self._own_from_here()
        if hook is not None and hook.began is not None:
            self._heard_import(hook.began, time.time())

    def _heard_import(self, began: float, ended: float) -> None:
        """``torch.compile``'s first call imports Dynamo and Inductor inside whichever
        test calls it first (seconds: 3.8 for Dynamo alone on a GPU machine): the
        process's first compilation, not the test's execution, so compiling time.
        ``import jax`` is the code's own, done where it says (mostly at collection;
        in the first test, the warm-up judged apart): it stays execution."""
        running = self.counting and self.current is not None
        if running and self.current == running_test():
            self.tally.spans.append((began, ended))

    def _own_from_here(self) -> None:
        running = running_test()
        if running is not None and self.current != running:
            # Imported inside a test: its compilations from here on are its own.
            self.current, self.tally = running, CompileTally()
            self.mark_wait()

    def _listen_torch(self) -> None:
        if self.torch_callbacks is not None or self.torch_problem or self.config is None:
            return
        try:
            # By name: PyTorch is optional, and not installed where this is type-checked.
            callback_handler = importlib.import_module("torch._dynamo.callback").callback_handler
            callback_handler.register_start_callback(self.heard_torch_start)
            callback_handler.register_end_callback(self.heard_torch_end)
        except Exception as exc:  # a torch without compile callbacks (before 2.5): say so
            self.torch_problem = f"torch._dynamo.callback: {type(exc).__name__}: {exc}"
            return
        self.torch_callbacks = callback_handler
        # Dynamo's and Inductor's modules that its compilations import later (Inductor
        # by torch.compile() itself, a debugging wrapper of the backend...): compiling.
        self.compiler_imports = imports_timed(COMPILER_PACKAGES, self._heard_import)
        self._count_per_test()

    def _count_per_test(self) -> None:
        if not self.counting and self.config is not None:
            self.counting = True
            add_meter(self.config, _TestCompiles(self))
            add_meter(self.config, _CallCompiles(self))

    def _imported(self) -> None:
        if self.hook is not None:
            self.hook.stop()
            self.hook = None
        self._listen()
        if self.monitoring is not None:
            self._own_from_here()

    def _listen(self) -> None:
        if self.monitoring is not None or self.problem is not None or self.config is None:
            return
        try:
            from jax import monitoring

            monitoring.register_event_duration_secs_listener(self.heard)
            monitoring.register_event_listener(self.heard_event)
        except Exception as exc:  # a stub, a mock, a jax too old or broken: say so once
            self.problem = f"jax.monitoring: {type(exc).__name__}: {exc}"
            self._unregister(monitoring if "monitoring" in locals() else None)
            return
        self.monitoring = monitoring
        self.library_dirs = _library_dirs()
        self.root = os.path.join(str(self.config.rootpath), "")
        self._count_per_test()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.problems():
            workeroutput[WORKEROUTPUT_PROBLEM] = "; ".join(self.problems())

    def problems(self) -> list[str]:
        """Why compilation is not measured, JAX's or torch's, where it is not."""
        return [p for p in (self.problem, self.torch_problem) if p is not None]

    def pytest_unconfigure(self) -> None:
        self._stop_watching()
        self.clocks.close()
        if self.monitoring is not None:  # in-process runs (pytester) leave none behind
            self._unregister(self.monitoring)
            self.monitoring = None
        if self.torch_callbacks is not None:
            with contextlib.suppress(Exception):
                self.torch_callbacks.remove_start_callback(self.heard_torch_start)
                self.torch_callbacks.remove_end_callback(self.heard_torch_end)
            self.torch_callbacks = None

    def _stop_watching(self) -> None:
        for hook in (self.hook, self.torch_hook, self.compiler_imports):
            if hook is not None:
                hook.stop()
        self.hook = self.torch_hook = self.compiler_imports = None

    def _unregister(self, monitoring: Any) -> None:
        """Take our listeners off, as far as this jax lets us (old ones cannot)."""
        for name, listener in (
            ("unregister_event_duration_listener", self.heard),
            ("unregister_event_listener", self.heard_event),
        ):
            with contextlib.suppress(Exception):
                getattr(monitoring, name)(listener)


def _library_dirs() -> tuple[str, ...]:
    """The directories of JAX, jaxlib and this plugin (each ending in a separator)."""
    found = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    for name in ("jax", "jaxlib"):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where:
            found.append(os.path.dirname(where))
    return tuple(os.path.join(d, "") for d in found)


class _TestCompiles:
    """The meter (``perf.meters``) of a test's compile figures, from its start to its
    teardown: ``compiles`` and, where it compiled a function more than once,
    ``recompiling``."""

    span: Span = "test"
    read_at_end = False

    def __init__(self, counter: CompileCounter) -> None:
        self.counter = counter

    def begin(self, item: pytest.Item) -> None:
        # By node id: a test's compilations are told apart by pytest's running test.
        self.counter.current, self.counter.tally = item.nodeid, CompileTally()
        self.counter.mark_wait()

    def end(self, item: pytest.Item) -> dict[str, Any]:
        counter = self.counter
        if item.nodeid != counter.current:
            return {}  # listening began after this test did
        measured: dict[str, Any] = {"compiles": list(counter.tally.summary(counter.pauses))}
        culprit = counter.tally.most_compiled()
        if culprit is not None:
            measured["recompiling"] = culprit
        return measured


class _CallCompiles:
    """The meter of the seconds a test's call spent compiling: ``compile_seconds``."""

    span: Span = "call"
    read_at_end = False  # a conftest may read a call's compile seconds as it is reported

    def __init__(self, counter: CompileCounter) -> None:
        self.counter = counter

    def begin(self, item: pytest.Item) -> None:
        if item.nodeid == self.counter.current:
            self.counter.tally.call_from = len(self.counter.tally.spans)

    def end(self, item: pytest.Item) -> dict[str, float]:
        counter = self.counter
        if item.nodeid != counter.current:
            return {}
        spans = counter.tally.spans[counter.tally.call_from :]
        return {"compile_seconds": round(covered_seconds(spans, counter.pauses), 6)}
