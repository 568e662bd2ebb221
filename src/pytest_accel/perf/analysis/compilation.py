"""Compilation judged apart from execution (where the suite uses JAX).

A test's timing is judged on execution (``timings.judged_on``); what it compiled is
judged here, on what does not move with the order of the tests:

- a **recompilation regression**: a test compiles a function it had compiled already
  (``perf.compiles``) at least ``RECOMPILE_RATIO`` times as often as in any baseline
  run that ran it, and ``RECOMPILE_MARGIN`` more times.  That is a jitted function
  traced anew on every call, the classic JAX bug: a count, not a time, so one run
  tells (23 against at most 12 is one).  Only baseline runs laid out as this one count
  (``layouts.same_layout``), and at least ``--perf-min-samples`` of them that ran the
  test, as for a time: which shapes a test finds compiled depends on what ran before it
  in its process, so under ``-n 2`` a test compiles, and recompiles, shapes a serial
  run's earlier tests compiled for it (on optax's suite, 25 against at most 7), and two
  ``-n 2`` runs hand tests to workers differently (0 in one, 3 in the next).  That
  holds for serial runs and shards, whose order is the same from run to run.  Under
  xdist (a worker's tests differ from run to run: on dm-pix's suite one test
  recompiled 24 times against 0 in five ``-n 2`` runs), and where too few runs are laid
  out as this one (a pull request's ``-n 2`` against a serial baseline), the test's
  compilations of the one function it compiled most (its *repeats*) are judged
  instead, against the runs of its layout or else every run that counted them, at
  ``REPEAT_RATIO`` and ``REPEAT_MARGIN``: a shape a process compiled before saves one
  compilation of that function per shape (dm-pix: at most 5 against 1), while a
  function jitted anew on every call compiles once per call whatever ran before;
- **compile time growth**: the run's compilation seconds against the median of the
  baseline runs of its layout, reported (not an alarm) at ``COMPILE_GROWTH`` and
  ``COMPILE_DELTA`` seconds more: a new jitted path, a bigger graph, a lost cache.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_accel.perf.analysis.layouts import Scope, handed_out_anew, same_layout
from pytest_accel.perf.analysis.speed import median  # statistics': 3 ms of imports
from pytest_accel.perf.model.findings import (
    Comparison,
    Compilation,
    Culprit,
    Finding,
    Recompiled,
    RecompileVerdict,
    RunnerLoad,
)
from pytest_accel.perf.model.samples import Run

RECOMPILE_RATIO = 1.5
RECOMPILE_MARGIN = 3
REPEAT_RATIO = 2.0
REPEAT_MARGIN = 5
COMPILE_GROWTH = 1.5
COMPILE_DELTA = 1.0  # seconds


def _judging_runs(scope: Scope) -> list[Run]:
    """The baseline runs recompilations are judged against: those that counted them
    (execution time), laid out as this one."""
    layout = scope.run.layout
    return [
        other
        for other in scope.env.runs
        if other.basis == "execution" and same_layout(other.layout, layout)
    ]


def _repeat_runs(scope: Scope) -> list[Run]:
    """The baseline runs that counted repeats (``RunTimings.repeats``), of any layout."""
    return [
        other
        for other in scope.env.runs
        if other.basis == "execution" and other.repeats is not None
    ]


def recompiled(
    scope: Scope, runs: list[Run], min_samples: int = 1, *, repeats: bool = False
) -> list[Recompiled]:
    """The tests of ``scope.run`` that recompile more than any of ``runs`` saw, of those
    at least ``min_samples`` of the runs ran; ``repeats``: judged on the compilations of
    each test's most compiled function (a run without an entry for a test that ran
    compiled no function of it more than once)."""
    now = scope.run.repeats if repeats else scope.run.recompiles
    env = scope.env
    if not now or not runs:
        return []
    ratio, margin = (
        (REPEAT_RATIO, REPEAT_MARGIN) if repeats else (RECOMPILE_RATIO, RECOMPILE_MARGIN)
    )
    tests, warmup = env.positions("tests"), env.positions("warmup")
    found = []
    for ident, count in now.items():
        if count < margin:
            continue
        seen = [
            (other.repeats or {}).get(ident, 1) if repeats else other.recompiles.get(ident, 0)
            for other in runs
            if (ident in tests and other.sample("tests", tests[ident]) is not None)
            or (ident in warmup and other.sample("warmup", warmup[ident]) is not None)
        ]
        if len(seen) < max(min_samples, 1):
            continue  # a new test, or too few runs to know its usual count
        most = max(seen)
        if count >= most * ratio and count - most >= margin:
            found.append(
                Recompiled(
                    ident,
                    count,
                    most,
                    len(seen),
                    of_one_function=repeats,
                    **_culprit(scope, ident),
                )
            )
    return sorted(found, key=lambda r: (-(r.current - r.baseline), r.id))


def _culprit(scope: Scope, ident: str) -> dict[str, Any]:
    """The jitted function a test compiled most, and how often (``perf.compiles``)."""
    found = (scope.run.recompiling or {}).get(ident)
    if found is None:
        return {}
    function, caller, path, line, count = found
    return {"culprit": Culprit(function, caller, path, line), "compilations": count}


def compilation(scope: Scope) -> Compilation | None:
    """The run's compile seconds against the baseline runs of its layout."""
    seconds = scope.run.compile_seconds
    if seconds is None:
        return None
    kept = [
        other.compile_seconds
        for other in scope.env.runs
        if other.compile_seconds is not None and same_layout(other.layout, scope.run.layout)
    ]
    if not kept:
        return Compilation(seconds, None, 0, grew=False)
    middle = median(kept)
    grew = seconds >= middle * COMPILE_GROWTH and seconds - middle >= COMPILE_DELTA
    return Compilation(seconds, middle, len(kept), grew)


def with_compilation(result: Comparison, scope: Scope) -> Comparison:
    """``result`` with what ``scope`` says of the run's timings and compilation: what they
    were judged on and what was left out of them (CPU waits, baseline runs of another
    basis or layout), recompilations, compile time, and beside each finding of a test
    judged on execution, the seconds it spent compiling."""
    run = scope.run
    judging = _judging_runs(scope)
    needed = result.timing.min_samples
    handed_out = handed_out_anew(run.layout)
    across = len(judging) < needed and run.repeats is not None
    if across:
        judging = _repeat_runs(scope)
    elif handed_out:
        judging = [other for other in judging if other.repeats is not None]
    result = replace(
        result.timed(
            time=run.basis,
            run_layout=run.layout,
            left_out_time=scope.left_out_time,
            left_out_layout=scope.left_out_layout,
            change_runs=None if scope.change_runs is None else len(scope.change_runs),
        ),
        load=RunnerLoad(run.cpu_wait, run.cpu_wait_share, run.threads_wait_share),
        recompiles=RecompileVerdict(
            found=recompiled(scope, judging, needed, repeats=across or handed_out),
            judged=run.recompiles is not None and len(judging) >= needed,
            across=across and len(judging) >= needed,
            runs=len(judging),
        ),
        compilation=compilation(scope),
    )
    if run.basis == "execution" and run.compiling is not None:
        compiling, calls = run.compiling, run.call_compiling or {}

        def beside(finding: Finding) -> Finding:
            if finding.kind != "test" or finding.tracing:  # tracing is a part of compiling
                return finding
            # A test the listener did not see (it ran before it began) has no figure.
            seconds = (compiling if scope.env.test_metric == "total" else calls).get(finding.id)
            return replace(finding, compiling=seconds)

        result = result.timed(
            regressions=list(map(beside, result.timing.regressions)),
            improvements=list(map(beside, result.timing.improvements)),
        )
    return result
