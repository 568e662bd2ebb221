"""The baseline file: version 3 (runs with their identity, a column of samples per run
and kind), what it accepts as input (version 2's lists, version 1, a record, a
pytest-split map), the rolling window, parallel updates, malformed files, and a cold
cache."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench import synthetic
from pytest_accel.files import InputError
from pytest_accel.perf.analysis.summary import expected_durations, summary_of
from pytest_accel.perf.formats.baseline import (
    BASELINE_SCHEMA,
    Baseline,
    EnvHistory,
    add_run,
    load_baseline,
    parse_baseline,
)
from pytest_accel.perf.formats.record import check_record, timings
from pytest_accel.perf.model import columns
from pytest_accel.perf.offline import baseline_json
from tests.fakesys import run_concurrently

SLEEPY_SUITE = """
import os
import time

def test_a():
    time.sleep(float(os.environ.get("SLEEP_A", "0.2")))

def test_b():
    pass
"""


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def samples(column: str) -> list[float | None]:
    """A version 4 column (hexadecimal) as numbers (None: no sample)."""
    return columns.as_list(columns.decode(column))


def b64(*values: float) -> str:
    import base64
    import struct

    return base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode()


def schema() -> dict[str, Any]:
    from importlib import resources

    text = resources.files("pytest_accel").joinpath("schemas/baseline.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def build_baseline(pytester: pytest.Pytester, runs: int = 5) -> Path:
    for _ in range(runs):
        result = pytester.runpytest("--perf-baseline=baseline.json", "--perf-update-baseline")
        result.assert_outcomes(passed=2)
    return pytester.path / "baseline.json"


def run_of(calls: dict[str, float], key: str = "cpu/x1", commit: str = "c0", **kw: Any) -> Any:
    data = synthetic.record(calls, key=key, **kw)
    data["run"]["commit"] = commit
    return timings(check_record("r.json", data))


def test_five_runs_make_a_baseline_of_five_runs_with_their_identity(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_sleepy=SLEEPY_SUITE)
    monkeypatch.setenv("GITHUB_SHA", "abc1234")
    monkeypatch.setenv("GITHUB_REF_NAME", "main")
    data = load(build_baseline(pytester))
    jsonschema.validate(data, schema())
    assert (data["schema"], data["version"], data["window"]) == (BASELINE_SCHEMA, 4, 20)
    env = data["envs"]["cpu/x1"]
    assert env["tests"] == ["test_sleepy.py::test_b"]
    assert env["warmup"] == ["test_sleepy.py::test_a"]  # the first test of every run
    assert len(env["runs"]) == 5
    for run in env["runs"]:
        assert (run["commit"], run["branch"]) == ("abc1234", "main")
        assert run["started"].endswith("Z")
        (warmup,) = samples(run["warmup"])
        assert warmup is not None
        assert 0.19 < warmup < 1.0
    assert env["modules"] == []  # the module held the warm-up: never whole


def test_the_window_keeps_the_newest_runs_and_ids_without_samples_go() -> None:
    env = EnvHistory()
    for index in range(5):
        add_run(env, run_of({"t.py::a": 0.1 * (index + 1), "t.py::b": 0.5}, commit=f"c{index}"), 3)
    add_run(env, run_of({"t.py::a": 0.9}, commit="c5"), 3)
    assert [run.identity.commit for run in env.runs] == ["c3", "c4", "c5"]
    samples = env.samples("tests")
    assert samples["t.py::b"] == [0.5, 0.5]  # not in the newest run
    for _ in range(2):
        add_run(env, run_of({"t.py::a": 0.9}), 3)
    assert "t.py::b" not in env.ids["tests"]  # no sample left in the window: gone


def test_failed_tests_add_no_samples(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_first(): pass\ndef test_ok(): pass\ndef test_bad(): assert 0\n")
    for _ in range(2):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    env = load(pytester.path / "b.json")["envs"]["cpu/x1"]
    assert [t.rsplit("::", 1)[1] for t in env["tests"]] == ["test_ok"]
    assert env["modules"] == []  # it holds a failing test: its total is not a sample


def test_version_1_baselines_are_read_with_their_samples_as_the_newest_runs() -> None:
    data = {
        "schema": BASELINE_SCHEMA,
        "version": 1,
        "envs": {
            "cpu/x1": {"tests": {"t::a": {"samples": [1.0, 2.0, 3.0]}, "t::b": {"samples": [9.0]}}}
        },
    }
    env = parse_baseline("old.json", data).envs["cpu/x1"]
    assert len(env.runs) == 3
    assert env.samples("tests") == {"t::a": [1.0, 2.0, 3.0], "t::b": [9.0]}
    assert env.runs[-1].values["tests"] == [3.0, 9.0]  # the last samples: the newest run
    assert baseline_json(Baseline({"cpu/x1": env}))["version"] == 4


def test_a_record_and_a_pytest_split_map_are_one_run_baselines(tmp_path: Path) -> None:
    record = synthetic.record({"t.py::first": 0.01, "t.py::a": 0.2, "t.py::b": 0.3}, warmup=True)
    env = parse_baseline("r.json", record).envs["cpu/x1"]
    assert env.samples("tests") == {"t.py::a": [0.2], "t.py::b": [0.3]}
    assert env.samples("warmup") == {"t.py::first": [0.01]}
    durations = parse_baseline(".test_durations", {"t.py::a": 0.25})
    assert durations.source == "durations"
    any_key = durations.for_key("any/key")
    assert any_key is not None
    env = any_key
    assert (env.test_metric, env.samples("tests")) == ("total", {"t.py::a": [0.25]})
    assert expected_durations(env) == {"t.py::a": 0.25}


def test_a_record_and_a_durations_map_work_as_baselines_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_sleepy="def test_first(): pass\n" + SLEEPY_SUITE)
    pytester.runpytest("--perf-record=old.json").assert_outcomes(passed=3)
    (pytester.path / ".test_durations").write_text(
        json.dumps({"test_sleepy.py::test_a": 0.2, "test_sleepy.py::test_b": 0.001})
    )
    monkeypatch.setenv("SLEEP_A", "0.6")
    for source in ("old.json", ".test_durations"):
        # One sample is too few to tell a slowdown from noise by default ...
        result = pytester.runpytest(f"--perf-baseline={source}")
        result.stdout.fnmatch_lines(
            ["LEARNING test test_sleepy.py::test_a: *x) on 1 of the 3 samples a verdict needs*"]
        )
        result.stdout.no_fnmatch_line("REGRESSION*")
        # ... and enough where the user says one is (docs/regressions.md).
        result = pytester.runpytest(f"--perf-baseline={source}", "--perf-min-samples=1")
        result.stdout.fnmatch_lines(["REGRESSION test test_sleepy.py::test_a: *(*x, 1 sample(s))"])


def test_a_missing_baseline_passes_and_says_so_and_an_update_starts_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--perf-baseline=nope.json", "--perf-fail")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["perf: no baseline at nope.json yet"])
    result = pytester.runpytest("--perf-baseline=new/b.json", "--perf-update-baseline")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["perf: no baseline at new/b.json yet (this run starts it)"])
    assert load(pytester.path / "new/b.json")["envs"]["cpu/x1"]["runs"]
    result = pytester.runpytest("--perf-update-baseline")
    result.stderr.fnmatch_lines(["ERROR: --perf-update-baseline needs --perf-baseline PATH*"])


@pytest.mark.processes
def test_six_updates_at_once_lose_no_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n@pytest.mark.parametrize('i', range(20))\ndef test_p(i): pass\n"
    )
    run_concurrently(
        pytester,
        ["--perf-baseline=shared.json", "--perf-update-baseline", "--perf-window=50"],
        processes=6,
    )
    env = load(pytester.path / "shared.json")["envs"]["cpu/x1"]
    assert len(env["runs"]) == 6
    assert len(env["tests"]) == 19  # and the first, in "warmup"
    assert all(len(samples(run["tests"])) == 19 for run in env["runs"])


def test_a_run_the_baseline_holds_already_is_not_added_twice(tmp_path: Path) -> None:
    from pytest_accel.perf.formats.baseline import update_baseline_file

    path = tmp_path / "b.json"
    run = run_of({"t::a": 0.1, "t::b": 0.2})
    held: list[Any] = []
    update_baseline_file(path, [run], 10, held, summarise=summary_of)
    update_baseline_file(
        path, [run, run_of({"t::a": 0.1, "t::b": 0.2}, started=2e9)], 10, held, summarise=summary_of
    )
    assert held == [run]
    assert len(load(path)["envs"]["cpu/x1"]["runs"]) == 2
    # Two jobs that started in one second and timed only trivial tests are two runs.
    trivial = [run_of({"t::a": 0.000001}) for _ in range(2)]
    update_baseline_file(tmp_path / "t.json", trivial, 10, summarise=summary_of)
    assert len(load(tmp_path / "t.json")["envs"]["cpu/x1"]["runs"]) == 2


def test_runs_that_carry_ids_are_told_apart_by_them_not_by_start_and_samples(
    tmp_path: Path,
) -> None:
    from pytest_accel.perf.formats.baseline import update_baseline_file

    def with_id(run_id: str | None) -> Any:
        data = synthetic.record({"t::a": 0.1, "t::b": 0.2})
        if run_id is not None:
            data["run"]["id"] = run_id
        return timings(check_record("r.json", data))

    # Two jobs of one commit that started in one second and timed the same to 1 µs.
    held: list[Any] = []
    update_baseline_file(
        tmp_path / "b.json", [with_id("aa"), with_id("bb")], 10, held, summarise=summary_of
    )
    assert held == []
    update_baseline_file(tmp_path / "b.json", [with_id("bb")], 10, held, summarise=summary_of)
    assert len(held) == 1
    runs = load(tmp_path / "b.json")["envs"]["cpu/x1"]["runs"]
    assert [run["id"] for run in runs] == ["aa", "bb"]
    # Shards folded one by one, then merged and folded: the merged run holds them.
    merged = with_id("dd")
    merged = replace(merged, identity=replace(merged.identity, parts=("bb", "ee")))
    update_baseline_file(tmp_path / "b.json", [merged], 10, held, summarise=summary_of)
    assert len(held) == 2
    # A run written before ids is still recognised by its start and samples.
    update_baseline_file(tmp_path / "old.json", [with_id(None)], 10, summarise=summary_of)
    update_baseline_file(tmp_path / "old.json", [with_id("cc")], 10, held, summarise=summary_of)
    assert len(held) == 3
    assert "id" not in load(tmp_path / "old.json")["envs"]["cpu/x1"]["runs"][0]


def test_a_second_job_with_the_same_timings_is_added_and_a_record_folded_in_is_not(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    pytester.makepyfile(test_sleepy=SLEEPY_SUITE.replace("pass", "time.sleep(0.01)"))
    pytester.runpytest(
        "--perf-record=r.json", "--perf-baseline=b.json", "--perf-update-baseline"
    ).assert_outcomes(passed=2)
    record = load(pytester.path / "r.json")
    own_id = record["run"]["id"]
    assert len(own_id) == 16
    int(own_id, 16)
    # Another job of the same commit that started in the same second and, to the
    # microsecond, timed the same: only its id differs.
    record["run"]["id"] = "0" * 16
    (pytester.path / "twin.json").write_text(json.dumps(record))
    into = str(pytester.path / "b.json")
    paths = [str(pytester.path / name) for name in ("r.json", "twin.json")]
    assert main(["baseline", "--into", into, *paths]) == 0
    written = capsys.readouterr()
    assert "added 1 run(s)" in written.out
    assert f"note: {paths[0]}: not added: {into} holds this run already" in written.err
    runs = load(pytester.path / "b.json")["envs"]["cpu/x1"]["runs"]
    assert [run["id"] for run in runs] == [own_id, "0" * 16]
    jsonschema.validate(load(pytester.path / "b.json"), schema())


def test_merged_shards_are_not_folded_again_where_a_shard_of_them_is_in_already(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import main

    pytester.makepyfile(
        test_sharded="import time\n"
        + "".join(f"def test_{n}():\n    time.sleep(0.002)\n" for n in range(6))
    )
    # Shard 1 also folded itself in; shard 2 only wrote its record.
    pytester.runpytest(
        "--accel-shard=1/2",
        "--perf-record=s1.json",
        "--perf-baseline=b.json",
        "--perf-update-baseline",
    ).assert_outcomes(passed=3)
    pytester.runpytest("--accel-shard=2/2", "--perf-record=s2.json").assert_outcomes(passed=3)
    paths = [str(pytester.path / name) for name in ("s1.json", "s2.json")]
    assert main(["merge", "-o", str(pytester.path / "m.json"), *paths]) == 0
    merged = load(pytester.path / "m.json")
    shard_ids = [load(pytester.path / name)["run"]["id"] for name in ("s1.json", "s2.json")]
    assert [part["id"] for part in merged["run"]["merged_from"]] == shard_ids
    assert merged["run"]["id"] not in shard_ids
    capsys.readouterr()
    into = str(pytester.path / "b.json")
    assert main(["baseline", "--into", into, str(pytester.path / "m.json")]) == 0
    assert "holds this run already" in capsys.readouterr().err
    assert len(load(pytester.path / "b.json")["envs"]["cpu/x1"]["runs"]) == 1


def test_a_smaller_window_trims_every_key(tmp_path: Path) -> None:
    from pytest_accel.perf.formats.baseline import update_baseline_file

    path = tmp_path / "b.json"
    runs = [run_of({"t::a": 0.1}, key=k, started=1e9 + i) for i in range(4) for k in ("k1", "k2")]
    update_baseline_file(path, runs, 10, summarise=summary_of)
    update_baseline_file(
        path, [run_of({"t::a": 0.1}, key="k1", started=2e9)], 2, summarise=summary_of
    )
    data = load(path)
    assert [len(data["envs"][k]["runs"]) for k in ("k1", "k2")] == [2, 2]
    assert data["window"] == 2


HEAD = '{"schema": "pytest-accel/baseline", "version": 3, "envs": '
RUN = HEAD + '{"k": {"tests": ["t::a"], "runs": [{"commit": null, "tests": '
RUN2 = RUN.replace('"version": 3', '"version": 2')
RUN4 = RUN.replace('"version": 3', '"version": 4')
V1 = '{"schema": "pytest-accel/baseline", "version": 1, "envs": {"k": {"tests": {"t": {"samples": '


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (HEAD + "{", "is not valid JSON"),
        ("", "is empty"),
        ("[1, 2]", "expected a JSON object, got list"),
        (HEAD + "[]}", "envs: expected an object, got list"),
        (RUN + '"fast!"}]}}}', "envs['k'].runs[0].tests: not base64"),
        (RUN4 + '"fast!"}]}}}', "envs['k'].runs[0].tests: not hexadecimal"),
        (RUN4 + '"3fb999"}]}}}', "runs[0].tests: 3 bytes, not a whole number of 8-byte doubles"),
        (RUN4 + '"3fb"}]}}}', "envs['k'].runs[0].tests: not hexadecimal (Odd-length string)"),
        (
            RUN4 + f'"{struct.pack("<d", -1.5).hex()}"}}]}}}}}}',
            "envs['k'].runs[0].tests['t::a']: -1.5 is negative",
        ),
        (
            RUN4 + '{"t::a": 1}}]}}}',
            "runs[0].tests: expected hexadecimal samples (a string) or a list of numbers, got dict",
        ),
        (RUN + '"fast"}]}}}', "runs[0].tests: 3 bytes, not a whole number of 8-byte doubles"),
        (RUN + f'"{b64(-1.5)}"}}]}}}}}}', "envs['k'].runs[0].tests['t::a']: -1.5 is negative"),
        (
            RUN + f'"{b64(float("inf"))}"}}]}}}}}}',
            "['t::a']: expected a number of seconds, got inf",
        ),
        (RUN + f'"{b64(0.1, 0.2)}"}}]}}}}}}', "envs['k'].runs[0].tests: 2 values for 1 tests"),
        (
            RUN + '{"t::a": 1}}]}}}',
            "runs[0].tests: expected base64 samples (a string) or a list of numbers, got dict",
        ),
        (RUN2 + "[NaN]}]}}}", "is not valid JSON"),
        (RUN2 + "[-1.5]}]}}}", "envs['k'].runs[0].tests['t::a']: -1.5 is negative"),
        (
            RUN2 + "[1e300]}]}}}",
            "envs['k'].runs[0].tests['t::a']: 1e+300 seconds is implausibly large",
        ),
        (RUN2 + "[true]}]}}}", "envs['k'].runs[0].tests['t::a']: expected a number of seconds"),
        (RUN2 + "[1, 2]}]}}}", "envs['k'].runs[0].tests: 2 values for 1 tests"),
        (
            HEAD + '{"k": {"tests": [1], "runs": []}}}',
            "envs['k'].tests: expected a list of ids (strings)",
        ),
        (
            HEAD + '{"k": {"test_metric": "wall", "runs": []}}}',
            "envs['k'].test_metric: expected call or total, got 'wall'",
        ),
        (
            HEAD + '{"k": {"runs": [{"started": "yesterday"}]}}}',
            "envs['k'].runs[0].started: 'yesterday' is not YYYY-MM-DDTHH:MM:SSZ",
        ),
        (V1 + '"fast"}}}}}', "envs['k'].tests['t'].samples: expected a list"),
        (V1 + "[-1.5]}}}}}", "envs['k'].tests['t'].samples[0]: -1.5 is negative"),
        (
            '{"schema": "pytest-accel/baselines", "version": 1, "envs": {}}',
            "schema 'pytest-accel/baselines' is not one this plugin reads",
        ),
        (
            '{"schema": "pytest-accel/baseline", "version": 9, "envs": {}}',
            "version 9 is newer than this pytest-accel reads (4); upgrade",
        ),
        (
            '{"schema": "pytest-accel/baseline", "version": "1", "envs": {}}',
            "version: expected an integer, got '1'",
        ),
        ('{"test_x": "slow"}', "['test_x']: expected a number of seconds, got 'slow'"),
    ],
)
def test_a_malformed_baseline_is_a_usage_error_naming_the_file_and_the_problem(
    pytester: pytest.Pytester, content: str, problem: str
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "bad.json").write_text(content)
    result = pytester.runpytest("--perf-baseline=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(lines) == 1
    assert lines[0].startswith("ERROR: --perf-baseline: bad.json: ")
    assert problem in lines[0]
    assert "Traceback" not in result.stderr.str()
    assert "passed" not in result.stdout.str()  # stopped before any test ran


def test_loading_reports_the_path_in_every_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"b\.json: no such file"):
        load_baseline(tmp_path / "b.json")
    with pytest.raises(InputError, match=r"^x: envs: expected an object, got NoneType$"):
        parse_baseline("x", {"schema": BASELINE_SCHEMA, "version": 2})


def test_while_a_baseline_is_being_built_a_slowdown_is_learning_not_a_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs 2 and 3 of a new baseline once flagged REGRESSION on one or two samples; a
    verdict needs ``--perf-min-samples`` (3) of them (docs/regressions.md)."""
    pytester.makepyfile(test_sleepy="def test_first(): pass\n" + SLEEPY_SUITE)
    build = ["--perf-baseline=b.json", "--perf-update-baseline"]
    judged = ["--perf-baseline=b.json", "--perf-fail"]
    for built in (1, 2):
        monkeypatch.setenv("SLEEP_A", "0.15")
        pytester.runpytest(*build).assert_outcomes(passed=3)
        monkeypatch.setenv("SLEEP_A", "0.6")  # 4x: a regression once the rule may say so
        result = pytester.runpytest(*judged)
        assert result.ret == pytest.ExitCode.OK
        result.stdout.fnmatch_lines(
            [
                f"LEARNING test test_sleepy.py::test_a: *x) on {built} of the 3 samples a"
                " verdict needs: no alarm yet",
                f"learning: {built} of 3 runs: the baseline has {built} run(s) of cpu/x1 *",
                "perf: 0 regression(s), * learning, *",
            ]
        )
        result.stdout.no_fnmatch_line("REGRESSION*")
    monkeypatch.setenv("SLEEP_A", "0.15")
    pytester.runpytest(*build).assert_outcomes(passed=3)
    monkeypatch.setenv("SLEEP_A", "0.6")
    result = pytester.runpytest(*judged)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["REGRESSION test test_sleepy.py::test_a: *(*x, 3 sample(s)*"])
    result.stdout.no_fnmatch_line("learning: *")
    result.stdout.no_fnmatch_line("LEARNING *")


def test_a_test_the_window_leaves_without_samples_is_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--perf-window`` counts runs: after that many runs in which a test failed, the
    baseline holds nothing of it, which once went unsaid."""
    pytester.makepyfile(
        test_w="""
        import os

        def test_steady():
            pass

        def test_breaks():
            assert os.environ.get("BROKEN") != "1"
        """
    )
    update = ["--perf-baseline=b.json", "--perf-update-baseline", "--perf-window=3"]
    pytester.runpytest(*update).assert_outcomes(passed=2)
    monkeypatch.setenv("BROKEN", "1")
    for _ in range(2):  # two of the three runs kept: one sample is still there
        result = pytester.runpytest(*update)
        result.stdout.no_fnmatch_line("*no sample left*")
    result = pytester.runpytest(*update, "--perf-record=r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "perf: 1 test(s) have no sample left in the baseline's last 3 run(s) of cpu/x1"
            " (--perf-window counts runs; *): they failed or did not pass in each, and"
            " compare as new until they pass (test_w.py::test_breaks)"
        ]
    )
    env = json.loads((pytester.path / "b.json").read_text())["envs"]["cpu/x1"]
    assert "test_w.py::test_breaks" not in env["tests"] + env["warmup"]
    # The same from records, offline: one passing run, then three that fail it.
    monkeypatch.delenv("BROKEN")
    pytester.runpytest("--perf-record=ok.json").assert_outcomes(passed=2)
    monkeypatch.setenv("BROKEN", "1")
    for name in ("one", "two", "three"):
        pytester.runpytest(f"--perf-record={name}.json").assert_outcomes(passed=1, failed=1)
    paths = [str(pytester.path / f"{n}.json") for n in ("ok", "one", "two", "three")]
    from pytest_accel.cli import main

    capsys.readouterr()
    assert main(["baseline", *paths, "--into", str(pytester.path / "c.json"), "--window", "3"]) == 0
    assert "no sample left in the baseline's last 3 run(s)" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["record", "durations"])
def test_updating_a_record_or_a_durations_map_is_refused_before_any_test(
    pytester: pytest.Pytester, kind: str
) -> None:
    """Once refused only after the whole suite ran (exit 1)."""
    pytester.makepyfile(test_sleepy="def test_first(): pass\n" + SLEEPY_SUITE)
    if kind == "record":
        pytester.runpytest("--perf-record=old.json").assert_outcomes(passed=3)
    else:
        (pytester.path / "old.json").write_text(json.dumps({"test_sleepy.py::test_a": 0.2}))
    before = (pytester.path / "old.json").read_bytes()
    result = pytester.runpytest("--perf-baseline=old.json", "--perf-update-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --perf-update-baseline: old.json is a {kind} file, not a baseline; *"]
    )
    result.stdout.no_fnmatch_line("*passed*")
    assert (pytester.path / "old.json").read_bytes() == before


def test_the_baseline_and_the_history_hold_each_test_id_as_the_collected_tests_own(
    pytester: pytest.Pytester,
) -> None:
    """Read before collection, the baseline's and the flaky history's test ids are held
    as the collected tests' own strings, not as a second copy of each (10 MB a file at
    100,000 tests); what they say is unchanged."""
    from pytest_accel.flaky.plugin import FlakyPlugin
    from pytest_accel.perf.plugin import PerfPlugin

    pytester.makepyfile(
        test_ids="import pytest\n\n@pytest.mark.parametrize('n', range(5))\n"
        "def test_p(n):\n    pass\n\nclass TestC:\n    def test_m(self):\n        pass\n"
    )
    files = ["--perf-baseline=b.json", "--flaky-history=h.json", "-p", "no:randomly"]
    pytester.runpytest_inprocess(*files, "--perf-update-baseline").assert_outcomes(passed=6)
    held: dict[str, list[bool]] = {}

    class Looker:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session: pytest.Session) -> None:  # collected
            perf = session.config.pluginmanager.get_plugin("pytest_accel:perf")
            flaky = session.config.pluginmanager.get_plugin("pytest_accel:flaky")
            assert isinstance(perf, PerfPlugin)
            assert isinstance(flaky, FlakyPlugin)
            assert perf.baseline is not None
            assert flaky.history_read is not None
            own = {item.nodeid: item.nodeid for item in session.items}
            env = perf.baseline.envs["cpu/x1"]
            baseline_ids = env.ids["warmup"] + env.ids["tests"]
            history_ids = list(flaky.history_read[1].envs["cpu/x1"].tests)
            held["baseline"] = [i is own[i] for i in baseline_ids]
            held["history"] = [i is own[i] for i in history_ids]

    result = pytester.runpytest_inprocess(*files, "--perf-record=r.json", plugins=[Looker()])
    result.assert_outcomes(passed=6)
    assert held == {"baseline": [True] * 6, "history": [True] * 6}
    result.stdout.fnmatch_lines(["perf: 0 regression(s), *, 6 test(s) compared under cpu/x1"])
    history = json.loads((pytester.path / "h.json").read_text())["envs"]["cpu/x1"]["tests"]
    assert sorted(history.values()) == ["PP"] * 6


SHARED_IDS_CONFTEST = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_finish(session):
    yield  # after the features held their files' ids as the collected ones
    pm = session.config.pluginmanager
    baseline = pm.get_plugin("pytest_accel:perf").baseline
    history = pm.get_plugin("pytest_accel:flaky").history_read[1]
    [env] = baseline.envs.values()
    [kept] = history.envs.values()
    collected = {item.nodeid: item.nodeid for item in session.items}
    in_baseline = {i: i for kind in ("tests", "warmup") for i in env.ids[kind]}
    in_history = {i: i for i in kept.tests}
    same = [
        in_baseline[t] is in_history[t]
        for t in collected
        if t in in_baseline and t in in_history
    ]
    from pytest_accel.reports import collected_ids

    once = collected_ids(session) is collected_ids(session)  # made once, for both
    with open("shared.txt", "w") as out:
        out.write(f"{len(same)} {sum(same)} {once}")
"""


@pytest.mark.processes
def test_the_baseline_and_the_flaky_history_hold_one_copy_of_each_test_id(
    pytester: pytest.Pytester,
) -> None:
    """Both files name every test: after collection both hold the same string objects
    (one set of ids made from the collection, for every feature that reads a file)."""
    pytester.makepyfile(test_mod="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    files = ["--perf-baseline=b.json", "--flaky-history=h.json"]
    for _ in range(2):
        pytester.runpytest_subprocess(*files, "--perf-update-baseline").assert_outcomes(passed=2)
    pytester.makeconftest(SHARED_IDS_CONFTEST)
    pytester.runpytest_subprocess(*files).assert_outcomes(passed=2)
    assert (pytester.path / "shared.txt").read_text() == "2 2 True"


def test_the_schema_holds_the_summarys_steps_and_refuses_a_malformed_one() -> None:
    env = EnvHistory()
    for n, seconds in enumerate([0.3] * 5 + [0.9] * 3):
        wobble = 1 + 0.01 * (n % 3 - 1)
        add_run(env, run_of({"t.py::a": seconds * wobble, "t.py::b": 0.2}, commit=f"c{n}"), 20)
    data = json.loads(json.dumps(baseline_json(Baseline({"cpu/x1": env}))))
    assert data["envs"]["cpu/x1"]["summary"]["tests"]["steps"] == [[0, 3]]
    jsonschema.validate(data, schema())
    for bad in ([[0, 0]], [[0]], [[-1, 2]], [["0", 2]]):
        data["envs"]["cpu/x1"]["summary"]["tests"]["steps"] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, schema())
