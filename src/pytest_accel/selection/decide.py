"""Which collected tests a change needs: pure, from what the map and the change set say
(``mapfile``, ``changes``), and each test's reason in words.

``changed``: a test runs when any code it ran changed (a block of the project's source,
or the class or module body around it), when it has no entry in the map (new, or never
run by a mapping run), when a feature must keep it (a failure, a flaky test, a
quarantined one: ``pytest_accel_keep_tests``), when it is marked ``accel_always``, or
when a valve fired (every test).  ``programs``: a test runs when a program it compiled
(in the map the CPU tier made of this commit) is not one it compiled at the map's
commit, or a valve fired, or it has no entry in either map.  A budget then keeps the
most valuable of the tests to run and cuts the rest for the nightly bucket.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_accel.selection.changes import Valve
from pytest_accel.selection.mapfile import Program


@dataclass(frozen=True)
class Decision:
    """What selection made of a run's collected tests."""

    mode: str
    kept: Mapping[str, str]  # node id -> why it runs
    deselected: Mapping[str, str]  # node id -> why not
    valves: tuple[Valve, ...] = ()
    cut: Mapping[str, str] = field(default_factory=dict)  # over the budget: the nightly bucket
    notes: tuple[str, ...] = ()  # what selection could not use and did without

    @property
    def collected(self) -> int:
        return len(self.kept) + len(self.deselected) + len(self.cut)


def decide(
    mode: str,
    collected: Sequence[str],
    *,
    mapped: set[str],
    affected: Mapping[str, Sequence[str]],
    always: Mapping[str, str],
    valves: Sequence[Valve],
    map_commit: str | None,
) -> Decision:
    """The tests of ``collected`` that run and why, and those that do not.
    ``affected``: each test that depends on changed code (or a changed program), and
    what changed; ``always``: tests a feature or a marker keeps, and why."""
    kept: dict[str, str] = {}
    deselected: dict[str, str] = {}
    since = f"the map of {map_commit[:12]}" if map_commit else "the map"
    what = "its compiled programs are" if mode == "programs" else "what it depends on is"
    for nodeid in collected:
        if valves:
            kept[nodeid] = "every test runs: " + "; ".join(v.name for v in valves)
        elif nodeid in always:
            kept[nodeid] = always[nodeid]
        elif nodeid not in mapped:
            kept[nodeid] = f"no entry in {since} (new, or never run by a mapping run)"
        elif nodeid in affected:
            kept[nodeid] = f"changed since {since}: {some_names(affected[nodeid])}"
        else:
            deselected[nodeid] = f"{what} unchanged since {since}"
    return Decision(mode, kept, deselected, tuple(valves))


def some_names(names: Sequence[str], most: int = 3) -> str:
    """The first ``most`` of ``names``, sorted and without repeats, and how many more."""
    ordered = sorted(set(names))
    extra = f" and {len(ordered) - most} more" if len(ordered) > most else ""
    return ", ".join(ordered[:most]) + extra


def changed_programs(
    base: Mapping[str, frozenset[Program]], head: Mapping[str, frozenset[Program]]
) -> dict[str, list[str]]:
    """The tests whose compiled programs at this commit (``head``: the CPU tier's map of
    it) are not the ones they compiled at the map's commit (``base``): each with what
    changed, by the name JAX gave it (``jit_mse``).  A test that compiles nothing in
    either is not among them."""
    found: dict[str, list[str]] = {}
    for nodeid, now in head.items():
        then = base.get(nodeid, frozenset())
        if now == then:
            continue
        before = {(p.name, p.platform) for p in then - now}
        reasons = []
        for program in sorted(now - then, key=lambda p: (p.name, p.platform, p.fingerprint)):
            verb = "changed" if (program.name, program.platform) in before else "new"
            reasons.append(
                f"program {program.name} {verb} ({program.platform}, {program.fingerprint[:12]})"
            )
        names = {(p.name, p.platform) for p in now}
        gone = sorted(f"{n} ({platform})" for n, platform in before - names)
        if gone:
            reasons.append(f"no longer compiled: {', '.join(gone)}")
        found[nodeid] = reasons
    return found


@dataclass(frozen=True)
class SelectionBudget:
    """``--accel-select-budget``: USD a run, or seconds of its tests."""

    amount: float
    unit: str  # "usd" or "seconds"

    def describe(self) -> str:
        return f"${self.amount:g}" if self.unit == "usd" else f"{self.amount:g} s"


def within_budget(
    decision: Decision,
    budget: SelectionBudget,
    *,
    seconds: Mapping[str, float],
    usd_per_second: float | None,
    protected: Iterable[str],
    changed_count: Mapping[str, int],
) -> Decision:
    """The kept tests that fit ``budget``, the most valuable first: those a feature or
    a marker keeps (``protected``: failures, flaky tests, ``accel_always``, new tests)
    are never cut; the others by how much of their code changed, then the cheapest.
    The rest are cut for the nightly bucket, each with why."""
    guarded = set(protected)
    fallback = sorted(seconds.values())[len(seconds) // 2] if seconds else 0.0

    def cost(nodeid: str) -> float:
        spent = seconds.get(nodeid, fallback)
        return spent * usd_per_second if budget.unit == "usd" and usd_per_second else spent

    left = budget.amount - sum(cost(t) for t in decision.kept if t in guarded)
    kept = {t: r for t, r in decision.kept.items() if t in guarded}
    cut: dict[str, str] = {}
    ranked = sorted(
        (t for t in decision.kept if t not in guarded),
        key=lambda t: (-changed_count.get(t, 0), cost(t), t),
    )
    for nodeid in ranked:
        spend = cost(nodeid)
        if spend <= left:
            kept[nodeid] = decision.kept[nodeid]
            left -= spend
        else:
            cut[nodeid] = (
                f"over --accel-select-budget {budget.describe()}: for the nightly bucket"
                f" ({decision.kept[nodeid]})"
            )
    ordered = {t: kept[t] for t in decision.kept if t in kept}
    return replace(decision, kept=ordered, cut=cut)
