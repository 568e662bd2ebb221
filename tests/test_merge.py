"""Merging shard records as a function over records written by the plugin's own encoder
(``bench/synthetic.py``): the union of the tests, classes and modules recombined, one
hardware key at a time, and the later of a duplicated test.  (The command line, on
records from real sharded runs, is tested in test_scaling.py and test_cli.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from bench import synthetic
from pytest_accel.perf.formats.merge import MergeError, merge_records
from pytest_accel.perf.formats.record import check_record


def shard(
    calls: dict[str, float], *, key: str = "cpu/x1", name: str = "1/2", started: float = 0.0
) -> dict[str, Any]:
    groups = {
        nodeid: (
            nodeid.rsplit("::", 1)[0] if nodeid.count("::") > 1 else None,
            nodeid.split("::")[0],
        )
        for nodeid in calls
    }
    data = synthetic.record(
        calls, key=key, groups=groups, shard=name, started=synthetic.STARTED + started
    )
    return check_record(f"shard-{name}.json", data)


def calls_in(record: dict[str, Any]) -> dict[str, float]:
    return dict(zip(record["tests"]["id"], record["tests"]["call"], strict=True))


def test_two_shards_merge_into_the_union_of_their_tests() -> None:
    first = shard({"a.py::test_1": 0.1, "a.py::test_2": 0.2}, name="1/2")
    second = shard({"b.py::test_3": 0.3}, name="2/2", started=10.0)
    [merged] = merge_records([("s1.json", first), ("s2.json", second)])
    assert merged.key == "cpu/x1"
    assert calls_in(merged.record) == {
        "a.py::test_1": 0.1,
        "a.py::test_2": 0.2,
        "b.py::test_3": 0.3,
    }
    assert merged.record["modules"]["id"] == ["a.py", "b.py"]
    assert merged.record["modules"]["total"] == pytest.approx([0.3, 0.3])
    check_record("merged.json", merged.record)  # what it writes reads back as a record


def test_a_class_split_over_shards_is_added_up() -> None:
    first = shard({"a.py::C::test_1": 0.5}, name="1/2")
    second = shard({"a.py::C::test_2": 0.25}, name="2/2", started=5.0)
    [merged] = merge_records([("s1.json", first), ("s2.json", second)])
    classes = dict(
        zip(merged.record["classes"]["id"], merged.record["classes"]["total"], strict=True)
    )
    assert classes == {"a.py::C": pytest.approx(0.75)}
    assert merged.record["classes"]["tests"] == [2]


def test_a_merged_record_has_an_id_of_its_shards_the_same_every_time() -> None:
    first = shard({"t.py::test_a": 0.1}, name="1/2")
    second = shard({"t.py::test_b": 0.2}, name="2/2", started=5.0)
    first["run"]["id"], second["run"]["id"] = "a" * 16, "b" * 16
    [merged] = [m.record for m in merge_records([("s1.json", first), ("s2.json", second)])]
    [again] = [m.record for m in merge_records([("s2.json", second), ("s1.json", first)])]
    assert merged["run"]["id"] == again["run"]["id"]
    assert merged["run"]["id"] not in ("a" * 16, "b" * 16)
    [other] = merge_records(
        [("s1.json", first), ("s3.json", {**second, "run": {**second["run"], "id": "c" * 16}})]
    )
    assert other.record["run"]["id"] != merged["run"]["id"]
    assert [part["id"] for part in merged["run"]["merged_from"]] == ["a" * 16, "b" * 16]
    [itself] = merge_records([("s1.json", first)])
    assert itself.record["run"]["id"] == "a" * 16  # a record merged into itself is itself
    # A shard written before ids: the merged record has none (start and samples tell).
    del second["run"]["id"]
    [old] = merge_records([("s1.json", first), ("s2.json", second)])
    assert "id" not in old.record["run"]


def test_different_hardware_is_refused_unless_kept_apart() -> None:
    cpu = shard({"a.py::t": 0.1}, key="cpu/x1")
    tpu = shard({"a.py::t": 0.2}, key="tpu/TPU v6 lite/x8")
    with pytest.raises(MergeError) as raised:
        merge_records([("cpu.json", cpu), ("tpu.json", tpu)])
    message = str(raised.value)
    assert "different hardware" in message
    assert "'cpu/x1': cpu.json" in message
    assert "--by-env" in message
    merged = merge_records([("cpu.json", cpu), ("tpu.json", tpu)], by_env=True)
    assert sorted(m.key for m in merged) == ["cpu/x1", "tpu/TPU v6 lite/x8"]


def test_nothing_to_merge_is_an_error() -> None:
    with pytest.raises(MergeError, match="no records to merge"):
        merge_records([])


def test_a_test_in_two_records_keeps_the_later_run_and_says_so() -> None:
    early = shard({"a.py::t": 0.1}, name="1/2")
    late = shard({"a.py::t": 0.4}, name="1/2", started=100.0)
    [merged] = merge_records([("late.json", late), ("early.json", early)])
    assert calls_in(merged.record) == {"a.py::t": 0.4}
    assert merged.notes == ["a.py::t: in early.json and late.json; kept late.json (the later run)"]


def test_one_record_merges_into_itself() -> None:
    only = shard({"a.py::t": 0.1, "a.py::u": 0.2})
    [merged] = merge_records([("only.json", only)])
    assert calls_in(merged.record) == calls_in(only)


def test_a_record_without_the_rule_it_was_judged_by_leaves_the_merge_without_one() -> None:
    """A record of 0.3 keeps no ``judgement``: the merge cannot say what the whole suite
    was judged by, and says why it keeps none (shards judged alike: test_scaling.py)."""
    rule = {"rule": {"threshold": 1.5}, "new_slow": 1.0, "overrides": {}}
    first = {**shard({"a.py::test_1": 0.1}, name="1/2"), "judgement": rule}
    older = shard({"b.py::test_2": 0.2}, name="2/2", started=10.0)
    [merged] = merge_records([("s1.json", first), ("s2.json", older)])
    assert "judgement" not in merged.record
    assert merged.notes == [
        "s2.json keeps no rule its run was judged by (a record from before 0.4): the merged"
        " record keeps none, and commands judge it by the default rule"
    ]
    [alike] = merge_records([("s1.json", first), ("s2.json", {**older, "judgement": rule})])
    assert alike.record["judgement"] == rule
    assert alike.notes == []
