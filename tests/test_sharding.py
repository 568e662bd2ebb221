"""Shard plans as pure functions: the ``K/N`` spec, units, weights and the
longest-first plan, on hand-made durations whose best split is known."""

from __future__ import annotations

import itertools
import random

import pytest

from pytest_accel.scaleout.sharding import (
    Plan,
    ShardSpecError,
    Unit,
    groups_from_node_ids,
    make_units,
    parse_shard,
    plan,
    plan_tests,
    unit_of,
    weights_for,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("1/4", (1, 4)), (" 2 / 3 ", (2, 3)), ("1/1", (1, 1)), ("9999999/9999999", (9999999,) * 2)],
)
def test_a_shard_spec_is_k_of_n(spec: str, expected: tuple[int, int]) -> None:
    assert parse_shard(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0/4", "'0/4': K must be between 1 and N"),
        ("5/4", "'5/4': K must be between 1 and N"),
        ("1/0", "'1/0': K must be between 1 and N, and N at least 1"),
        ("²/4", "'²/4' is not K/N (e.g. 2/4)"),
        ("1-4", "'1-4' is not K/N"),
        ("", "'' is not K/N"),
        ("1/" + "9" * 5000, "is not K/N"),
    ],
)
def test_a_bad_shard_spec_says_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ShardSpecError) as raised:
        parse_shard(spec)
    assert message in str(raised.value)
    assert len(str(raised.value)) < 120  # a 5000-digit value is cut short


def test_a_test_is_its_own_unit_by_test_or_without_a_group() -> None:
    assert unit_of("t.py::C::test", "t.py::C", "test") == "t.py::C::test"
    assert unit_of("t.py::C::test", "t.py::C", "class") == "t.py::C"
    assert unit_of("t.py::test", None, "class") == "t.py::test"
    assert unit_of("t.py::test", "t.py", "module") == "t.py"


def test_weights_with_nothing_known_are_one_each() -> None:
    assert weights_for(["a", "b"], {}) == {"a": 1.0, "b": 1.0}


def test_a_skipped_test_does_not_count_toward_the_median_of_the_unknown() -> None:
    weights = weights_for(["a", "b", "c", "d"], {"a": 1.0, "b": 100.0, "c": 3.0}, zero=["b"])
    assert weights == {"a": 1.0, "b": 0.0, "c": 3.0, "d": 2.0}


def test_node_ids_give_class_and_module() -> None:
    groups = groups_from_node_ids(
        ["t.py::test_a", "t.py::C::test_b", "t.py::C::D::test_c[x::y]", "dir/u.py::test_d"]
    )
    assert groups == {
        "t.py::test_a": (None, "t.py"),
        "t.py::C::test_b": ("t.py::C", "t.py"),
        "t.py::C::D::test_c[x::y]": ("t.py::C::D::test_c[x", "t.py"),
        "dir/u.py::test_d": (None, "dir/u.py"),
    }


def test_units_keep_the_tests_order_and_sum_their_weights() -> None:
    tests = ["m.py::C::a", "m.py::C::b", "m.py::f", "m.py::C::c"]
    groups = {t: ("m.py::C" if "::C::" in t else None) for t in tests}
    weights = {"m.py::C::a": 1.0, "m.py::C::b": 2.0, "m.py::f": 4.0, "m.py::C::c": 8.0}
    units = make_units(tests, groups, weights, "class")
    assert units == [
        Unit("m.py::C", ("m.py::C::a", "m.py::C::b", "m.py::C::c"), 11.0),
        Unit("m.py::f", ("m.py::f",), 4.0),
    ]


def units_of(weights: list[float]) -> list[Unit]:
    return [Unit(f"t{i:03d}", (f"t{i:03d}",), w) for i, w in enumerate(weights)]


def best_makespan(weights: list[float], count: int) -> float:
    """The optimal largest shard, by trying every assignment (small inputs only)."""
    best = float("inf")
    for assignment in itertools.product(range(count), repeat=len(weights)):
        loads = [0.0] * count
        for weight, shard in zip(weights, assignment, strict=True):
            loads[shard] += weight
        best = min(best, max(loads))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_plan_is_within_four_thirds_of_the_best_possible(seed: int) -> None:
    rng = random.Random(seed)
    weights = [round(rng.lognormvariate(0, 1), 3) for _ in range(8)]
    made = plan(units_of(weights), 3)
    assert max(made.loads()) <= best_makespan(weights, 3) * 4 / 3 + 1e-9


def test_the_textbook_case_where_longest_first_is_not_optimal_stays_within_its_bound() -> None:
    # Graham's example: LPT gives 11 where 9 is possible (11/9 < 4/3).
    weights = [5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 3.0]
    made = plan(units_of(weights), 3)
    assert max(made.loads()) == 11.0
    assert best_makespan(weights, 3) == 9.0


def test_every_test_lands_in_exactly_one_shard() -> None:
    weights = [float(i % 7 + 1) for i in range(50)]
    made = plan(units_of(weights), 4)
    everything = [t for index in range(4) for t in made.tests(index)]
    assert sorted(everything) == sorted(f"t{i:03d}" for i in range(50))


def test_the_plan_does_not_depend_on_the_order_units_arrive_in() -> None:
    units = units_of([3.0, 1.0, 2.0, 2.0, 1.0, 3.0, 0.5])
    shuffled = list(units)
    random.Random(4).shuffle(shuffled)
    assert plan(units, 3) == plan(shuffled, 3)


def test_equal_weights_share_out_by_count() -> None:
    made = plan(units_of([1.0] * 10), 3)
    assert sorted(len(shard) for shard in made.shards) == [3, 3, 4]


def test_zero_weight_units_still_fill_empty_shards_first() -> None:
    made = plan(units_of([0.0] * 4), 4)
    assert [len(shard) for shard in made.shards] == [1, 1, 1, 1]


def test_more_shards_than_units_leaves_the_rest_empty() -> None:
    made = plan(units_of([2.0, 1.0]), 4)
    assert [len(shard) for shard in made.shards] == [1, 1, 0, 0]
    assert made.imbalance() == pytest.approx(2.0 / (3.0 / 4))


def test_imbalance_is_largest_over_ideal_and_one_for_nothing_to_do() -> None:
    assert Plan(((Unit("a", ("a",), 3.0),), (Unit("b", ("b",), 1.0),))).imbalance() == 1.5
    assert Plan(((), ())).imbalance() == 1.0
    assert Plan(()).imbalance() == 1.0


def test_planning_known_tests_by_class_keeps_each_class_whole() -> None:
    durations = {
        "a.py::A::t1": 5.0,
        "a.py::A::t2": 5.0,
        "a.py::f": 4.0,
        "b.py::B::t1": 3.0,
        "b.py::g": 3.0,
    }
    made = plan_tests(durations, groups_from_node_ids(durations), "class", 2)
    placed = {t: i for i in range(2) for t in made.tests(i)}
    assert placed["a.py::A::t1"] == placed["a.py::A::t2"]
    assert sorted(made.loads()) == [10.0, 10.0]


def test_planning_known_tests_by_module_keeps_each_module_whole() -> None:
    durations = {"a.py::t1": 1.0, "a.py::t2": 1.0, "b.py::t1": 1.5, "c.py::t": 0.5}
    made = plan_tests(durations, groups_from_node_ids(durations), "module", 2)
    placed = {t: i for i in range(2) for t in made.tests(i)}
    assert placed["a.py::t1"] == placed["a.py::t2"]
    assert sorted(made.loads()) == [2.0, 2.0]
