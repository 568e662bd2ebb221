"""What the timing feature made of one session, built once at its end (``PerfPlugin``).

The record writer (``TimingResult.record``), the terminal, the warnings, the
job summary and the HTML report (``report.data.view_of_session``) render this one
result: none of them folds the reports, groups the classes and modules, or compares
the run again, so none can say something another does not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_accel.perf.formats.record import (
    compilation_json,
    encode_record,
    judgement_json,
    record_head,
)

if TYPE_CHECKING:
    from pytest_accel.hardware.detection import Detection
    from pytest_accel.outcomes import RunColumns
    from pytest_accel.perf.analysis.rule import Rule
    from pytest_accel.perf.formats.baseline import Baseline
    from pytest_accel.perf.formats.record import RunInfo
    from pytest_accel.perf.model.findings import Comparison
    from pytest_accel.perf.model.overrides import Override
    from pytest_accel.perf.model.table import GroupSections, RunCompilation, TimingTable
    from pytest_accel.perf.model.timings import RunTimings
    from pytest_accel.session_end import RunResult


@dataclass(frozen=True)
class TimingResult:
    key: str  # the hardware key the run is kept under
    table: TimingTable  # the session's reports, folded once (``perf.collector``)
    warmup: list[bool]  # per test: it paid its process's warm-up
    totals: list[float]  # per test: setup + call + teardown of its last attempt
    groups: GroupSections  # the classes and the modules, computed once
    info: RunInfo  # the run: its start, duration, commit, shard, workers, exit status
    detection: Detection  # the hardware it ran on
    frameworks: Mapping[str, str]  # jax, torch, ... as installed
    pytest_version: str
    rule: Rule  # what the run was judged by, with ``overrides`` and ``new_slow``
    # The run as compared and folded into the baseline; None when nothing compares it
    # and no other feature reads it (a record alone).
    run: RunTimings | None = None
    overrides: Mapping[str, Override] = field(default_factory=dict)  # each @pytest.mark.perf
    new_slow: float = 1.0  # --perf-new-slow
    comparison: Comparison | None = None  # None without a baseline
    compilation: RunCompilation | None = None  # with JAX: the run's
    # The other features' results for the run (``pytest_accel_run_result``: cost,
    # coverage, selection), typed, as they were built: what the page and plugins read.
    results: tuple[RunResult, ...] = ()
    # Their record sections, encoded once as this result was completed (a section that
    # could not be encoded is left out, and the run says why): what the record holds.
    sections: Mapping[str, Any] = field(default_factory=dict)
    # The run's tests as cost, coverage and the HTML report read them; None when none
    # of them is on.
    columns: RunColumns | None = None
    # The baseline as read, before this run was folded in: kept only for the HTML
    # report (else it is let go before the record is written, the memory peak).
    baseline: Baseline | None = None
    baseline_missing: bool = False  # --perf-baseline names no file yet (a cold cache)
    # Why compilation was not measured where the suite has jax (its monitoring failed).
    compile_problem: str | None = None
    memory_problem: str | None = None  # why device memory was not (the meter's note)
    # The ``::warning`` workflow commands of the alarms, as GitHub Actions is shown them
    # (the run prints them there; the store keeps them for a runner outside the pod).
    annotations: tuple[str, ...] = ()

    def head(self) -> dict[str, Any]:
        """Everything in the record but its tests, classes and modules, encoded now."""
        head = record_head(
            self.info, self.detection, self.key, self.frameworks, self.pytest_version
        )
        # What the run was judged by, so that a command reading the record judges alike.
        head["judgement"] = judgement_json(asdict(self.rule), self.new_slow, self.overrides)
        if self.comparison is not None:
            head["comparison"] = self.comparison.to_json()
        if self.compilation is not None:
            head["compilation"] = compilation_json(self.compilation)
        return {**head, **self.sections}

    def record(self) -> Iterator[bytes]:
        """The record of this run, as JSON pieces (``formats.record.encode_record``)."""
        return encode_record(
            self.table, self.head(), warmup=self.warmup, totals=self.totals, groups=self.groups
        )
