"""Full garbage collections placed on the call phase they started in: the callback's
bookkeeping and the matching, on hand-made times (the end-to-end test, serial and under
xdist, is in test_comparison.py)."""

from __future__ import annotations

import gc
import threading

import pytest

from pytest_accel.perf.pauses import FullCollections, Pause
from pytest_accel.perf.pauses import attribute as attribute_by_index


def attribute(pauses: list[Pause], phases: list[tuple[float, float, int]]) -> dict[int, float]:
    """The phases as (start, stop, key), sorted by start; the seconds per key."""
    starts = [start for start, _, _ in phases]
    stops = [stop for _, stop, _ in phases]
    found = attribute_by_index(pauses, starts, stops.__getitem__)
    return {phases[at][2]: seconds for at, seconds in found.items()}


def test_a_pause_inside_a_call_goes_to_that_test() -> None:
    calls = [(10.0, 10.5, 0), (11.0, 12.0, 1), (12.5, 13.0, 2)]
    assert attribute([(11.2, 0.1)], calls) == {1: 0.1}


def test_pauses_in_one_call_add_up() -> None:
    calls = [(10.0, 12.0, 7)]
    assert attribute([(10.1, 0.1), (11.0, 0.25)], calls) == {7: pytest.approx(0.35)}


def test_a_pause_between_calls_belongs_to_no_test() -> None:
    # In a setup, a teardown or pytest's own work between tests: not a test's call.
    calls = [(10.0, 10.5, 0), (11.0, 12.0, 1)]
    assert attribute([(10.7, 0.2)], calls) == {}


def test_a_pause_before_the_first_call_belongs_to_no_test() -> None:
    assert attribute([(5.0, 0.2)], [(10.0, 10.5, 0)]) == {}


def test_a_pause_at_the_very_start_or_end_of_a_call_counts() -> None:
    calls = [(10.0, 10.5, 0), (11.0, 12.0, 1)]
    assert attribute([(10.0, 0.1), (12.0, 0.1)], calls) == {0: 0.1, 1: 0.1}


def test_no_calls_or_no_pauses_give_nothing() -> None:
    assert attribute([(1.0, 0.1)], []) == {}
    assert attribute([], [(0.0, 1.0, 0)]) == {}


def test_only_full_collections_are_noted_with_their_wall_clock_start(
    pytestconfig: pytest.Config,
) -> None:
    collections = FullCollections(pytestconfig)
    collections._callback("start", {"generation": 0})
    collections._callback("stop", {"generation": 0})
    assert collections.pauses == []
    collections._callback("start", {"generation": 2})
    collections._callback("stop", {"generation": 2})
    assert len(collections.pauses) == 1
    when, seconds = collections.pauses[0]
    assert when > 1_700_000_000  # time.time(), as pytest's reports give start and stop
    assert 0 <= seconds < 1


def test_a_stop_without_a_start_is_ignored(pytestconfig: pytest.Config) -> None:
    collections = FullCollections(pytestconfig)
    collections._callback("stop", {"generation": 2})
    assert collections.pauses == []


def test_only_the_tests_threads_collections_are_noted(pytestconfig: pytest.Config) -> None:
    """Another thread's collection held the tests' thread up only if it needed the
    interpreter meanwhile, which nothing here can tell: it is not taken out."""
    collections = FullCollections(pytestconfig)
    collections.install()
    try:
        elsewhere = threading.Thread(target=gc.collect)
        elsewhere.start()
        elsewhere.join()
        assert collections.pauses == []
        gc.collect()  # this thread's, which ran the loop here
        assert len(collections.pauses) == 1
        # The loop run from another thread: that thread's collections count.
        runner = threading.Thread(target=lambda: (collections.pytest_runtestloop(), gc.collect()))
        runner.start()
        runner.join()
        gc.collect()
        assert len(collections.pauses) == 2
    finally:
        collections.pytest_unconfigure()


def test_installed_it_sees_a_real_full_collection(pytestconfig: pytest.Config) -> None:
    collections = FullCollections(pytestconfig)
    collections.install()
    try:
        gc.collect()
    finally:
        collections.pytest_unconfigure()
    assert len(collections.pauses) == 1
    assert collections._callback not in gc.callbacks


def test_a_pause_goes_to_the_phase_of_its_own_process_not_one_started_later_elsewhere() -> None:
    # Two workers' phases interleave: gw1's phase started after gw0's pause began.
    starts, stops = [10.0, 10.2, 11.0], [10.5, 10.3, 12.0]
    stop, owner = stops.__getitem__, ["gw0", "gw1", "gw1"].__getitem__
    assert attribute_by_index([(10.25, 0.1)], starts, stop, owner, "gw0") == {0: 0.1}
    assert attribute_by_index([(10.25, 0.1)], starts, stop, owner, "gw1") == {1: 0.1}
    assert attribute_by_index([(10.6, 0.1)], starts, stop, owner, "gw0") == {}
