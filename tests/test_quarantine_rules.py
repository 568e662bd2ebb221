"""Quarantine entries as pure values: what an entry covers, when it applies, how a list
is split for today's platform, and the entries proposed from a history's analysis.
(Reading the files, and quarantine in real runs, are in test_input_files.py and
test_flaky.py.)"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from pytest_accel.flaky.quarantine import (
    Entry,
    Matcher,
    Quarantine,
    candidate_keys,
    load_quarantine,
    propose,
    to_json,
)

TODAY = date(2026, 11, 22)


def test_a_node_id_is_covered_by_itself_its_base_its_class_and_its_module() -> None:
    assert list(candidate_keys("t.py::TestA::test_x[gpu-2]")) == [
        "t.py::TestA::test_x[gpu-2]",
        "t.py::TestA::test_x",
        "t.py::TestA",
        "t.py",
    ]


def test_brackets_inside_a_parameter_do_not_split_the_id_early() -> None:
    keys = list(candidate_keys("t.py::test_x[a::b]"))
    assert keys[:2] == ["t.py::test_x[a::b]", "t.py::test_x"]
    assert keys[-1] == "t.py"


def test_a_plain_function_in_a_module() -> None:
    assert list(candidate_keys("dir/t.py::test_x")) == ["dir/t.py::test_x", "dir/t.py"]


def test_the_most_specific_entry_wins_and_the_first_of_duplicates() -> None:
    whole_module = Entry("t.py", reason="module")
    one_test = Entry("t.py::test_x", reason="the test")
    duplicate = Entry("t.py::test_x", reason="later duplicate")
    matcher = Matcher([whole_module, one_test, duplicate])
    assert matcher.match("t.py::test_x[1]") is one_test
    assert matcher.match("t.py::test_y") is whole_module
    assert matcher.match("u.py::test_x") is None
    assert bool(matcher)
    assert not Matcher([])


def test_an_entry_applies_up_to_and_including_its_expiry_day() -> None:
    entry = Entry("t.py::a", expires=TODAY)
    assert not entry.expired(TODAY)
    assert entry.expired(date(2026, 11, 23))
    assert not Entry("t.py::a").expired(date(2999, 1, 1))


def test_an_entry_without_platforms_applies_everywhere_and_gpu_means_cuda_or_rocm() -> None:
    assert Entry("a").applies_on("tpu")
    gpu = Entry("a", platforms=("gpu",))
    assert gpu.applies_on("cuda")
    assert gpu.applies_on("rocm")
    assert not gpu.applies_on("cpu")
    assert Entry("a", platforms=("tpu", "cpu")).applies_on("cpu")


def test_an_entry_describes_itself_with_its_reason_and_issue() -> None:
    assert Entry("t.py::a").describe() == "t.py::a"
    assert Entry("t.py::a", reason="races", issue="#12").describe() == "t.py::a (races; #12)"
    assert Entry("t.py::a", issue="#12").where("q.txt") == "q.txt"
    assert Entry("t.py::a", line=4).where("q.txt") == "q.txt:4"


def test_a_list_splits_into_what_applies_here_today_and_what_expired() -> None:
    quarantine = Quarantine(
        "q.json",
        (
            Entry("a", platforms=("tpu",)),
            Entry("b"),
            Entry("c", expires=date(2026, 1, 1)),
            Entry("d", platforms=("cpu",), expires=date(2027, 1, 1)),
        ),
    )
    applying, expired = quarantine.split("cpu", TODAY)
    assert [e.test for e in applying] == ["b", "d"]
    assert [e.test for e in expired] == ["c"]
    applying, _ = quarantine.split("tpu", TODAY)
    assert [e.test for e in applying] == ["a", "b"]


def test_entries_round_trip_through_the_json_format(tmp_path: Path) -> None:
    entries = [
        Entry("t.py::a", ("tpu",), "races on v5e", "#42", date(2027, 1, 31)),
        Entry("t.py::b"),
    ]
    data = to_json(entries)
    assert data["schema"] == "pytest-accel/quarantine"
    assert data["entries"][0] == {
        "test": "t.py::a",
        "platforms": ["tpu"],
        "reason": "races on v5e",
        "issue": "#42",
        "expires": "2027-01-31",
    }
    path = tmp_path / "q.json"
    path.write_text(json.dumps(data))
    loaded = load_quarantine(path, ["cpu", "tpu"])
    assert [(e.test, e.platforms, e.reason, e.issue, e.expires) for e in loaded.entries] == [
        ("t.py::a", ("tpu",), "races on v5e", "#42", date(2027, 1, 31)),
        ("t.py::b", (), None, None, None),
    ]


def analysis_of(envs: dict[str, dict[str, object]]) -> dict[str, object]:
    return {"window": 50, "envs": envs, "flaky_pct": {}}


def verdict(test: str, failures: int = 3, runs: int = 20, flaky_runs: int = 1) -> dict[str, object]:
    return {
        "test": test,
        "runs": runs,
        "failures": failures,
        "flaky_runs": flaky_runs,
        "failure_rate": failures / runs,
        "flip_rate": 0.25,
    }


def test_proposals_cover_the_flaky_tests_on_the_platforms_they_were_flaky_on() -> None:
    analysis = analysis_of(
        {
            "tpu/v5e/x8": {"platform": "tpu", "flaky": [verdict("t.py::b"), verdict("t.py::a")]},
            "gpu/H100/x2": {"platform": "gpu", "flaky": [verdict("t.py::a")]},
            "cpu/x1": {"platform": "cpu", "flaky": []},
        }
    )
    proposed = propose(analysis, expires=date(2026, 12, 22))
    assert [(e.test, e.platforms) for e in proposed] == [
        ("t.py::a", ("tpu", "gpu")),
        ("t.py::b", ("tpu",)),
    ]
    assert proposed[0].expires == date(2026, 12, 22)
    assert proposed[0].reason == (
        "flaky on tpu/v5e/x8: failed 3 of 20 run(s), flaky in 1, flip rate 0.25"
    )


def test_nothing_flaky_proposes_nothing() -> None:
    assert propose(analysis_of({"cpu/x1": {"platform": "cpu", "flaky": []}}), TODAY) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t.py::a\n", ["t.py::a"]),
        ("# a comment\n\nt.py::a  # trailing comment\n", ["t.py::a"]),
        ("t.py::test_x[#1]\n", ["t.py::test_x[#1]"]),
        ("\ufefft.py::a\r\nt.py::b\r\n", ["t.py::a", "t.py::b"]),
    ],
)
def test_a_plain_text_list_is_one_node_id_a_line(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = tmp_path / "quarantine.txt"
    path.write_bytes(text.encode("utf-8"))
    assert [e.test for e in load_quarantine(path).entries] == expected
