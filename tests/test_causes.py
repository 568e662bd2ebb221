"""One cause, one alarm, as pure functions: a group explained by its tests, a test's
finding confirmed by its group when the run's order differs, and the usual layout."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_accel.perf.analysis.causes import (
    Judged,
    confirmed_by_groups,
    is_explained,
    shifts_of,
    unexplained,
    usual_layout,
)
from pytest_accel.perf.analysis.changes import Steps
from pytest_accel.perf.formats.baseline import KINDS, EnvHistory, Run
from pytest_accel.perf.model.columns import Columns
from pytest_accel.perf.model.findings import Change, Finding
from pytest_accel.perf.model.timings import RunIdentity


def finding(ident: str, baseline: float, current: float, kind: str = "test") -> Finding:
    return Finding(kind, ident, baseline, current, current / baseline, 10)


def change(ident: str, before: float, after: float, kind: str = "test") -> Change:
    return Change(kind, ident, before, after, 3, RunIdentity("abc", "main", None))


def judged(
    ids: list[str],
    findings: Sequence[tuple[str, Finding]] = (),
    changes: Sequence[Change] = (),
) -> Judged:
    size = len(ids)
    empty = np.zeros(size)
    steps = Steps(np.zeros(size, dtype=bool), np.zeros(size, dtype=np.int64), empty, empty)
    nothing = np.zeros(size, dtype=bool)
    series = np.zeros((size, 1))
    return Judged(
        list(ids), empty, empty, empty, series, nothing, nothing, steps, [*findings], [*changes]
    )


def test_half_of_a_shift_the_same_way_explains_it() -> None:
    assert is_explained(1.0, 0.5)
    assert is_explained(-2.0, -1.5)
    assert not is_explained(1.0, 0.49)


def test_a_shift_the_other_way_explains_nothing() -> None:
    assert not is_explained(1.0, -1.0)
    assert not is_explained(-1.0, 2.0)
    assert not is_explained(0.0, 0.0)


def test_shifts_add_up_per_group_from_findings_and_changes() -> None:
    tests = judged(
        ["m.py::C::a", "m.py::C::b", "m.py::f"],
        findings=[
            ("regression", finding("m.py::C::a", 0.1, 0.5)),
            ("improvement", finding("m.py::f", 1.0, 0.4)),
        ],
        changes=[change("m.py::C::b", 0.2, 0.3)],
    )
    group_of = {"m.py::C::a": "m.py::C", "m.py::C::b": "m.py::C", "m.py::f": None}
    shifts = shifts_of([(tests, group_of)])
    assert shifts.keys() == {"m.py::C"}  # a test without a class adds to no class
    assert shifts["m.py::C"] == 0.4 + 0.1


def test_shifts_from_several_sources_add_up() -> None:
    tests = judged(["m.py::f"], findings=[("regression", finding("m.py::f", 1.0, 1.5))])
    classes = judged(["m.py::C"], findings=[("regression", finding("m.py::C", 2.0, 3.0, "class"))])
    shifts = shifts_of([(tests, {"m.py::f": "m.py"}), (classes, {"m.py::C": "m.py"})])
    assert shifts == {"m.py": 0.5 + 1.0}


def test_a_class_whose_test_explains_it_is_not_reported_again() -> None:
    classes = judged(
        ["m.py::C", "m.py::D"],
        findings=[
            ("regression", finding("m.py::C", 1.0, 1.4, "class")),
            ("regression", finding("m.py::D", 1.0, 1.4, "class")),
        ],
        changes=[change("m.py::C", 1.0, 1.4, "class")],
    )
    left = unexplained(classes, {"m.py::C": 0.4})
    assert [f.id for _, f in left.findings] == ["m.py::D"]
    assert left.changes == []


def test_a_group_that_moved_more_than_its_tests_account_for_stays() -> None:
    modules = judged(["m.py"], findings=[("regression", finding("m.py", 2.0, 4.0, "module"))])
    left = unexplained(modules, {"m.py": 0.5})  # a quarter of the 2 s shift
    assert [f.id for _, f in left.findings] == ["m.py"]


def test_in_a_reordered_run_a_test_is_kept_only_where_its_group_moved_too() -> None:
    tests = judged(
        ["m.py::C::first", "m.py::C::other", "n.py::g"],
        findings=[
            ("regression", finding("m.py::C::first", 0.01, 0.5)),  # the compile moved here
            ("regression", finding("n.py::g", 0.2, 0.6)),  # a real slowdown
        ],
    )
    classes = judged(["m.py::C"])  # the class total did not move
    modules = judged(["m.py", "n.py"], findings=[("regression", finding("n.py", 0.3, 0.7))])
    class_of = {"m.py::C::first": "m.py::C", "m.py::C::other": "m.py::C", "n.py::g": None}
    module_of = {"m.py::C::first": "m.py", "m.py::C::other": "m.py", "n.py::g": "n.py"}
    unconfirmed = confirmed_by_groups(tests, [classes, modules], class_of, module_of)
    assert unconfirmed == ["m.py::C::first"]
    assert [f.id for _, f in tests.findings] == ["n.py::g"]


def test_a_groups_change_the_same_way_confirms_a_test() -> None:
    tests = judged(["m.py::t"], findings=[("improvement", finding("m.py::t", 1.0, 0.5))])
    modules = judged(["m.py"], changes=[change("m.py", 2.0, 1.5, "module")])
    assert confirmed_by_groups(tests, [modules], {}, {"m.py::t": "m.py"}) == []
    assert [f.id for _, f in tests.findings] == ["m.py::t"]


def test_a_group_of_fewer_than_three_tests_cannot_confirm() -> None:
    """In a module of one or two tests its total moving is the test itself moving."""
    tests = judged(["m.py::t", "m.py::u"], findings=[("regression", finding("m.py::t", 0.1, 0.5))])
    modules = judged(["m.py"], findings=[("regression", finding("m.py", 0.2, 0.6, "module"))])
    module_of = {"m.py::t": "m.py"}
    assert confirmed_by_groups(tests, [modules], {}, module_of, {"m.py": 2}) == ["m.py::t"]
    tests = judged(["m.py::t"], findings=[("regression", finding("m.py::t", 0.1, 0.5))])
    assert confirmed_by_groups(tests, [modules], {}, module_of, {"m.py": 3}) == []


def test_a_small_class_hands_confirmation_to_its_module() -> None:
    tests = judged(["m.py::C::t"], findings=[("regression", finding("m.py::C::t", 0.1, 0.5))])
    classes = judged(["m.py::C"], findings=[("regression", finding("m.py::C", 0.1, 0.5, "class"))])
    modules = judged(["m.py"])  # the module of 10 tests did not move
    sizes = {"m.py::C": 1, "m.py": 10}
    found = confirmed_by_groups(
        tests, [classes, modules], {"m.py::C::t": "m.py::C"}, {"m.py::C::t": "m.py"}, sizes
    )
    assert found == ["m.py::C::t"]


def test_a_group_that_moved_the_other_way_does_not_confirm() -> None:
    tests = judged(["m.py::t"], findings=[("regression", finding("m.py::t", 0.1, 0.5))])
    modules = judged(["m.py"], findings=[("improvement", finding("m.py", 2.0, 1.0, "module"))])
    assert confirmed_by_groups(tests, [modules], {}, {"m.py::t": "m.py"}) == ["m.py::t"]


def test_a_group_not_compared_whole_cannot_confirm() -> None:
    tests = judged(["m.py::t"], findings=[("regression", finding("m.py::t", 0.1, 0.5))])
    modules = judged([])  # m.py ran only in part here: not compared
    assert confirmed_by_groups(tests, [modules], {}, {"m.py::t": "m.py"}) == ["m.py::t"]


def run(layout: str | None) -> Run:
    return Run(RunIdentity(), Columns({kind: [] for kind in KINDS}), layout)


def test_the_usual_layout_is_the_one_most_runs_had() -> None:
    env = EnvHistory(runs=[run("serial"), run("xdist 2"), run("serial"), run(None)])
    assert usual_layout(env) == "serial"


def test_runs_without_a_layout_say_nothing_about_it() -> None:
    assert usual_layout(EnvHistory(runs=[run(None), run(None)])) is None
    assert usual_layout(EnvHistory()) is None
