"""Duration-balanced CI shards.

Longest first onto the least-loaded shard (LPT): deterministic, within 4/3 of the best
possible makespan in the worst case and usually within a few percent.  Units are tests,
classes or modules; a class or module is never split, so class-scoped fixtures run once.
"""

from __future__ import annotations

import heapq
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_accel.text import shown

_SHARD_SPEC = re.compile(r"^\s*([0-9]{1,7})\s*/\s*([0-9]{1,7})\s*$")


class ShardSpecError(ValueError):
    pass


def parse_shard(spec: str) -> tuple[int, int]:
    """``K/N`` (1-based) -> ``(K, N)``."""
    match = _SHARD_SPEC.match(spec)
    if not match:
        raise ShardSpecError(f"{shown(spec)} is not K/N (e.g. 2/4)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ShardSpecError(f"{spec!r}: K must be between 1 and N, and N at least 1")
    return index, count


@dataclass(frozen=True)
class Unit:
    """What one shard takes whole: a test, a class or a module, with its tests."""

    id: str
    tests: tuple[str, ...]
    weight: float


@dataclass(frozen=True)
class Plan:
    shards: tuple[tuple[Unit, ...], ...]

    def loads(self) -> list[float]:
        return [sum(u.weight for u in shard) for shard in self.shards]

    def tests(self, index: int) -> list[str]:
        """The tests of shard ``index`` (0-based)."""
        return [t for unit in self.shards[index] for t in unit.tests]

    def ideal(self) -> float:
        """Each shard's load were the work spread evenly (sum / N)."""
        loads = self.loads()
        return sum(loads) / len(loads) if loads else 0.0

    def imbalance(self) -> float:
        """Largest shard over the ideal; 1.0 is perfect."""
        ideal = self.ideal()
        return max(self.loads()) / ideal if ideal > 0 else 1.0

    def oversized(self) -> Unit | None:
        """The heaviest unit of several tests where it alone outweighs the ideal shard:
        no plan of these units is more even, and only splitting it helps."""
        units = [unit for shard in self.shards for unit in shard if len(unit.tests) > 1]
        heaviest = max(units, key=lambda unit: unit.weight, default=None)
        return heaviest if heaviest is not None and heaviest.weight > self.ideal() > 0 else None


def oversized_note(plan: Plan, by: str, option: str) -> str | None:
    """What to do about a unit that alone outweighs a shard (``--by test``), or None."""
    unit = plan.oversized()
    if unit is None or by == "test":
        return None
    return (
        f"the {by} {unit.id} alone is estimated at {unit.weight:.1f}s, more than the ideal"
        f" shard: {option} test splits it"
    )


def unit_of(test_id: str, group: str | None, by: str) -> str:
    """The unit a test belongs to; a test without a class is its own unit under ``class``."""
    if by == "test" or group is None:
        return test_id
    return group


def weights_for(
    tests: Sequence[str], known: Mapping[str, float], zero: Iterable[str] = ()
) -> dict[str, float]:
    """Each test's weight: its known duration, else the median of the known ones.

    Tests in ``zero`` (skipped here by the platform rules) weigh nothing.
    """
    zeroed = set(zero)
    present = [known[t] for t in tests if t in known and t not in zeroed]
    fallback = statistics.median(present) if present else 1.0
    return {t: 0.0 if t in zeroed else known.get(t, fallback) for t in tests}


def make_units(
    tests: Sequence[str], groups: Mapping[str, str | None], weights: Mapping[str, float], by: str
) -> list[Unit]:
    members: dict[str, list[str]] = {}
    for test in tests:
        members.setdefault(unit_of(test, groups.get(test), by), []).append(test)
    return [
        Unit(unit, tuple(names), sum(weights[t] for t in names)) for unit, names in members.items()
    ]


def plan(units: Sequence[Unit], count: int) -> Plan:
    """Heaviest unit first onto the least-loaded shard; ties by fewer units, then index.

    Deterministic for the same units in any order: units are sorted by weight, then id.
    No shard is empty while there are at least ``count`` units (an empty shard has the
    lowest load and the fewest units, so it is always chosen next).
    """
    heap = [(0.0, 0, index) for index in range(count)]
    shards: list[list[Unit]] = [[] for _ in range(count)]
    for unit in sorted(units, key=lambda u: (-u.weight, u.id)):
        load, size, index = heapq.heappop(heap)
        shards[index].append(unit)
        heapq.heappush(heap, (load + unit.weight, size + 1, index))
    return Plan(tuple(tuple(s) for s in shards))


def groups_from_node_ids(tests: Iterable[str]) -> dict[str, tuple[str | None, str | None]]:
    """Class and module of each test read from its node id (no collection tree at hand)."""
    groups: dict[str, tuple[str | None, str | None]] = {}
    for test in tests:
        parts = test.split("::")
        groups[test] = ("::".join(parts[:-1]) if len(parts) > 2 else None, parts[0])
    return groups


def plan_tests(
    durations: Mapping[str, float],
    groups: Mapping[str, tuple[str | None, str | None]],
    by: str,
    splits: int,
) -> Plan:
    """A plan for the known tests alone, grouped by class or module."""
    tests = sorted(durations)
    column = 0 if by == "class" else 1
    units = make_units(
        tests, {t: groups[t][column] for t in tests}, weights_for(tests, durations), by
    )
    return plan(units, splits)
