"""A baseline's samples per hardware key, as the comparison reads them: the runs, the
ids of each kind, a matrix per kind, and the summary kept with them.  The file format
is ``perf.formats.baseline``'s; the summary is derived by ``perf.analysis.summary``, and
what the numbers mean is ``perf.analysis.rule``'s and ``perf.analysis.speed``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import is_not
from typing import TYPE_CHECKING, Any

from pytest_accel.perf.model import DEFAULT_WINDOW
from pytest_accel.perf.model.columns import Columns, Values, as_array, as_list, encode_values
from pytest_accel.perf.model.timings import RunIdentity

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DISTINCT_SECONDS = 1e-3  # a sample this long is never the same in two runs to 1 µs
ANY_ENV = "*"  # the key of a pytest-split map: it applies to whatever hardware runs
# Per run: tests; the tests that ran first in their process (``warmup``: judged apart);
# classes and modules; the tests' JAX tracing (``trace``: the tests of ``tests`` in a
# suite that uses JAX, judged as a kind of its own, docs/regressions.md).
KINDS = ("tests", "warmup", "classes", "modules", "trace")
METRICS = ("call", "total")

# ``value is not None`` as a C-level predicate, for maps and filters over samples.
has_sample = partial(is_not, None)


@dataclass
class Run:
    identity: RunIdentity
    # Per kind, aligned with the ids (a shorter list: no more); read from a file, each
    # kind is decoded when first asked for (``perf.model.columns``).
    values: Columns
    layout: str | None = None  # how the run spread its tests (``timings.layout_of``)
    basis: str = "wall"  # what its samples are: "execution" or "wall" (``timings.judged_on``)
    compile_seconds: float | None = None  # its JAX compilation (None: none known)
    # Per test, compilations of a function it had compiled already (where not 0).
    recompiles: dict[str, int] = field(default_factory=dict)
    # Per test, compilations of the function it compiled most (where over one); None:
    # the run did not count them (folded before 0.4).
    repeats: dict[str, int] | None = None
    # Per test that passed, its peak device memory in bytes, where exact (None: no GPU
    # or TPU reported memory in this run).
    device_memory: dict[str, int] | None = None

    def sample(self, kind: str, row: int) -> float | None:
        """The sample of the id in ``row`` of ``kind`` (None: none in this run)."""
        return self.values.sample(kind, row)


@dataclass(frozen=True)
class Summary:
    """What comparing a run needs of an env's samples beyond the samples themselves,
    derived from them and written with them (docs/format.md, "summary"), so that a
    comparison that can find nothing needs no numpy (``perf.analysis.quiet``).  Rounded as
    written whether read or computed: both comparisons see the same numbers.

    Per test (aligned with ``ids["tests"]``, None: no sample): its median, its centre
    and noise (the median and spread of its log samples: the default rule's z-score
    centre and scale, ``rule.sample_spread``) and its level (the median log of its
    positive samples, what run speeds are measured against); per warm-up its median;
    per id of every kind its largest sample (``peaks``: an id whose samples all stay
    below the rule's ``min_duration`` cannot be a finding unless it reaches it now);
    per run its speed (``perf.analysis.speed``) and its total.  And the steps the runs
    themselves show (``steps``): each test whose last runs sit at a new level, by the
    default rule's change detection (``perf.analysis.changes``), with the runs at that
    level; a comparison judges such a test against them alone.  None: not derived (an
    earlier release's summary), found from the samples when a comparison needs them.
    """

    runs: int
    median: Values
    centre: Values
    noise: Values
    level: Values
    warmup_median: Values
    speeds: list[float]
    peaks: dict[str, Values]
    totals: Values  # per run: its tests and warm-ups summed (None: no sample)
    steps: dict[int, int] | None = None  # a test's row -> the runs at its new level

    def fits(self, env: EnvHistory) -> bool:
        """Whether it was derived from ``env``'s runs as they are (not an older file's)."""
        return (
            self.runs == len(env.runs)
            and len(self.speeds) == len(self.totals) == self.runs
            and len(self.median)
            == len(self.centre)
            == len(self.noise)
            == len(self.level)
            == len(env.ids["tests"])
            and len(self.warmup_median) == len(env.ids["warmup"])
            and all(len(self.peaks.get(kind, ())) == len(env.ids[kind]) for kind in KINDS)
            and (
                self.steps is None
                or all(
                    row < len(self.median) and runs <= self.runs for row, runs in self.steps.items()
                )
            )
        )


@dataclass
class EnvHistory:
    """One hardware key: its ids per kind and its runs, oldest first."""

    test_metric: str = "call"  # what a test's sample measures: "call" or "total"
    ids: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    runs: list[Run] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)  # changes accepted, for review
    _matrices: dict[str, tuple[int, list[Run], Any]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _positions: dict[str, tuple[list[str], dict[str, int]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # Read with the file, or derived once; dropped whenever the samples change.
    _summary: Summary | None = field(default=None, repr=False, compare=False)
    # Each test's wall seconds (setup, call and teardown, compilation included) in the
    # newest run that ran it: what shards are balanced on (``analysis.summary``).  As
    # read: the file's doubles aligned with the tests' ids, decoded when first asked.
    wall_raw: bytes | None = field(default=None, repr=False, compare=False)
    _walls: dict[str, float] | None = field(default=None, repr=False, compare=False)

    def walls(self) -> dict[str, float]:
        """Each test's newest wall seconds (a dict this history keeps and updates)."""
        if self._walls is None:
            raw, self.wall_raw = self.wall_raw, None
            values = as_list(raw) if raw else []
            self._walls = {
                ident: value
                for ident, value in zip(self.ids["tests"], values, strict=False)
                if value is not None
            }
        return self._walls

    def forget_walls(self, ids: list[str]) -> None:
        """The tests ``ids`` are gone from the history: their wall seconds go too."""
        if ids and (self.wall_raw or self._walls):
            walls = self.walls()
            for ident in ids:
                walls.pop(ident, None)

    def wall_column(self) -> str | None:
        """The wall seconds as the file stores them, aligned with the tests' ids (which
        only grow at the end until ``forget_walls`` decodes them)."""
        if self.wall_raw is not None:
            return self.wall_raw.hex()
        if not self._walls:
            return None
        walls = self._walls
        return encode_values([walls.get(ident) for ident in self.ids["tests"]])

    def changed(self) -> None:
        """The samples changed in place: what was derived from them goes."""
        self._matrices.clear()
        self._summary = None

    def stored_summary(self) -> Summary | None:
        """The summary read with the file, if it still fits the runs."""
        summary = self._summary
        return summary if summary is not None and summary.fits(self) else None

    def keep_summary(self, summary: Summary) -> None:
        """Keep the summary derived from these samples (``analysis.summary``) until they
        change."""
        self._summary = summary

    def matrix(self, kind: str) -> tuple[list[str], npt.NDArray[np.float64]]:
        """The ids of ``kind`` and their samples: one row per id, one column per run.

        Built once per kind and set of runs (a comparison asks several times); read-only.
        """
        import numpy as np

        ids = self.ids[kind]
        width = len(ids)
        cached = self._matrices.get(kind)
        if (
            cached is not None
            and cached[0] == width
            and len(cached[1]) == len(self.runs)
            and all(a is b for a, b in zip(cached[1], self.runs, strict=True))
        ):
            return ids, cached[2]
        if not self.runs or not width:
            built = np.zeros((width, len(self.runs)))
        else:
            built = np.full((width, len(self.runs)), np.nan)
            for column, run in enumerate(self.runs):
                raw = run.values.raw(kind)
                if raw is not None:  # the file's doubles, never made into a list
                    values = as_array(raw)
                else:
                    values = np.array(run.values[kind], dtype=np.float64)  # None: NaN
                built[: len(values), column] = values
        built.flags.writeable = False
        self._matrices[kind] = (width, list(self.runs), built)
        return ids, built

    def positions(self, kind: str) -> dict[str, int]:
        """Each id of ``kind`` and its row in ``matrix(kind)`` (built once per id list)."""
        ids = self.ids[kind]
        cached = self._positions.get(kind)
        if cached is not None and cached[0] is ids and len(cached[1]) == len(ids):
            return cached[1]
        index = dict(zip(ids, range(len(ids)), strict=True))
        self._positions[kind] = (ids, index)
        return index

    def run_holding(self, identity: RunIdentity, tests: Mapping[str, float]) -> int | None:
        """The index of the run that is this one already folded in, or None.  Runs that
        both carry an id are the same run when the ids are.  Otherwise (a run written
        before ids): the same start, commit and branch, and to the microsecond the same
        sample of every test both have, one of them long enough to tell runs apart (two
        jobs that started in one second can both time trivial tests at 1 µs)."""
        positions: dict[str, int] | None = None
        for index, run in enumerate(self.runs):
            known = run.identity.same_run(identity)
            if known is not None:
                if known:
                    return index
                continue
            if identity.started is None or not run.identity.same_start(identity):
                continue
            positions = self.positions("tests") if positions is None else positions
            shared = [(positions[t], round(v, 6)) for t, v in tests.items() if t in positions]
            if (
                shared
                and max(v for _, v in shared) >= DISTINCT_SECONDS
                and all(run.sample("tests", row) == v for row, v in shared)
            ):
                return index
        return None

    def without_run(self, index: int) -> EnvHistory:
        """The same key without one of its runs (a copy; this one is left as it is)."""
        return self.with_runs([i for i in range(len(self.runs)) if i != index])

    def with_runs(self, indices: list[int]) -> EnvHistory:
        """The same key with only the runs at ``indices`` (a copy, oldest first)."""
        return EnvHistory(
            self.test_metric, self.ids, [self.runs[i] for i in indices], self.accepted
        )

    def samples(self, kind: str) -> dict[str, list[float]]:
        """Each id's samples, oldest first (for sharding, reports and tests)."""
        result: dict[str, list[float]] = {ident: [] for ident in self.ids[kind]}
        ids = self.ids[kind]
        for run in self.runs:
            for ident, value in zip(ids, run.values[kind], strict=False):
                if value is not None:
                    result[ident].append(value)
        return {ident: values for ident, values in result.items() if values}


@dataclass
class Baseline:
    """A baseline file's hardware keys (or a record or pytest-split map read as one)."""

    envs: dict[str, EnvHistory]
    window: int = DEFAULT_WINDOW
    source: str = "baseline"  # "baseline", "record" or "durations"

    def for_key(self, key: str) -> EnvHistory | None:
        return self.envs.get(key) or self.envs.get(ANY_ENV)

    def share_ids(self, canonical: Mapping[str, str]) -> None:
        """Hold each test id that ``canonical`` has (``reports.collected_ids``) as its
        string there: the same ids, not a second copy of them."""
        for env in self.envs.values():
            for kind in ("tests", "warmup"):
                ids = env.ids[kind]
                ids[:] = map(canonical.get, ids, ids)
