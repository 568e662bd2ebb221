"""Device memory judged apart from time (where a GPU or TPU reported it).

A test's peak device memory is close to deterministic: the same code allocates the
same buffers.  So one run tells, as for recompilations: a **MEMORY** finding is a test
whose peak on its busiest device is at least ``Rule.memory_threshold`` times the most
any baseline run measured for it, and ``Rule.memory_min_delta`` bytes more, judged
once ``--perf-min-samples`` baseline runs measured it.  Runs laid out as this one are
preferred where there are enough of them: under xdist a worker's peak holds what its
earlier tests left alive.  The baseline keeps exact peaks only; this run's lower bounds
(JAX, ``perf.device_memory``) count too, as a lower bound over the line is over it.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_accel.perf.analysis.layouts import Scope, same_layout
from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.model.findings import Comparison, MemoryGrowth, MemoryVerdict
from pytest_accel.perf.model.samples import Run


def _judging_runs(scope: Scope, min_samples: int) -> list[Run]:
    measured = [other for other in scope.env.runs if other.device_memory is not None]
    own = [other for other in measured if same_layout(other.layout, scope.run.layout)]
    return own if len(own) >= min_samples else measured


def memory_growth(scope: Scope, runs: list[Run], rule: Rule) -> list[MemoryGrowth]:
    """The tests of ``scope.run`` that passed and grew past the rule's lines."""
    run = scope.run
    if not run.device_memory or not runs:
        return []
    passed = {i for i, o in zip(run.ids, run.outcome, strict=True) if o == "passed"}
    found = []
    for test, now in run.device_memory.items():
        if test not in passed:
            continue
        seen = [
            measured[test]
            for other in runs
            if (measured := other.device_memory or {}) and test in measured
        ]
        if len(seen) < max(rule.min_samples, 1):
            continue  # a new test, or too few runs that measured it
        most = max(seen)
        if now >= most * rule.memory_threshold and now - most >= rule.memory_min_delta:
            found.append(MemoryGrowth(test, now, most, len(seen), test in run.memory_bounded))
    return sorted(found, key=lambda m: (-(m.current - m.baseline), m.id))


def with_memory(result: Comparison, scope: Scope, rule: Rule) -> Comparison:
    """``result`` with the run's device memory judged: its growths and highest peak."""
    memory = scope.run.device_memory
    if not memory:
        return result
    runs = _judging_runs(scope, rule.min_samples)
    highest = max(memory, key=lambda test: (memory[test], test))
    return replace(
        result,
        device_memory=MemoryVerdict(
            grew=memory_growth(scope, runs, rule),
            judged=len(runs) >= rule.min_samples,
            runs=len(runs),
            peak=(highest, memory[highest]),
        ),
    )
