"""Which of a baseline's runs a run is compared with: those timed the same way.

Two things decide whether two runs' timings of a test can be compared as they are:

- what a timing is (``timings.judged_on``): execution (JAX compilation taken out) or
  wall.  A baseline folded by an older release holds wall times; a run is judged on
  execution against the runs that have it, and on wall time against the older runs
  while fewer than ``min_samples`` runs have it (a baseline in transition);
- its layout (``timings.layout_of``): serial, ``xdist N``, a shard.  The workers share
  the machine and each process warms up on its own, so a layout is a level of its own.
  Where the baseline has ``min_samples`` runs of this run's layout, this run is compared
  with those alone; with fewer, the single-run rule uses every run (its order rule,
  ``causes.confirmed_by_groups``, covers the switch) but change detection still looks
  only at runs of this layout, so a switch of layout is never a change.

A shard of an ``N``-shard run is laid out as the same shard within merged shards: each
of its tests ran in the same process, after the same tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_accel.perf.model.samples import EnvHistory
from pytest_accel.perf.model.timings import RunTimings, judged_on


def _parts(layout: str) -> tuple[str, frozenset[str]]:
    """``xdist 2, shards 1/2+2/2`` -> (``xdist 2``, {``1/2``, ``2/2``})."""
    workers, _, shards = layout.partition(", ")
    named = shards.partition(" ")[2]
    return workers, frozenset(named.split("+")) if named else frozenset()


def same_layout(one: str | None, other: str | None) -> bool:
    """Whether a test ran in the same process among the same tests in both layouts
    (None: not known, taken as the same, as before layouts were kept)."""
    if one is None or other is None or one == other:
        return True
    (workers, shards), (other_workers, other_shards) = _parts(one), _parts(other)
    if workers != other_workers or not shards or not other_shards:
        return False
    return shards <= other_shards or other_shards <= shards


@dataclass(frozen=True)
class Scope:
    """The baseline runs a comparison used, and why some were left out."""

    run: RunTimings  # the run as judged (``timings.judged_on``)
    env: EnvHistory  # the baseline's runs it is compared with
    left_out_time: int = 0  # runs timed on the other basis
    left_out_layout: int = 0  # runs of other layouts, where enough of its own are there
    # Where too few runs of its own layout are there for the single-run rule: the
    # positions (in ``env.runs``) of those that are, the only ones change detection sees.
    change_runs: tuple[int, ...] | None = None


def scope_of(run: RunTimings, env: EnvHistory, time: str, min_samples: int) -> Scope:
    """The run as judged and the runs of ``env`` it is compared with (module docstring)."""
    judged = judged_on(run, time)
    bases = [other.basis for other in env.runs]
    if (
        judged.basis != run.basis
        and bases.count(judged.basis) < min_samples
        and bases.count(run.basis) > bases.count(judged.basis)
    ):
        judged = run  # a baseline in transition: wall time against its older runs
    kept = [i for i, basis in enumerate(bases) if basis == judged.basis]
    left_out_time = len(env.runs) - len(kept)
    if left_out_time:
        env = env.with_runs(kept)
    alike = [i for i, other in enumerate(env.runs) if same_layout(other.layout, judged.layout)]
    if len(alike) == len(env.runs):
        return Scope(judged, env, left_out_time)
    if len(alike) >= min_samples:
        return Scope(judged, env.with_runs(alike), left_out_time, len(env.runs) - len(alike))
    return Scope(judged, env, left_out_time, change_runs=tuple(alike))


def handed_out_anew(layout: str | None) -> bool:
    """Whether a run laid out so hands its tests to processes anew each time (xdist),
    so that which test pays a first use moves between runs of the same layout too."""
    return layout is not None and layout.startswith("xdist")
