"""Smoke tests of the installed wheel, run from outside the source tree (.ci/release).

They check what a user gets from `pip install pytest-accel`, not the checkout.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import pytest_accel

HEAVY = ("jax", "numpy", "filelock", "orjson")


def test_the_package_comes_from_the_installed_wheel() -> None:
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(pytest_accel.__file__).resolve().is_relative_to(site)
    assert importlib.metadata.version("pytest-accel") == pytest_accel.__version__


def test_the_pytest11_entry_point_loads() -> None:
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "pytest_accel"
    ]
    assert entry.load() is pytest_accel


def test_importing_the_plugin_does_not_import_heavy_modules() -> None:
    code = (
        "import sys, pytest_accel.plugin\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_json_schemas_ship_inside_the_package() -> None:
    schemas = importlib.resources.files("pytest_accel") / "schemas"
    names = sorted(p.name for p in schemas.iterdir() if p.name.endswith(".json"))
    assert "record.schema.json" in names
    for name in names:
        assert json.loads((schemas / name).read_text(encoding="utf-8"))["$schema"]
    assert (importlib.resources.files("pytest_accel") / "py.typed").is_file()


def test_the_plugin_loads_once_by_entry_point_and_by_p(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.tpu
        def test_on_tpu(): pass

        @pytest.mark.multi_device(1)
        def test_anywhere(): pass
        """
    )
    for args in ([], ["-p", "pytest_accel"]):
        result = pytester.runpytest_subprocess("--strict-markers", "-rs", *args)
        result.assert_outcomes(passed=1, skipped=1)
        result.stdout.fnmatch_lines(["accel: cpu x1 via *", "*requires tpu x1 (detected: cpu x1*"])
    disabled = pytester.runpytest_subprocess("-p", "no:pytest_accel", "--strict-markers")
    disabled.stdout.fnmatch_lines(["*'tpu' not found in `markers` configuration option*"])


def test_every_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    for marker in (
        "accel",
        "tpu",
        "tpu_ci",
        "gpu",
        "cuda",
        "rocm",
        "multi_gpu",
        "multi_device",
        "cpu_only",
        "entry",
        "ray",
        "slow",
        "perf",
    ):
        result.stdout.fnmatch_lines([f"@pytest.mark.{marker}*"])


def test_records_and_flaky_reruns_work_from_the_wheel(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        SEEN = []

        def test_flaky():
            SEEN.append(1)
            assert len(SEEN) > 1
        """
    )
    result = pytester.runpytest_subprocess("--flaky-reruns=1", "--perf-record=record.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*1 rerun, 1 flaky*"])
    record = json.loads((pytester.path / "record.json").read_text())
    assert record["schema"] == "pytest-accel/record"
    test_id = "test_records_and_flaky_reruns_work_from_the_wheel.py::test_flaky"
    assert record["tests"]["id"] == [test_id]
    assert record["tests"]["outcome"] == ["passed"]
    assert [a["outcome"] for a in record["tests"]["attempts"][test_id]] == ["failed", "passed"]


def test_the_command_line_tool_runs(tmp_path: Path) -> None:
    script = str(Path(sys.executable).parent / "pytest-accel")  # the venv's console script
    version = subprocess.run([script, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"pytest-accel {pytest_accel.__version__}"
    detect = subprocess.run(
        [sys.executable, "-m", "pytest_accel", "detect", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(detect.stdout)["platform"] == "cpu"
    bad = subprocess.run(
        [script, "flaky", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr == f"pytest-accel: error: {tmp_path / 'missing.json'}: no such file\n"
