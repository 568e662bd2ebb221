"""Which finding explains which: one cause, one alarm.

A class, a module or the suite total is reported only where its own members' findings
do not explain at least half of its shift.  And in a run spread over processes unlike
the baseline's runs, a test's finding stands only where its class or module confirms it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_accel.perf.analysis.changes import Steps
from pytest_accel.perf.model.findings import Change, ChangedCode, Comparison, Finding
from pytest_accel.perf.model.samples import EnvHistory

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

EXPLAINED = 0.5  # share of a group's shift its members' findings must account for
# A group confirms a test's finding only with this many tests: in a class or module of
# one or two tests, "its group moved the same way" is the test itself moving.
MIN_CONFIRMING_TESTS = 3


@dataclass
class Judged:
    """One kind's verdicts, before the findings are made."""

    ids: list[str]
    current: FloatArray
    medians: FloatArray
    noise: FloatArray  # each one's spread, in log seconds (NaN: unknown)
    runs: FloatArray  # the baseline's runs the steps were searched in, a row per id
    regressed: BoolArray
    improved: BoolArray
    steps: Steps
    findings: list[tuple[str, Finding]]  # ("regression"|"improvement", finding)
    changes: list[Change]
    # Slower by every gate but the samples a verdict needs (``rule.Judgement.learning``).
    learning: list[Finding] = field(default_factory=list)
    # Steps that began between two runs of one commit: the code did not change there.
    unattributed: list[Change] = field(default_factory=list)


def usual_layout(env: EnvHistory) -> str | None:
    """The layout (``timings.layout_of``) most of the baseline's runs had, if known."""
    from collections import Counter

    known = Counter(run.layout for run in env.runs if run.layout)
    return known.most_common(1)[0][0] if known else None


def confirmed_by_groups(
    tests: Judged,
    groups: list[Judged],
    class_of: Mapping[str, str | None],
    module_of: Mapping[str, str | None],
    sizes: Mapping[str, int] | None = None,
    *,
    only: Collection[str] | None = None,
) -> list[str]:
    """In a run spread over processes unlike the baseline's runs (``-n`` against serial
    runs, a shard against whole runs), a first use's cost (a JAX compilation, a lazy
    import) moves to whichever test comes first in its new order.  Such a move stays
    inside the test's class or module: keep a test's finding only where that group's
    total, compared whole, moved the same way; the others are returned, not findings.
    The group is the test's class, else its module, of at least
    ``MIN_CONFIRMING_TESTS`` tests (``sizes``: tests per group; None counts none out).
    ``only``: the tests whose findings need confirming (None: all); the others stand."""
    moved: dict[str, set[str]] = {"regression": set(), "improvement": set()}
    for group in groups:
        for what, finding in group.findings:
            moved[what].add(finding.id)
        for change in group.changes:
            moved["regression" if change.slower else "improvement"].add(change.id)
    compared = {ident for group in groups for ident in group.ids}
    kept: list[tuple[str, Finding]] = []
    unconfirmed: list[str] = []
    for what, finding in tests.findings:
        if only is not None and finding.id not in only:
            kept.append((what, finding))
            continue
        holder = next(
            (
                g
                for g in (class_of.get(finding.id), module_of.get(finding.id))
                if g in compared and (sizes is None or sizes.get(g, 0) >= MIN_CONFIRMING_TESTS)
            ),
            None,
        )
        if holder is not None and holder in moved[what]:
            kept.append((what, finding))
        else:
            unconfirmed.append(finding.id)
    tests.findings = kept
    return sorted(unconfirmed)


def shifts_of(sources: Sequence[tuple[Judged, Mapping[str, str | None]]]) -> dict[str, float]:
    """Per group, the seconds its members' findings account for (+ slower, - faster);
    each source maps its ids to their group."""
    shifts: dict[str, float] = {}
    for judged, group_of in sources:
        moved = [(f.id, f.current - f.baseline) for _, f in judged.findings]
        moved += [(c.id, c.after - c.before) for c in (*judged.changes, *judged.unattributed)]
        for ident, shift in moved:
            group = group_of.get(ident)
            if group is not None:
                shifts[group] = shifts.get(group, 0.0) + shift
    return shifts


def is_explained(shift: float, accounted: float) -> bool:
    """Whether ``accounted`` seconds of shift, the same way, cover enough of ``shift``."""
    return shift * accounted > 0 and abs(accounted) >= EXPLAINED * abs(shift)


def unexplained(judged: Judged, shifts: Mapping[str, float]) -> Judged:
    """The group's findings and changes that its own tests do not explain."""
    judged.findings = [
        (what, f)
        for what, f in judged.findings
        if not is_explained(f.current - f.baseline, shifts.get(f.id, 0.0))
    ]
    judged.changes = [
        c for c in judged.changes if not is_explained(c.after - c.before, shifts.get(c.id, 0.0))
    ]
    judged.unattributed = [
        c
        for c in judged.unattributed
        if not is_explained(c.after - c.before, shifts.get(c.id, 0.0))
    ]
    return judged


# Commits between which a finding's step came: (the newest run before it, the first at
# it; None: this run's work tree).
CommitRange = tuple[str, str | None]


@dataclass(frozen=True)
class CodeQuestion:
    """What to ask of the dependency map for one alarm: the changed code its tests ran
    between the commits of ``between``."""

    between: CommitRange
    tests: tuple[str, ...]  # a test's own id; a group's tests that moved most


def code_questions(
    comparison: Comparison,
    *,
    run_commit: str | None,
    baseline_commit: str | None,
    before_newest: str | None = None,
) -> dict[tuple[str, str], CodeQuestion]:
    """Per regression or slowdown change (by scope and id), the commits its step came
    between and the tests whose changed code names its likely cause: a regression, the
    baseline's newest run (``before_newest``, the run before it, for a regression judged
    without it: ``Finding.pending``) and this one; a change, its last run at the old
    level and its first at the new.  None where a commit is not known, or both are one
    commit (the runner moved, not the code)."""
    asked: dict[tuple[str, str], CodeQuestion] = {}
    findings: list[tuple[Finding | Change, str | None, str | None]] = [
        (found, before_newest if found.pending else baseline_commit, run_commit)
        for found in comparison.timing.regressions
    ]
    for change in comparison.timing.slowdowns:
        since = change.previous.commit if change.previous is not None else None
        findings.append((change, since, change.since.commit or run_commit))
    for found, since, until in findings:
        if since is None or until is None or since == until:
            continue
        tests = (found.id,) if found.kind == "test" else tuple(t for t, _ in found.movers)
        if tests:
            asked[(found.kind, found.id)] = CodeQuestion((since, until), tests)
    return asked


def changed_code_of(
    questions: Mapping[tuple[str, str], CodeQuestion],
    answers: Mapping[CommitRange, Mapping[str, Sequence[str]]],
) -> dict[tuple[str, str], ChangedCode]:
    """Each question's changed code, from the map's answers per commit range (a
    group's: its tests' in the order they moved, each named once)."""
    found: dict[tuple[str, str], ChangedCode] = {}
    for key, question in questions.items():
        answer = answers.get(question.between, {})
        names = dict.fromkeys(name for test in question.tests for name in answer.get(test, ()))
        if names:
            since, until = question.between
            found[key] = ChangedCode(since, until, tuple(names))
    return found
