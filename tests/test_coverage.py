"""What a run covers per hardware key: the record keeps why pytest-accel's markers
skipped a test (also under xdist); ``--accel-min-coverage`` gates a run; ``pytest-accel
coverage`` puts keys side by side, names the tests that pass on one and not another,
and shows each key's trend; the HTML report draws the matrix."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_accel.cli import main
from tests.browser import NEEDS_CHROMIUM, measure

SCHEMA = "schemas/record.schema.json"

SUITE = """
import pytest

def test_everywhere():
    pass

@pytest.mark.tpu
def test_tpu_only():
    pass

@pytest.mark.tpu
def test_tpu_too():
    pass

@pytest.mark.skipif(True, reason="infra")
def test_skipped_by_user():
    pass

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False

def test_fails():
    assert False

def test_quarantined():
    assert False
"""


def run_on(pytester: pytest.Pytester, name: str, *args: str) -> Path:
    """The suite on CPU, or (``--accel-emulate=tpu``) as the selection of a TPU runner."""
    (pytester.path / "q.txt").write_text("test_cover.py::test_quarantined\n")
    pytester.runpytest(f"--perf-record={name}", "--flaky-quarantine=q.txt", *args)
    return pytester.path / name


@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.requires("xdist")),
    ],
)
@pytest.mark.processes
def test_the_record_keeps_why_the_markers_skipped_a_test(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_cover=SUITE)
    record = json.loads(run_on(pytester, "cpu.json", *workers).read_text())
    jsonschema.validate(record, json.loads(files("pytest_accel").joinpath(SCHEMA).read_text()))
    skips = record["tests"]["platform_skips"]
    assert sorted(skips) == ["test_cover.py::test_tpu_only", "test_cover.py::test_tpu_too"]
    assert skips["test_cover.py::test_tpu_only"].startswith("requires tpu x1 (detected: cpu x1")
    assert record["tests"]["quarantined"] == ["test_cover.py::test_quarantined"]


def test_the_gate_fails_a_run_below_the_target_and_says_why(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cover=SUITE)
    (pytester.path / "q.txt").write_text("test_cover.py::test_quarantined\n")
    result = pytester.runpytest("--flaky-quarantine=q.txt", "--accel-min-coverage=50")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*- pytest-accel coverage -*",
            "coverage: 1 of 7 test(s) pass on cpu/x1 (14.29%); 1 failed, 1 quarantined,"
            " 1 xfailed, 2 skipped by pytest-accel markers, 1 skipped otherwise (2x requires"
            " tpu x1 *); --accel-min-coverage 50: below",
            "pytest-accel: exit status 1: coverage 14.29% on cpu/x1 is below"
            " --accel-min-coverage 50",
        ]
    )
    pytester.makepyfile(test_cover="def test_a():\n    pass\n")
    result = pytester.runpytest("--accel-min-coverage=100")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["coverage: 1 of 1 test(s) pass on cpu/x1 (100.00%)*: within"])


def test_the_gate_refuses_a_percentage_above_a_hundred(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cover="def test_a():\n    pass\n")
    result = pytester.runpytest("--accel-min-coverage=120")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-min-coverage: '120' is above 100*"])


def test_the_command_puts_keys_side_by_side_and_names_what_one_key_lacks(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_cover=SUITE)
    cpu = run_on(pytester, "cpu.json")
    tpu = run_on(pytester, "tpu.json", "--accel-emulate=tpu", "--perf-env-key=tpu/v5e/x4")
    capsys.readouterr()
    assert main(["coverage", str(cpu), str(tpu), "--format", "json"]) == 0
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert payload["keys"]["cpu/x1"]["passed"] == 1
    assert payload["keys"]["cpu/x1"]["skipped_platform"] == 2
    assert payload["keys"]["tpu/v5e/x4"]["passed"] == 3
    assert payload["keys"]["tpu/v5e/x4"]["covered_pct"] == pytest.approx(300 / 7, abs=0.01)
    (gap,) = payload["gaps"]
    assert (gap["covered_on"], gap["missing_on"], gap["count"]) == ("tpu/v5e/x4", "cpu/x1", 2)
    assert gap["tests"] == {
        "skipped_platform": ["test_cover.py::test_tpu_only", "test_cover.py::test_tpu_too"]
    }
    assert main(["coverage", str(cpu), str(tpu)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1 of 7 test(s) pass on cpu/x1 (14.29%)")
    assert out[2] == (
        "passing on tpu/v5e/x4, not on cpu/x1: 2 test(s) (2 skipped by pytest-accel markers)"
    )
    assert "  test_cover.py::test_tpu_only (skipped by pytest-accel markers)" in out
    assert main(["coverage", str(cpu), str(tpu), "--min-pct", "30"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "--min-pct 30: below on cpu/x1"


def test_the_command_shows_each_keys_trend_over_its_records(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(
        test_cover="import pytest\ndef test_a():\n    pass\n"
        "@pytest.mark.tpu\ndef test_b():\n    pass\n"
    )
    first = run_on(pytester, "first.json", "--perf-env-key=new-chip")
    pytester.makepyfile(test_cover="def test_a():\n    pass\ndef test_b():\n    pass\n")
    data = json.loads(run_on(pytester, "second.json", "--perf-env-key=new-chip").read_text())
    data["run"]["started"] = "2099-01-01T00:00:00Z"  # the later run, whatever the clock
    (pytester.path / "second.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["coverage", str(pytester.path / "second.json"), str(first)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 of 2 test(s) pass on new-chip (100.00%)")
    assert out[1] == "  trend on new-chip: 50.0% -> 100.0% over 2 run(s)"


@pytest.mark.processes
def test_the_command_reads_no_pytest_and_refuses_a_bad_record_in_one_line(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "pytest-accel/record", "version": 3}')
    completed = subprocess.run(
        [sys.executable, "-m", "pytest_accel", "coverage", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert (
        completed.stderr == f"pytest-accel: error: {bad}: run: expected an object, got NoneType\n"
    )


def test_the_report_draws_the_coverage_matrix_and_the_gaps(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_cover=SUITE)
    cpu = run_on(pytester, "cpu.json")
    tpu = run_on(pytester, "tpu.json", "--accel-emulate=tpu", "--perf-env-key=tpu/v5e/x4")
    out = pytester.path / "page.html"
    assert main(["report", str(cpu), str(tpu), "-o", str(out)]) == 0
    page = out.read_text()
    assert '<table id="coverage-matrix"' in page
    assert '<td class="n" data-v="14.2857">14.29%</td>' in page
    assert '2 test(s) pass on <span class="id">tpu/v5e/x4</span> but not on' in page


@NEEDS_CHROMIUM
@pytest.mark.processes
def test_the_coverage_table_fits_its_section_in_a_real_browser(
    pytester: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 1400 px the coverage table ends inside the page's column, as the other
    tables do: nothing to scroll sideways, no cell under the page's edge."""
    pytester.makepyfile(test_cover=SUITE)
    records = [run_on(pytester, "cpu.json")]
    for index, key in enumerate(("tpu/TPU v5 lite/x8", "cuda/NVIDIA H100 80GB HBM3/x8")):
        emulate, key_option = f"--accel-emulate={key.split('/', 1)[0]}", f"--perf-env-key={key}"
        records.append(run_on(pytester, f"r{index}.json", emulate, key_option))
    out = pytester.path / "page.html"
    assert main(["report", *map(str, records), "-o", str(out)]) == 0
    found = measure(out, tmp_path)
    body = found["body"]
    assert "coverage-matrix" in found["tables"]
    wider = {name: t for name, t in found["tables"].items() if t["right"] > body["right"] + 0.5}
    assert wider == {}, body


def test_merged_shards_cover_what_one_unsharded_run_covers(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_cover=SUITE)
    whole = run_on(pytester, "whole.json")
    shards = [run_on(pytester, f"s{k}.json", f"--accel-shard={k}/2") for k in (1, 2)]
    merged = pytester.path / "merged.json"
    assert main(["merge", "-o", str(merged), *map(str, shards)]) == 0
    data = json.loads(merged.read_text())
    assert sorted(data["tests"]["platform_skips"]) == [
        "test_cover.py::test_tpu_only",
        "test_cover.py::test_tpu_too",
    ]
    assert data["tests"]["quarantined"] == ["test_cover.py::test_quarantined"]
    capsys.readouterr()
    counts = []
    for path in (whole, merged):
        assert main(["coverage", str(path), "--format", "json"]) == 0
        found = json.loads(capsys.readouterr().out)["keys"]["cpu/x1"]
        counts.append({k: v for k, v in found.items() if k not in ("started", "trend")})
    assert counts[0] == counts[1]
