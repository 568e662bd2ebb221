from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.cli import main
from pytest_accel.hardware.detection import Detection
from pytest_accel.scaleout.pinning import PinError, plan_pin
from pytest_accel.scaleout.sharding import Unit, make_units, plan, weights_for
from tests.fakesys import FakeSys, per_group, per_test
from tests.jax_runs import run_jax_suite

MODULES, CLASS_TESTS, FUNCTIONS = 8, 10, 15  # 8 x 25 = 200 tests


def write_suite(pytester: pytest.Pytester) -> list[str]:
    nodeids = []
    for m in range(MODULES):
        lines = [f"class TestGroup{m}:"]
        lines += [f"    def test_c{i}(self): pass" for i in range(CLASS_TESTS)]
        lines += [f"def test_f{i}(): pass" for i in range(FUNCTIONS)]
        pytester.makepyfile(**{f"test_mod{m}": "\n".join(lines)})
        nodeids += [f"test_mod{m}.py::TestGroup{m}::test_c{i}" for i in range(CLASS_TESTS)]
        nodeids += [f"test_mod{m}.py::test_f{i}" for i in range(FUNCTIONS)]
    return nodeids


def skewed_durations(nodeids: list[str]) -> dict[str, float]:
    rng = random.Random(11)
    return {n: round(rng.lognormvariate(-1.5, 1.0), 4) for n in nodeids}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize("by", ["test", "class"])
def test_four_shards_run_every_test_once_balanced_and_merge_into_the_unsharded_record(
    pytester: pytest.Pytester, by: str
) -> None:
    nodeids = write_suite(pytester)
    durations = skewed_durations(nodeids)
    (pytester.path / ".test_durations").write_text(json.dumps(durations))
    common = ["--perf-baseline=.test_durations", f"--accel-shard-by={by}"]
    shard_tests = []
    for k in range(1, 5):
        result = pytester.runpytest(*common, f"--accel-shard={k}/4", f"--perf-record=s{k}.json")
        result.stdout.fnmatch_lines([f"accel-shard {k}/4 by {by}: * test(s), estimated *"])
        record = load(pytester.path / f"s{k}.json")
        assert record["run"]["shard"] == f"{k}/4"
        shard_tests.append(set(record["tests"]["id"]))
        assert shard_tests[-1], "no shard is empty"
    assert sum(len(s) for s in shard_tests) == len(nodeids)
    assert set().union(*shard_tests) == set(nodeids)  # each test in exactly one shard
    loads = [sum(durations[t] for t in shard) for shard in shard_tests]
    ideal = sum(durations.values()) / 4
    assert max(durations.values()) < ideal / 4  # no single test dominates
    assert max(loads) <= ideal * 1.05
    if by == "class":  # a class never splits
        for m in range(MODULES):
            holders = [
                i
                for i, s in enumerate(shard_tests)
                if f"test_mod{m}.py::TestGroup{m}::test_c0" in s
            ]
            members = {f"test_mod{m}.py::TestGroup{m}::test_c{i}" for i in range(CLASS_TESTS)}
            assert len(holders) == 1
            assert members <= shard_tests[holders[0]]

    pytester.runpytest("--perf-record=full.json").assert_outcomes(passed=len(nodeids))
    assert (
        main(
            [
                "merge",
                "-o",
                str(pytester.path / "merged.json"),
                *(str(pytester.path / f"s{k}.json") for k in range(1, 5)),
            ]
        )
        == 0
    )
    merged, full = load(pytester.path / "merged.json"), load(pytester.path / "full.json")
    assert set(merged["tests"]["id"]) == set(full["tests"]["id"])
    for section, field in (("classes", "class"), ("modules", "module")):
        merged_groups, full_groups = per_group(merged, section), per_group(full, section)
        assert {g: v["tests"] for g, v in merged_groups.items()} == {
            g: v["tests"] for g, v in full_groups.items()
        }
        for ident, value in merged_groups.items():
            totals = [t["total"] for t in per_test(merged).values() if t[field] == ident]
            assert value["total"] == pytest.approx(sum(totals), abs=1e-5)
            # Deselected in each shard, whole across them (but for the warm-up tests' groups).
            assert value["deselected"] == 0
    assert len(merged["run"]["merged_from"]) == 4


def test_platform_skipped_tests_weigh_nothing_and_unknown_tests_weigh_the_median() -> None:
    weights = weights_for(["a", "b", "c", "new"], {"a": 1.0, "b": 3.0, "c": 100.0}, zero=["c"])
    assert weights == {"a": 1.0, "b": 3.0, "c": 0.0, "new": 2.0}


def test_plans_are_deterministic_and_never_leave_a_shard_empty() -> None:
    units = [Unit(f"u{i}", (f"u{i}",), 0.0 if i % 2 else float(i)) for i in range(12)]
    first = plan(units, 5)
    assert plan(list(reversed(units)), 5) == first
    assert all(first.shards)
    assert sorted(t for i in range(5) for t in first.tests(i)) == sorted(u.id for u in units)
    one_heavy = plan([Unit("big", ("big",), 10.0), Unit("s", ("s",), 1.0)], 2)
    assert one_heavy.loads() == [10.0, 1.0]


def test_units_group_by_class_and_keep_classless_tests_alone() -> None:
    groups = {"m.py::C::a": "m.py::C", "m.py::C::b": "m.py::C", "m.py::f": None}
    units = make_units(list(groups), groups, dict.fromkeys(groups, 1.0), "class")
    assert sorted((u.id, u.tests) for u in units) == [
        ("m.py::C", ("m.py::C::a", "m.py::C::b")),
        ("m.py::f", ("m.py::f",)),
    ]


def test_the_shard_command_prints_the_same_kind_of_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodeids = [f"t{m}.py::TestK::test_{i}" for m in range(4) for i in range(25)]
    durations = tmp_path / ".test_durations"
    durations.write_text(json.dumps(skewed_durations(nodeids)))
    assert (
        main(
            [
                "shard",
                "--durations",
                str(durations),
                "--splits",
                "4",
                "--by",
                "test",
                "--format",
                "json",
                "--without-collecting",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["imbalance"] <= 1.05
    assert sorted(t for s in payload["shards"] for t in s["tests"]) == sorted(nodeids)
    argv = ["shard", "--durations", str(durations), "--splits", "4", "--without-collecting"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("1 class(es) whole,") == 4  # by class: each shard takes one class whole


def test_the_shard_plan_speaks_of_classes_only_where_there_are_classes(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # Durations given, not measured: a loaded runner's warm-up would make the split 1+3.
    durations = pytester.path / ".test_durations"
    durations.write_text(json.dumps({f"test_flat.py::test_{i}": 0.5 for i in range(4)}))
    argv = ["shard", "--durations", str(durations), "--splits", "2"]
    capsys.readouterr()
    assert main([*argv, "--without-collecting"]) == 0
    out = capsys.readouterr().out
    assert "class" not in out, out
    assert "shard 1/2: 2 test(s), estimated " in out


def test_a_class_heavier_than_a_whole_shard_is_named_with_what_splits_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """By class, no plan is more even than its heaviest class: chex's suite has one
    class of 51.5 s where three shards' ideal is 27.7 s (1.85x), and said only that."""
    heavy = {f"test_heavy.py::TestHeavy::test_{i}": 10.0 for i in range(3)}
    light = {f"test_light.py::test_{i}": 1.0 for i in range(6)}
    durations = pytester.path / ".test_durations"
    durations.write_text(json.dumps({**heavy, **light}))
    plan_args = ["shard", "--durations", str(durations), "--splits", "3", "--without-collecting"]
    assert main(plan_args) == 0
    out = capsys.readouterr().out
    assert "largest shard: 2.500x the ideal (12.0s)" in out
    assert (
        "the class test_heavy.py::TestHeavy alone is estimated at 30.0s, more than the ideal"
        " shard: --by test splits it"
    ) in out
    assert main([*plan_args, "--by", "test"]) == 0
    assert "splits it" not in capsys.readouterr().out  # 10 s a test: as even as it gets
    pytester.makepyfile(
        test_heavy="class TestHeavy:\n"
        + "".join(f"    def test_{i}(self): pass\n" for i in range(3)),
        test_light="".join(f"def test_{i}(): pass\n" for i in range(6)),
    )
    result = pytester.runpytest("--perf-baseline=.test_durations", "--accel-shard=1/3")
    result.stdout.fnmatch_lines(
        [
            "accel-shard 1/3 by class: * (largest 2.500x the ideal); the class"
            " test_heavy.py::TestHeavy alone is estimated at 30.0s, more than the ideal"
            " shard: --accel-shard-by test splits it"
        ]
    )


def test_merge_refuses_different_hardware_unless_kept_apart(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass\n")
    pytester.runpytest("--perf-record=cpu.json").assert_outcomes(passed=2)
    pytester.runpytest("--perf-record=tpu.json", "--accel-emulate=tpu:8:TPU v6 lite")
    paths = [str(pytester.path / "cpu.json"), str(pytester.path / "tpu.json")]
    out = str(pytester.path / "merged.json")
    assert main(["merge", "-o", out, *paths]) == 2
    err = capsys.readouterr().err
    assert "the records are from different hardware" in err
    assert "'cpu/x1'" in err
    assert "'tpu/TPU v6 lite/x8'" in err
    assert "--by-env" in err
    assert main(["merge", "-o", out, "--by-env", *paths]) == 0
    assert load(pytester.path / "merged.cpu_x1.json")["env"]["key"] == "cpu/x1"
    assert (
        load(pytester.path / "merged.tpu_TPU_v6_lite_x8.json")["env"]["key"] == "tpu/TPU v6 lite/x8"
    )


def test_merge_keeps_the_later_of_a_duplicated_test_and_says_so(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile("def test_a(): pass\n")
    pytester.runpytest("--perf-record=first.json")
    second = load(pytester.path / "first.json")
    second["run"]["started"] = "2099-01-01T00:00:00Z"
    second["tests"]["call"][0] = 9.0
    (pytester.path / "second.json").write_text(json.dumps(second))
    out = pytester.path / "merged.json"
    assert (
        main(
            [
                "merge",
                "-o",
                str(out),
                str(pytester.path / "second.json"),
                str(pytester.path / "first.json"),
            ]
        )
        == 0
    )
    assert (
        "kept " + str(pytester.path / "second.json") + " (the later run)" in capsys.readouterr().err
    )
    assert load(out)["tests"]["call"] == [9.0]


MARKED_SUITE = {
    "test_marked": "import pytest\n\n@pytest.mark.perf(threshold=3.0)\ndef test_lenient(): pass\n"
    "def test_plain(): pass\n",
    "test_other": "def test_one(): pass\ndef test_two(): pass\n",
}


def test_merged_shards_are_judged_by_the_rule_the_shards_were_judged_by(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The merged record once kept no ``judgement``, so ``compare`` judged the whole suite
    by the default rule, and said the record was from before 0.4."""
    pytester.makepyfile(**MARKED_SUITE)
    durations = {
        f"{m}.py::test_{t}": 1.0
        for m, t in (
            ("test_marked", "lenient"),
            ("test_marked", "plain"),
            ("test_other", "one"),
            ("test_other", "two"),
        )
    }
    (pytester.path / ".test_durations").write_text(json.dumps(durations))
    common = ["--perf-baseline=.test_durations", "--accel-shard-by=test", "-p", "no:randomly"]
    for k, threshold in ((1, 1.5), (2, 1.5), (3, 2.0)):  # shard 2 of 2 twice, judged apart
        shard = f"{min(k, 2)}/2"
        result = pytester.runpytest(
            *common,
            f"--accel-shard={shard}",
            f"--perf-threshold={threshold}",
            f"--perf-record=s{k}.json",
        )
        assert result.ret == 0
    paths = {k: str(pytester.path / f"s{k}.json") for k in (1, 2, 3)}
    marked = "test_marked.py::test_lenient"
    holder = next(k for k in (1, 2) if marked in load(Path(paths[k]))["tests"]["id"])
    capsys.readouterr()

    merged = str(pytester.path / "merged.json")
    assert main(["merge", "-o", merged, paths[1], paths[2]]) == 0
    judgement = load(Path(merged))["judgement"]
    assert judgement["rule"] == load(Path(paths[holder]))["judgement"]["rule"]
    assert judgement["rule"]["threshold"] == 1.5
    assert judgement["overrides"] == load(Path(paths[holder]))["judgement"]["overrides"]
    assert judgement["overrides"][marked]["threshold"] == 3.0
    capsys.readouterr()
    assert main(["compare", merged, "--baseline", ".test_durations"]) == 0
    out = capsys.readouterr().out
    assert "judged as the run was: by the record's rule and its 1 @pytest.mark.perf" in out

    apart = str(pytester.path / "apart.json")
    assert main(["merge", "-o", apart, paths[1], paths[3]]) == 0
    err = capsys.readouterr().err
    assert f"{paths[1]} and {paths[3]} were judged by different rules: the merged record" in err
    assert "judgement" not in load(Path(apart))
    assert main(["compare", apart, "--baseline", ".test_durations"]) == 0
    assert (
        "judged by the default rule: the record (a merge of records) keeps none of its own"
        in capsys.readouterr().out
    )


def test_merging_a_truncated_record_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "shard3.json"
    bad.write_text('{"schema": "pytest-accel/record", "version": 1, "tests": {"a": ')
    assert main(["merge", "-o", str(tmp_path / "m.json"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-accel: error: {bad}: is not valid JSON")
    assert not (tmp_path / "m.json").exists()


# --- one device set per xdist worker ------------------------------------------------

REPORTING_CONFTEST = """
import os, pathlib
# Written at conftest import: the pinned variables are set before any conftest runs.
worker = os.environ.get("PYTEST_XDIST_WORKER")
if worker:
    names = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
             "TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_PORT")
    seen = {n: os.environ[n] for n in names if n in os.environ}
    pathlib.Path(os.environ["PIN_OUT"], worker).write_text(repr(seen))
"""


def pinned_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[pytest.RunResult, dict[str, dict[str, str]]]:
    out = Path(tempfile.mkdtemp(prefix="pins", dir=pytester.path))
    monkeypatch.setenv("PIN_OUT", str(out))
    pytester.makeconftest(REPORTING_CONFTEST)
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.parametrize('i', range(8))\ndef test_any(i): pass\n"
        "@pytest.mark.gpu(min_devices=4)\ndef test_needs_four_gpus(): pass\n"
    )
    result = pytester.runpytest_inprocess("-p", "xdist", "-rs", *args)
    seen = {p.name: eval(p.read_text()) for p in sorted(out.iterdir())}
    return result, seen


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_eight_gpus_and_four_workers_give_each_worker_a_disjoint_pair(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_nvidia(8)
    result, seen = pinned_env(pytester, monkeypatch, "-n", "4")
    assert seen == {f"gw{k}": {"CUDA_VISIBLE_DEVICES": f"{2 * k},{2 * k + 1}"} for k in range(4)}
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1] *: requires gpu x4 (detected: cuda x2 *xdist worker gw? holds *"
            "run it in an unpinned pass (-n 0, or --accel-pin=off)"
        ]
    )
    result.assert_outcomes(passed=8, skipped=1)


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_an_outer_cuda_mask_is_indexed_into(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_nvidia(8)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    _, seen = pinned_env(pytester, monkeypatch, "-n", "2")
    assert seen == {"gw0": {"CUDA_VISIBLE_DEVICES": "4,5"}, "gw1": {"CUDA_VISIBLE_DEVICES": "6,7"}}


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_amd_workers_get_rocr_and_hip_masks(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(8):
        fakesys.add_kfd_node(304, "gfx942")
    _, seen = pinned_env(pytester, monkeypatch, "-n", "4")
    assert seen["gw1"] == {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0,1"}
    assert {s["ROCR_VISIBLE_DEVICES"] for s in seen.values()} == {"0,1", "2,3", "4,5", "6,7"}


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_tpu_workers_get_visible_chips_and_process_bounds(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_tpu(8, "0x0063")
    _, seen = pinned_env(pytester, monkeypatch, "-n", "4", "--accel=tpu", "--accel-probe=none")
    assert seen["gw2"] == {
        "TPU_VISIBLE_CHIPS": "4,5",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,2,1",
        "TPU_PROCESS_PORT": "8478",
    }


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_n_auto_is_the_device_count_and_pin_off_leaves_masks_alone(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_nvidia(4)
    result, seen = pinned_env(pytester, monkeypatch, "-n", "auto")
    result.stdout.fnmatch_lines(["*4 workers*"])
    assert len(seen) == 4
    _, seen = pinned_env(pytester, monkeypatch, "-n", "2", "--accel-pin=off")
    assert seen == {"gw0": {}, "gw1": {}}


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_n_auto_on_a_cpu_runner_leaves_the_worker_count_to_xdist(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "2")  # xdist's own answer
    result, seen = pinned_env(pytester, monkeypatch, "-n", "auto")
    result.stdout.fnmatch_lines(["*2 workers*"])
    assert seen == {"gw0": {}, "gw1": {}}


@pytest.mark.requires("xdist")
def test_more_workers_than_devices_is_a_usage_error(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    fakesys.add_nvidia(2)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "xdist", "-n", "4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --accel-pin: -n 4 workers cannot each hold one of 2 cuda device(s); use -n 2*"]
    )


def test_plan_pin_for_v3_chips_counts_two_devices_per_chip() -> None:
    v3 = Detection("tpu", 8, "TPU v3", "pci")  # 4 chips x 2 cores
    pin = plan_pin(v3, {}, "gw1", 2)
    assert (pin.devices, pin.device_count) == (("2", "3"), 4)
    with pytest.raises(PinError, match="-n 8 workers cannot each hold one of 4 tpu"):
        plan_pin(v3, {}, "gw0", 8)


@pytest.mark.requires("jax")
def test_merged_shards_keep_their_compilation_and_cost(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """``merge`` once dropped the shards' ``compilation`` section (the report's
    compilation cell was empty for merged runs) and wrote no ``cost``."""
    for name in ("a", "b"):
        pytester.makepyfile(
            **{
                f"test_{name}": f"""
                import jax
                import jax.numpy as jnp

                def test_{name}_1():
                    jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()

                def test_{name}_2():
                    jax.jit(lambda x: x * 5)(jnp.ones(4)).block_until_ready()
                """
            }
        )
    shards = []
    for k in (1, 2):
        out = str(pytester.path / f"shard-{k}.json")
        run_jax_suite(
            pytester,
            f"--accel-shard={k}/2",
            "--accel-shard-by=module",
            f"--perf-record={out}",
            "--accel-price=cpu/*=3.6",
        ).assert_outcomes(passed=2)
        shards.append(load(Path(out)))
    merged_path = str(pytester.path / "merged.json")
    inputs = [str(pytester.path / f"shard-{k}.json") for k in (1, 2)]
    assert main(["merge", "-o", merged_path, *inputs]) == 0
    merged = load(Path(merged_path))
    compilation = merged["compilation"]
    assert compilation["count"] == sum(s["compilation"]["count"] for s in shards) >= 4
    assert compilation["seconds"] == pytest.approx(
        sum(s["compilation"]["seconds"] for s in shards), abs=1e-5
    )
    assert 0 < compilation["share"] <= 1
    cost = merged["cost"]
    assert cost["price_per_device_hour"] == 3.6
    assert cost["run"]["device_seconds"] == pytest.approx(
        sum(s["cost"]["run"]["device_seconds"] for s in shards), abs=0.01
    )
    assert cost["run"]["usd"] == pytest.approx(cost["run"]["device_seconds"] / 1000, rel=0.01)
    assert set(cost["modules"]) == {"test_a.py", "test_b.py"}
    assert main(["report", merged_path, "-o", str(pytester.path / "r.html")]) == 0
    page = (pytester.path / "r.html").read_text()
    assert f"{compilation['count']} compilation(s)" in page  # the run's compilation cell
    capsys.readouterr()
