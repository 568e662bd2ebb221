from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("jax", "numpy", "filelock", "orjson")


@pytest.mark.parametrize("args", [(), ("-p", "pytest_accel"), ("-p", "pytest_accel.plugin")])
def test_the_plugin_registers_once_however_it_is_named(
    pytester: pytest.Pytester, args: tuple[str, ...]
) -> None:
    pytester.makepyfile("import pytest\n@pytest.mark.tpu\ndef test_t(): pass\n")
    result = pytester.runpytest_subprocess(*args, "--strict-markers")
    result.assert_outcomes(skipped=1)
    assert result.stdout.str().count("accel: cpu x1") == 1


def test_dash_p_loads_the_plugin_when_autoload_is_disabled(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile("import pytest\n@pytest.mark.tpu\ndef test_t(): pass\n")
    result = pytester.runpytest_subprocess("-p", "pytest_accel", "--accel=auto")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["accel: cpu x1 via default*"])


def test_dash_p_no_disables_everything(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import pytest\n@pytest.mark.tpu\ndef test_t(): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel")
    result.assert_outcomes(passed=1)  # nothing skips the test
    assert "accel:" not in result.stdout.str()
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel", "--strict-markers")
    result.stdout.fnmatch_lines(["*'tpu' not found in `markers` configuration option*"])
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel", "--accel=cpu")
    result.stderr.fnmatch_lines(["*unrecognized arguments: --accel=cpu*"])


def test_importing_the_plugin_does_not_import_heavy_modules() -> None:
    code = (
        "import sys, pytest_accel, pytest_accel.plugin, pytest_accel.cli;"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"


def test_a_session_without_features_switched_on_imports_no_heavy_module(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        f"""
        import sys
        def test_modules():
            assert sorted(m for m in {HEAVY!r} if m in sys.modules) == []
        """
    )
    pytester.runpytest_subprocess("-p", "no:xdist").assert_outcomes(passed=1)
