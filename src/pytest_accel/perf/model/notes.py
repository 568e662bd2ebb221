"""What a reader must know about how a run was judged, as data.

Which notes a comparison calls for is decided here, from its fields and verdicts
(``notes_of``, ``set_aside_of``); ``perf.output`` only words each kind, one wording per
class, so the terminal, the job summary and the HTML report say the same thing."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_accel.perf.model.findings import Change, Comparison, MemoryVerdict, RunnerLoad


@dataclass(frozen=True)
class Interrupted:
    """The run was interrupted: a part of the suite, compared as it is; no gate passes."""


@dataclass(frozen=True)
class Learning:
    """The baseline has fewer runs of the key than a verdict needs."""

    runs: int
    needed: int
    key: str


@dataclass(frozen=True)
class Busy:
    """The runner was busy: what was waited, and the threshold widened for it."""

    load: RunnerLoad


@dataclass(frozen=True)
class BasisLeftOut:
    """Baseline runs timed on the other basis (wall or execution time), left out."""

    time: str  # the basis judged on
    runs: int


@dataclass(frozen=True)
class LayoutsLeftOut:
    """Baseline runs laid out unlike this one, left out (enough of its own were there)."""

    layout: str
    runs: int


@dataclass(frozen=True)
class FewOfLayout:
    """Too few baseline runs laid out as this one: tests judged only where their class
    or module moved too, the groups not judged."""

    layout: str
    usual: str | None  # the layout most baseline runs had


@dataclass(frozen=True)
class ChangesOfLayout:
    """Changes over runs judged on the baseline runs of this layout only (``runs``; 0:
    none was, and changes were not judged)."""

    layout: str
    runs: int


@dataclass(frozen=True)
class TracingNotJudged:
    """JAX's tracing not judged: which test traces a shared function first depends on
    a layout too few baseline runs had."""

    layout: str


@dataclass(frozen=True)
class RecompilesAcross:
    """Recompilations judged on each test's most compiled function, against runs of
    other layouts."""

    layout: str
    runs: int


@dataclass(frozen=True)
class RecompilesNotJudged:
    """Recompilations not judged: too few baseline runs of this layout (``runs``)."""

    layout: str
    runs: int
    needed: int


@dataclass(frozen=True)
class DeviceMemory:
    """The run's highest device-memory peak, and whether device memory was judged."""

    memory: MemoryVerdict
    needed: int


@dataclass(frozen=True)
class SteppedBetweenRuns:
    """Steps that began between two runs of one commit: the runner moved, not the code."""

    steps: tuple[Change, ...]


@dataclass(frozen=True)
class WarmupNotJudged:
    """Tests that ran first in their process here, and in no baseline run."""

    tests: tuple[str, ...]


@dataclass(frozen=True)
class OrderUnconfirmed:
    """Tests that moved while their class and module held, set aside: a run laid out
    unlike its baseline's (``layout``), or xdist's order (``layout`` None)."""

    tests: tuple[str, ...]
    layout: str | None
    usual: str | None


@dataclass(frozen=True)
class TracingMoved:
    """Tests and modules whose tracing rose where others' fell by as much, set aside."""

    tests: tuple[str, ...]


Note = (
    Interrupted
    | Learning
    | Busy
    | BasisLeftOut
    | LayoutsLeftOut
    | FewOfLayout
    | ChangesOfLayout
    | TracingNotJudged
    | RecompilesAcross
    | RecompilesNotJudged
    | DeviceMemory
    | SteppedBetweenRuns
)
SetAside = WarmupNotJudged | OrderUnconfirmed | TracingMoved


def notes_of(comparison: Comparison) -> list[Note]:
    """How ``comparison`` judged the run where that is not simply every baseline run of
    its key: what was left out, not judged, or judged otherwise, in the order read."""
    c = comparison
    notes: list[Note] = []
    if c.interrupted:
        notes.append(Interrupted())
    if c.timing.runs is not None and c.timing.runs < c.timing.min_samples:
        notes.append(Learning(c.timing.runs, c.timing.min_samples, c.key))
    if c.load.busy:
        notes.append(Busy(c.load))
    if c.timing.left_out_time:
        notes.append(BasisLeftOut(c.timing.time, c.timing.left_out_time))
    # Its own layout, which every run has; "an unknown layout" only for a record from
    # before layouts were kept.
    layout = c.timing.layout or c.timing.run_layout or "an unknown layout"
    if c.timing.left_out_layout:
        notes.append(LayoutsLeftOut(layout, c.timing.left_out_layout))
    if c.timing.layout is not None:
        notes.append(FewOfLayout(layout, c.timing.baseline_layout))
    if c.timing.change_runs is not None:
        notes.append(ChangesOfLayout(layout, c.timing.change_runs))
    if c.compilation is not None and c.timing.layout is not None:
        notes.append(TracingNotJudged(layout))
    if c.recompiles.across:
        notes.append(RecompilesAcross(layout, c.recompiles.runs))
    if c.timing.time == "execution" and not c.recompiles.judged:
        notes.append(RecompilesNotJudged(layout, c.recompiles.runs, c.timing.min_samples))
    if c.device_memory.peak is not None:
        notes.append(DeviceMemory(c.device_memory, c.timing.min_samples))
    if c.timing.unattributed:
        notes.append(SteppedBetweenRuns(tuple(c.timing.unattributed)))
    return notes


def set_aside_of(comparison: Comparison) -> list[SetAside]:
    """What the comparison found and set aside as no finding, with why: the terminal's
    notes beneath its rows."""
    c = comparison
    found: list[SetAside] = []
    if c.timing.warmup:
        found.append(WarmupNotJudged(tuple(c.timing.warmup)))
    if c.timing.unconfirmed:
        found.append(
            OrderUnconfirmed(tuple(c.timing.unconfirmed), c.timing.layout, c.timing.baseline_layout)
        )
    if c.tracing.moved:
        found.append(TracingMoved(tuple(c.tracing.moved)))
    return found
