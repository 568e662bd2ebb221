"""The rerun budget and the mass-failure guard, unit by unit: a budget shared through its
file by separate processes, one kept in memory where there is nowhere to share it, and
the mass-failure rule the workers and the history apply."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from pytest_accel.flaky.budget import (
    MASS_FAILURE_MIN_TESTS,
    Budget,
    MassFailure,
    is_mass_failure,
)
from pytest_accel.locking import lock_path


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_ACCEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_budget_in_memory_grants_its_total_then_counts_refusals() -> None:
    budget = Budget(2)
    assert [budget.take() for _ in range(5)] == [True, True, False, False, False]
    assert budget.counts() == (2, 3)
    budget.remove()  # nothing on disk: nothing to do, and no error


def test_a_zero_budget_refuses_the_first_rerun() -> None:
    budget = Budget(0)
    assert budget.take() is False
    assert budget.counts() == (0, 1)


def test_a_shared_budget_lives_in_a_file_that_another_handle_sees(cache_home: Path) -> None:
    owner = Budget.create(3)
    assert owner.path is not None
    assert Path(owner.path).is_relative_to(cache_home)
    worker = Budget(3, owner.path)  # what a worker builds from its workerinput
    assert worker.take()
    assert worker.take()
    assert owner.take()
    assert not worker.take()
    assert owner.counts() == (3, 1)
    assert json.loads(Path(owner.path).read_text()) == {"used": 3, "refused": 1}


def test_removing_a_shared_budget_leaves_neither_the_file_nor_its_lock(cache_home: Path) -> None:
    budget = Budget.create(1)
    assert budget.path is not None
    budget.take()
    path = Path(budget.path)
    assert path.exists()
    budget.remove()
    assert not path.exists()
    assert not lock_path(path).exists()


def test_a_damaged_budget_file_reads_as_nothing_used(cache_home: Path) -> None:
    budget = Budget.create(2)
    assert budget.path is not None
    Path(budget.path).write_text("{not json")
    assert budget.counts() == (0, 0)
    assert budget.take()
    assert budget.counts() == (1, 0)
    Path(budget.path).write_text('{"used": "x", "refused": 0}')
    assert budget.counts() == (0, 0)


def _take_many(path: str, total: int, times: int, results: multiprocessing.Queue[int]) -> None:
    budget = Budget(total, path)
    results.put(sum(budget.take() for _ in range(times)))


@pytest.mark.processes
def test_processes_taking_at_once_never_get_more_than_the_total(cache_home: Path) -> None:
    budget = Budget.create(25)
    assert budget.path is not None
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[int] = context.Queue()
    processes = [
        context.Process(target=_take_many, args=(budget.path, 25, 20, results)) for _ in range(3)
    ]
    for process in processes:
        process.start()
    granted = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert sum(granted) == 25  # 60 asked for, 25 granted: none lost to a race
    assert budget.counts() == (25, 35)


def test_mass_failure_needs_twenty_tests_before_it_trips() -> None:
    guard = MassFailure(pct=30)
    guard.failed.update(f"t{i}" for i in range(MASS_FAILURE_MIN_TESTS - 2))
    guard.executed.update(guard.failed)
    # 19 of 19 failed: too few tests to call it a mass failure.
    assert guard.stops_reruns("t_new") is False
    guard.executed.add("t_new")
    guard.failed.add("t_new")
    assert guard.stops_reruns("t_another") is True
    assert guard.tripped


def test_mass_failure_compares_the_failed_share_with_the_percentage() -> None:
    guard = MassFailure(pct=30)
    guard.executed.update(f"t{i}" for i in range(100))
    guard.failed.update(f"t{i}" for i in range(29))
    assert guard.stops_reruns("t29") is False  # 30 of 100: not above 30%
    guard.failed.add("t29")
    assert guard.stops_reruns("t30") is True  # 31 of 100


def test_once_tripped_the_guard_stays_tripped() -> None:
    guard = MassFailure(pct=10, tripped=True)
    assert guard.stops_reruns("anything")


def test_the_failing_test_counts_once_even_when_already_counted() -> None:
    guard = MassFailure(pct=50)
    guard.executed.update(f"t{i}" for i in range(20))
    guard.failed.update(f"t{i}" for i in range(10))
    assert guard.stops_reruns("t0") is False  # t0 already among the 10 failed: 50%


@pytest.mark.parametrize(
    ("executed", "failed", "pct", "expected"),
    [
        (19, 19, 30.0, False),
        (20, 7, 30.0, True),
        (20, 6, 30.0, False),
        (1000, 301, 30.0, True),
        (1000, 300, 30.0, False),
        (60, 60, 100.0, False),
    ],
)
def test_a_whole_run_is_a_mass_failure_by_the_same_rule(
    executed: int, failed: int, pct: float, expected: bool
) -> None:
    assert is_mass_failure(executed, failed, pct) is expected
