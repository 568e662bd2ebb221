"""What a run costs: prices per hardware key from the options, the ini or a file;
device-seconds and dollars per test, module, run and reruns in the record, the terminal
and the job summary; a monthly projection from the baseline's runs; the budget gate."""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_accel.cost.model import merged_section, runs_per_month
from pytest_accel.cost.prices import price_table
from tests.jax_runs import run_serial_or_xdist

RECORD_SCHEMA = json.loads(files("pytest_accel").joinpath("schemas/record.schema.json").read_text())
SUITE = """
import os
import time

def test_quick():
    pass

def test_slow():
    time.sleep(0.3)  # well above the flaky test's two attempts, even on a busy machine

def test_shaky():
    path = os.path.join(os.path.dirname(__file__), "shaky.count")
    count = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(count + 1))
    time.sleep(0.02)
    assert count > 0, "fails the first time"
"""


def record(pytester: pytest.Pytester, name: str = "r.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


@pytest.mark.parametrize(
    ("workers", "share"),
    [
        pytest.param([], 8.0, id="serial"),
        pytest.param(["-n", "2"], 4.0, id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_the_record_and_the_terminal_give_the_runs_tests_and_reruns_cost(
    pytester: pytest.Pytester, workers: list[str], share: float
) -> None:
    pytester.makepyfile(test_costly=SUITE)
    result = pytester.runpytest_subprocess(
        "--accel-cpu-devices=8",
        "--perf-env-key=tpu/v5e/x8",  # a fake accelerator key: priced as one
        "--accel-price=cpu/*=0.01",
        "--accel-price=tpu/*=1.20",
        "--flaky-reruns=1",
        "--perf-record=r.json",
        *workers,
    )
    assert result.ret == 0
    jsonschema.validate(record(pytester), RECORD_SCHEMA)
    cost = record(pytester)["cost"]
    assert cost["key"] == "tpu/v5e/x8"
    assert (cost["price_per_device_hour"], cost["price_source"]) == (1.2, "--accel-price: tpu/*")
    assert (cost["device_count"], cost["devices_per_test"]) == (8, share)
    tests = record(pytester)["tests"]
    totals = dict(zip(tests["id"], tests["total"], strict=True))
    earlier = sum(
        a["setup"] + a["call"] + a["teardown"]
        for a in tests["attempts"]["test_costly.py::test_shaky"][:-1]
    )
    assert cost["tests"]["device_seconds"] == pytest.approx(
        (sum(totals.values()) + earlier) * share, abs=1e-3
    )
    assert cost["reruns"]["device_seconds"] == pytest.approx(earlier * share, abs=1e-3)
    assert cost["reruns"]["device_seconds"] > 0.02 * share * 0.9
    # Workers run side by side, each on its share: the tests never hold more than the run.
    assert cost["run"]["device_seconds"] >= cost["tests"]["device_seconds"] * 0.99
    # Both rounded as written (dollars to the microdollar, device-seconds to the ms).
    expected = cost["run"]["device_seconds"] / 3600 * 1.2
    assert cost["run"]["usd"] == pytest.approx(expected, rel=1e-3, abs=2e-6)
    assert list(cost["modules"]) == ["test_costly.py"]
    assert cost["top_tests"][0]["id"] == "test_costly.py::test_slow"
    assert cost["runs_per_month"] is None  # no baseline: no frequency
    result.stdout.fnmatch_lines(
        [
            "*- pytest-accel cost -*",
            "cost on tpu/v5e/x8 at $1.20 per device-hour (--accel-price: tpu/*): this run $*"
            " device-seconds: 8 device(s) for * s); its tests $* (* device-seconds), reruns"
            " $* (*% of the tests')",
            "costliest modules: test_costly.py $*",
            "costliest tests: test_costly.py::test_slow $*, test_costly.py::test_shaky $*",
        ]
    )


def test_the_budget_fails_a_run_that_cost_more_and_passes_one_within_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    over = pytester.runpytest("--accel-price=cpu/*=36000", "--accel-cost-budget=0.000001")
    assert over.ret == 1
    over.stdout.fnmatch_lines(
        [
            "over budget: $* of --accel-cost-budget $0.00000100",
            "pytest-accel: exit status 1: this run cost $* on cpu/x1, over"
            " --accel-cost-budget $0.00000100",
        ]
    )
    within = pytester.runpytest("--accel-price=cpu/*=0.05", "--accel-cost-budget=100")
    assert within.ret == 0
    within.stdout.fnmatch_lines(["within budget: $* of --accel-cost-budget $100.00"])


def test_a_price_given_for_a_key_that_is_not_the_runs_says_which_key_it_was(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--accel-price cpu=0.10`` is a glob that matches no key (the run's is cpu/x1):
    the run said only that it had no price, as if none was given."""
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest("--accel-price=cpu=0.10", "--accel-price=tpu/*=1.2")
    assert result.ret == 0
    said = (
        "cost on cpu/x1 (no price given matches this key: given for 'cpu', 'tpu/*'; a key is"
        " a glob over hardware keys, e.g. --accel-price 'cpu/*=USD'; device-seconds only):"
    )
    result.stdout.fnmatch_lines([f"{said} this run no price *"])
    assert said.replace("*", "\\*") in summary.read_text()
    plain = pytester.runpytest("--accel-price=cpu/x1=0.10")
    plain.stdout.fnmatch_lines(
        ["cost on cpu/x1 at $0.100 per device-hour (--accel-price: cpu/x1)*"]
    )


def test_a_budget_without_a_price_for_the_key_stops_before_any_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    result = pytester.runpytest("--accel-price=tpu/*=1.2", "--accel-cost-budget=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --accel-cost-budget needs a price for the hardware key 'cpu/x1' (prices"
            " given for: tpu/*); add --accel-price 'cpu/x1=USD'"
        ]
    )
    assert "passed" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--accel-price=cpu/x1"], "ERROR: --accel-price: 'cpu/x1' is not KEY=USD*"),
        (
            ["--accel-price=cpu/x1=cheap"],
            "ERROR: --accel-price: cpu/x1: 'cheap' is not a price*",
        ),
        (
            ["--accel-price=cpu/x1=-1"],
            "ERROR: --accel-price: cpu/x1: '-1' is not a price*",
        ),
        (
            ["--accel-cost-budget=lots"],
            "ERROR: --accel-cost-budget: 'lots' is not a positive number",
        ),
        (["--accel-prices=missing.json"], "ERROR: --accel-prices: missing.json: no such file"),
        # float() takes these; a price is ASCII digits.
        (["--accel-price=cpu/x1=1_000"], "ERROR: --accel-price: cpu/x1: '1_000' is not a price*"),
        (
            ["--accel-price=cpu/x1=\uff10.\uff15"],
            "ERROR: --accel-price: cpu/x1: '\uff10.\uff15' is not a price*",
        ),
        # A budget of 0 fails every priced run: not a budget.
        (["--accel-cost-budget=0"], "ERROR: --accel-cost-budget: '0' is not a positive number"),
    ],
)
def test_a_bad_price_is_one_line_naming_it(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_prices_come_from_a_file_and_the_ini_and_the_first_match_wins(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    (pytester.path / "prices.json").write_text(
        json.dumps({"as_of": "2026-11-01", "prices": {"cpu/x1": 0.25, "cpu/*": 9.0}})
    )
    pytester.makeini("[pytest]\naccel_price =\n    tpu/*=1.5\n")
    result = pytester.runpytest("--accel-prices=prices.json", "--perf-record=r.json")
    assert result.ret == 0
    cost = record(pytester)["cost"]
    assert cost["price_per_device_hour"] == 0.25
    assert cost["price_source"] == "prices.json: cpu/x1"
    assert cost["price_as_of"] == "2026-11-01"
    result.stdout.fnmatch_lines(
        ["cost on cpu/x1 at $0.250 per device-hour (prices.json: cpu/x1, prices as of 2026-11-01)*"]
    )
    bad = pytester.path / "bad.json"
    bad.write_text(json.dumps({"prices": {"cpu/*": "a lot"}}))
    result = pytester.runpytest("--accel-prices=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --accel-prices: bad.json: prices['cpu/*']: 'a lot' is not a price in USD per"
        " device-hour (e.g. 1.20)"
    )


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"as_of": 5, "prices": {"cpu/*": 1}}, "as_of: expected a date YYYY-MM-DD, got 5"),
        ({"as_of": "2026-13-01", "prices": {"cpu/*": 1}}, "as_of: '2026-13-01' is not a real date"),
        ({"as_of": "1 Nov", "prices": {"cpu/*": 1}}, "as_of: expected a date YYYY-MM-DD, got*"),
        ({"prices": {" ": 1}}, "prices: an empty KEY; a key is a glob over hardware keys"),
    ],
    ids=["a number", "no such day", "not ISO", "an empty key"],
)
def test_a_prices_file_with_a_bad_date_or_key_is_one_line_naming_it(
    pytester: pytest.Pytester, doc: dict[str, object], problem: str
) -> None:
    """The date is shown beside every cost as how old the prices are, and a key of
    nothing matches no run: each is refused as the command line refuses them."""
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    (pytester.path / "prices.json").write_text(json.dumps(doc))
    result = pytester.runpytest("--accel-prices=prices.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --accel-prices: prices.json: {problem}"])
    assert "passed" not in result.stdout.str()


@pytest.mark.skipif(importlib.util.find_spec("tomllib") is None, reason="TOML needs Python 3.11")
def test_a_toml_prices_file_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('as_of = 2026-11-01\n[prices]\n"tpu/*" = 1.2\n"cpu/x1" = 0.05\n')
    table = price_table([], str(path))
    found = table.price_for("tpu/v5e/x8")
    assert found is not None
    assert (found.usd_per_device_hour, found.as_of) == (1.2, "2026-11-01")
    assert table.price_for("cuda/H100/x8") is None


def test_the_monthly_projection_comes_from_the_baselines_runs_of_the_key(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_costly="import time\n"
        "def test_a():\n    time.sleep(0.01)\n"
        "def test_b():\n    time.sleep(0.01)\n"
    )
    for _ in range(3):
        pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    baseline = json.loads((pytester.path / "b.json").read_text())
    now = datetime.now(timezone.utc)
    for back, run in zip((6, 4, 2), baseline["envs"]["cpu/x1"]["runs"], strict=True):
        run["started"] = (now - timedelta(days=back)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (pytester.path / "b.json").write_text(json.dumps(baseline))
    result = pytester.runpytest(
        "--perf-baseline=b.json", "--accel-price=cpu/*=3600", "--perf-record=r.json"
    )
    cost = record(pytester)["cost"]
    # Four runs over six days: one every two days, fifteen a month.
    assert cost["runs_per_month"] == pytest.approx(15.0, rel=0.01)
    assert cost["per_month_usd"] == pytest.approx(cost["run"]["usd"] * 15, rel=0.02, abs=0.01)
    result.stdout.fnmatch_lines(
        ["about $* a month at 15.0 run(s) a month (the baseline's runs of this key)"]
    )


def test_runs_per_month_needs_three_runs_over_an_hour() -> None:
    assert runs_per_month(["2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"]) is None
    assert (
        runs_per_month(["2026-11-01T00:00:00Z", "2026-11-01T00:10:00Z", "2026-11-01T00:20:00Z"])
        is None
    )
    assert runs_per_month(
        ["2026-11-03T00:00:00Z", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"]
    ) == pytest.approx(30.0)


def test_the_job_summary_shows_the_cost_and_the_costliest_modules(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest("--accel-price=cpu/*=0.05").assert_outcomes(passed=1)
    text = summary.read_text()
    assert "### pytest-accel cost" in text
    assert "cost on cpu/x1 at $0.0500 per device-hour" in text
    assert "| test\\_costly.py | " in text  # escaped for Markdown


def test_the_report_shows_the_cost_table_of_each_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_costly="def test_a():\n    pass\n")
    result = pytester.runpytest(
        "--accel-price=cpu/*=0.05", "--accel-report=page.html", "--perf-record=r.json"
    )
    assert result.ret == 0
    page = (pytester.path / "page.html").read_text()
    assert '<h2 id="cost">Cost</h2>' in page
    assert "$0.0500 / device-hour" in page
    assert '<table id="cost-modules"' in page
    # Each test's cost beside its seconds: seconds x devices per test x price.
    slowest = page.split('<table id="slowest-tests"', 1)[1].split("</table>", 1)[0]
    assert "<th>cost</th>" in slowest
    record = json.loads((pytester.path / "r.json").read_text())
    seconds = record["tests"]["total"][0]
    assert f'data-v="{seconds * 0.05 / 3600:.8f}"' in slowest


JAX_SUITE = """
import jax
import jax.numpy as jnp

def test_compiles_for_the_device():
    jax.jit(lambda x: x * 3 + 1)(jnp.ones(7)).block_until_ready()

def test_pure_python():
    assert sum(range(10)) == 45
"""


@pytest.mark.requires("jax")
@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_a_test_that_compiled_nothing_on_an_accelerator_is_a_cpu_tier_candidate(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_jax=JAX_SUITE)
    result = run_serial_or_xdist(
        pytester,
        "--accel-emulate=tpu",  # a TPU run's selection; JAX compiles for real, on CPU
        "--accel-price=tpu*=1.20",
        "--perf-record=r.json",
        "--accel-report=page.html",
        *workers,
    )
    assert result.ret == 0
    data = record(pytester)
    jsonschema.validate(data, RECORD_SCHEMA)
    compiles = data["tests"]["compiles"]
    assert compiles["test_jax.py::test_pure_python"] == 0
    assert compiles["test_jax.py::test_compiles_for_the_device"] >= 1  # jit, and ones()
    assert [c["id"] for c in data["cost"]["cpu_candidates"]] == ["test_jax.py::test_pure_python"]
    result.stdout.fnmatch_lines(
        [
            "CPU-tier candidates: 1 test(s) passed on tpu/x1 and compiled nothing ($*"
            " a run): test_jax.py::test_pure_python $*"
        ]
    )
    page = (pytester.path / "page.html").read_text()
    assert '<table id="cpu-candidates"' in page


@pytest.mark.processes
def test_a_suite_without_jax_records_no_compiles_and_a_cpu_key_no_candidates(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_plain="def test_a():\n    pass\n")
    assert pytester.runpytest_subprocess("--accel-price=cpu/*=1", "--perf-record=r.json").ret == 0
    data = record(pytester)
    assert "compiles" not in data["tests"]
    assert "cpu_candidates" not in data["cost"]


def _priced(price: float | None, run: float, module: float) -> dict[str, Any]:
    usd = None if price is None else run / 3600 * price
    return {
        "key": "tpu/x4",
        "price_per_device_hour": price,
        "device_count": 4,
        "devices_per_test": 4.0,
        "run": {"device_seconds": run, "usd": usd},
        "tests": {"device_seconds": module, "usd": None},
        "reruns": {"device_seconds": 0.0, "usd": None},
        "modules": {"test_m.py": {"device_seconds": module, "usd": None}},
        "top_tests": [{"id": f"test_m.py::t{run:g}", "device_seconds": module}],
    }


def test_merged_shards_cost_what_each_cost_added_up() -> None:
    merged = merged_section([_priced(3.6, 100.0, 40.0), _priced(3.6, 50.0, 20.0)])
    assert merged is not None
    assert merged["run"] == {"device_seconds": 150.0, "usd": pytest.approx(0.15)}
    assert merged["device_count"] == 8
    assert merged["modules"]["test_m.py"]["device_seconds"] == 60.0
    assert [t["id"] for t in merged["top_tests"]] == ["test_m.py::t100", "test_m.py::t50"]
    # Shards priced differently cannot be added up: the merge says so, writes no cost.
    assert merged_section([_priced(3.6, 100.0, 40.0), _priced(1.2, 50.0, 20.0)]) is None


def test_a_cpu_runs_cost_has_significant_digits_and_the_projection_says_what_it_waits_for(
    pytester: pytest.Pytester,
) -> None:
    """At CPU prices a run once cost "$0.0000", and the monthly projection was blank
    with no reason."""
    pytester.makepyfile(test_cheap="def test_a():\n    pass\n")
    first = pytester.runpytest("--accel-price=cpu/*=0.05")
    first.stdout.fnmatch_lines(
        [
            "cost on cpu/x1 at $0.0500 per device-hour (--accel-price: cpu/*): this run $0.0*",
            "monthly projection: needs 3 runs of cpu/x1 over at least an hour; keep them with"
            " --perf-baseline and --perf-update-baseline",
        ]
    )
    line = next(x for x in first.stdout.lines if x.startswith("cost on cpu/x1"))
    assert "$0.0000 " not in line
    assert re.search(r"this run \$0\.0*[1-9][0-9]{2} \(", line), line  # three digits
    for _ in range(2):
        pytester.runpytest(
            "--accel-price=cpu/*=0.05", "--perf-baseline=b.json", "--perf-update-baseline"
        )
    third = pytester.runpytest("--accel-price=cpu/*=0.05", "--perf-baseline=b.json")
    third.stdout.fnmatch_lines(
        [
            "monthly projection: needs 3 runs of cpu/x1 over at least an hour; the baseline"
            " and this run hold 3 over * minute(s)"
        ]
    )
