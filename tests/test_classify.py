"""The cross-run flaky rules and the history they read, on hand-written outcome letters:
each boundary of SPEC 6's rule, the ranking, the per-platform share, and how a run's
letters are added to a window."""

from __future__ import annotations

import pytest

from pytest_accel.flaky.classify import (
    BROKEN_RATE,
    FLAKY_MIN_RUNS,
    Classification,
    Share,
    analysis,
    classify,
    classify_all,
    platform_of_key,
)
from pytest_accel.flaky.history import (
    History,
    KeyOutcomes,
    add_run,
    outcome_letter,
    to_json,
)


def test_a_test_that_always_passed_is_ok_with_no_flips() -> None:
    verdict = classify("t", "P" * 30)
    assert verdict == Classification("t", 30, 0, 0, "ok")
    assert verdict.failure_rate == 0.0


def test_two_failures_in_ten_runs_is_flaky() -> None:
    assert classify("t", "PPPPFPPPFP").status == "flaky"


def test_two_failures_in_nine_runs_is_too_little_history_to_say() -> None:
    assert len("PPPFPPPFP") < FLAKY_MIN_RUNS
    assert classify("t", "PPPFPPPFP").status == "ok"


def test_one_failure_in_many_runs_is_not_enough() -> None:
    assert classify("t", "P" * 20 + "F").status == "ok"


def test_two_failures_in_fifty_runs_is_not_above_five_percent() -> None:
    letters = "F" + "P" * 24 + "F" + "P" * 24
    assert classify("t", letters).status == "ok"  # 2/50 = 4%
    assert classify("t", letters[:-10] + "F").status == "flaky"  # 3/41 = 7.3%


def test_failing_ninety_five_percent_of_runs_is_broken_not_flaky() -> None:
    letters = "P" + "F" * 19
    assert letters.count("F") / len(letters) >= BROKEN_RATE
    assert classify("t", letters).status == "broken"
    assert classify("t", "PP" + "F" * 18).status == "flaky"  # 90%: still flaky


def test_a_test_that_needed_reruns_is_flaky_although_it_never_finally_failed() -> None:
    verdict = classify("t", "PPPKPPPPKP")
    assert verdict.status == "flaky"
    assert verdict.failures == 0
    assert verdict.flaky_runs == 2
    assert verdict.failure_rate == 0.0


def test_one_lucky_rerun_in_fifty_runs_is_not_flaky() -> None:
    assert classify("t", "P" * 49 + "K").status == "ok"


def test_a_broken_test_needs_final_failures_not_reruns() -> None:
    assert classify("t", "K" * 20).status == "flaky"


def test_the_flip_rate_counts_changes_and_reruns() -> None:
    assert classify("t", "PFPF").flip_rate == 1.0
    assert classify("t", "PPFF").flip_rate == pytest.approx(1 / 3)
    assert classify("t", "PKPP").flip_rate == pytest.approx(1 / 3)
    assert classify("t", "F").flip_rate == 0.0  # one run: nothing to flip against


def test_the_json_of_a_verdict_rounds_the_rates() -> None:
    verdict = classify("t", "PPFPPPFPPPP")
    assert verdict.to_json() == {
        "test": "t",
        "runs": 11,
        "failures": 2,
        "flaky_runs": 0,
        "failure_rate": round(2 / 11, 4),
        "flip_rate": round(4 / 10, 4),
    }


def test_flaky_tests_come_first_most_unstable_first_then_broken() -> None:
    found = classify_all(
        {
            "b.py::broken": "F" * 20,
            "a.py::steady_fail": "PPPPPFFFFF",
            "c.py::flippy": "PFPFPFPFPF",
            "d.py::fine": "P" * 20,
            "e.py::one_off": "P" * 19 + "F",
        }
    )
    assert [(v.test, v.status) for v in found] == [
        ("c.py::flippy", "flaky"),
        ("a.py::steady_fail", "flaky"),
        ("b.py::broken", "broken"),
    ]


def test_the_platform_of_a_key_is_the_recorded_one_or_the_keys_first_part() -> None:
    assert platform_of_key("tpu/v5e/x8", KeyOutcomes(platform="tpu")) == "tpu"
    assert platform_of_key("gpu/H100/x2", KeyOutcomes()) == "gpu"
    assert platform_of_key("cpu", KeyOutcomes()) == "cpu"


def test_a_share_of_no_tests_is_zero_percent() -> None:
    assert Share("cpu", 0, 0).pct == 0.0
    assert Share("cpu", 40, 2).pct == 5.0


def history_of(envs: dict[str, KeyOutcomes]) -> History:
    return History(window=50, envs=envs)


def test_the_share_is_per_platform_over_every_key_of_that_platform() -> None:
    history = history_of(
        {
            "gpu/A100/x1": KeyOutcomes(
                platform="gpu",
                runs=[{}] * 10,
                tests={"t.py::a": "PFPPPPPPFP", "t.py::b": "P" * 10},
            ),
            "gpu/H100/x1": KeyOutcomes(
                platform="gpu", runs=[{}] * 10, tests={"t.py::a": "P" * 10, "t.py::c": "P" * 10}
            ),
            "cpu/x1": KeyOutcomes(platform="cpu", runs=[{}] * 2, tests={"t.py::a": "PP"}),
        }
    )
    result = analysis(history)
    # gpu knows three tests (a, b, c); a is flaky on the A100 key: one in three.
    assert result["flaky_pct"] == {"cpu": 0.0, "gpu": round(100 / 3, 4)}
    assert [v["test"] for v in result["envs"]["gpu/A100/x1"]["flaky"]] == ["t.py::a"]
    assert result["envs"]["gpu/H100/x1"]["flaky"] == []
    assert result["window"] == 50


def test_a_test_flaky_only_in_the_last_run_counts_toward_the_share() -> None:
    history = history_of(
        {"cpu/x1": KeyOutcomes(platform="cpu", runs=[{}] * 3, tests={"a": "PPK", "b": "PPP"})}
    )
    result = analysis(history)
    assert result["envs"]["cpu/x1"]["flaky_in_last_run"] == ["a"]
    assert result["envs"]["cpu/x1"]["flaky"] == []  # three runs: no cross-run verdict
    assert result["flaky_pct"] == {"cpu": 50.0}


def test_mass_failure_runs_are_counted_per_key() -> None:
    runs = [{"mass_failure": True}, {}, {"mass_failure": False}, {"mass_failure": True}]
    history = history_of({"cpu/x1": KeyOutcomes(platform="cpu", runs=runs, tests={"a": "PP"})})
    assert analysis(history)["envs"]["cpu/x1"]["mass_failure_runs"] == 2


def test_tests_with_no_letters_are_not_in_the_share() -> None:
    history = history_of(
        {"cpu/x1": KeyOutcomes(platform="cpu", runs=[{}], tests={"a": "K", "gone": ""})}
    )
    assert analysis(history)["flaky_pct"] == {"cpu": 100.0}


@pytest.mark.parametrize(
    ("outcome", "earlier", "letter"),
    [
        ("passed", [], "P"),
        ("passed", ["failed"], "K"),
        ("passed", ["error"], "K"),
        ("failed", [], "F"),
        ("error", [], "F"),
        ("skipped", [], None),
        ("xfailed", [], None),
        ("xpassed", [], None),
    ],
)
def test_a_runs_letter_is_its_final_outcome_and_whether_it_needed_a_rerun(
    outcome: str, earlier: list[str], letter: str | None
) -> None:
    assert outcome_letter(outcome, earlier) == letter


def test_adding_runs_keeps_the_last_window_of_letters_and_runs() -> None:
    history = History(window=3)
    for n, letter in enumerate("PPFK"):
        add_run(
            history,
            "cpu/x1",
            platform="cpu",
            outcomes={"a": letter, **({"b": "P"} if n == 3 else {})},
            run={"started": f"run{n}"},
            window=3,
        )
    env = history.envs["cpu/x1"]
    assert env.tests == {"a": "PFK", "b": "P"}
    assert [r["started"] for r in env.runs] == ["run1", "run2", "run3"]


def test_a_smaller_window_trims_every_test_at_once() -> None:
    history = History(window=5)
    add_run(history, "k", platform=None, outcomes={"a": "P"}, run={}, window=5)
    history.envs["k"].tests["old"] = "PPPPP"
    add_run(history, "k", platform=None, outcomes={"a": "F"}, run={}, window=2)
    assert history.envs["k"].tests == {"a": "PF", "old": "PP"}
    assert history.window == 2


def test_the_platform_is_kept_when_a_run_does_not_know_it() -> None:
    history = History()
    add_run(history, "tpu/v5e/x4", platform="tpu", outcomes={}, run={}, window=50)
    add_run(history, "tpu/v5e/x4", platform=None, outcomes={}, run={}, window=50)
    assert history.envs["tpu/v5e/x4"].platform == "tpu"


def test_the_history_json_is_versioned_and_sorted_by_key() -> None:
    history = History(window=7)
    for key in ("tpu/v5e/x4", "cpu/x1"):
        add_run(history, key, platform=key.split("/")[0], outcomes={"a": "P"}, run={}, window=7)
    data = to_json(history)
    assert data["schema"] == "pytest-accel/flaky-history"
    assert data["version"] == 1
    assert data["window"] == 7
    assert list(data["envs"]) == ["cpu/x1", "tpu/v5e/x4"]
    assert data["envs"]["cpu/x1"] == {"platform": "cpu", "runs": [{}], "tests": {"a": "P"}}
