from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("jax", "numpy", "filelock", "orjson", "coverage", "sqlite3", "fsspec", "s3fs")


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("-p", "pytest_accel"),
        ("-p", "pytest_accel.plugin"),
        ("-p", "early", "-p", "pytest_accel"),  # a plugin that imports it, named before
    ],
)
@pytest.mark.processes
def test_the_plugin_registers_once_however_it_is_named(
    pytester: pytest.Pytester, args: tuple[str, ...]
) -> None:
    """However it is named, the plugin registers once, and its modules are imported by
    Python's own import, not through pytest's assertion rewriting (the package and the
    module its ``pytest_plugins`` names are imported by pytest before it can say so),
    while the tests' modules still are rewritten."""
    pytester.makepyfile(early="import pytest_accel.perf.meters\n")
    pytester.makepyfile(
        """
        import sys
        import pytest

        @pytest.mark.tpu
        def test_t():
            pass

        def test_loaders():
            loaders = {
                name: type(module.__loader__).__name__
                for name, module in sys.modules.items()
                if name.startswith("pytest_accel")
            }
            rewritten = {n for n, loader in loaders.items() if loader == "AssertionRewritingHook"}
            assert rewritten <= {"pytest_accel", "pytest_accel.plugin"}, sorted(rewritten)
            assert loaders["pytest_accel.perf.collector"] == "SourceFileLoader"
            assert type(sys.modules[__name__].__loader__).__name__ == "AssertionRewritingHook"
        """
    )
    result = pytester.runpytest_subprocess(*args, "--strict-markers", "--perf-record=r.json")
    result.assert_outcomes(skipped=1, passed=1)
    assert result.stdout.str().count("accel: cpu x1") == 1


@pytest.mark.processes
def test_dash_p_loads_the_plugin_when_autoload_is_disabled(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile("import pytest\n@pytest.mark.tpu\ndef test_t(): pass\n")
    result = pytester.runpytest_subprocess("-p", "pytest_accel", "--accel=auto")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["accel: cpu x1 via default*"])


@pytest.mark.processes
def test_dash_p_no_disables_everything(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import pytest\n@pytest.mark.tpu\ndef test_t(): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel")
    result.assert_outcomes(passed=1)  # nothing skips the test
    assert "accel:" not in result.stdout.str()
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel", "--strict-markers")
    result.stdout.fnmatch_lines(["*'tpu' not found in `markers` configuration option*"])
    result = pytester.runpytest_subprocess("-p", "no:pytest_accel", "--accel=cpu")
    result.stderr.fnmatch_lines(["*unrecognized arguments: --accel=cpu*"])


@pytest.mark.processes
def test_importing_the_plugin_does_not_import_heavy_modules() -> None:
    code = (
        "import sys, pytest_accel, pytest_accel.plugin, pytest_accel.cli;"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"


@pytest.mark.processes
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


@pytest.mark.processes
def test_a_run_with_every_file_switched_on_never_imports_orjson_or_filelock(
    pytester: pytest.Pytester,
) -> None:
    """orjson makes the interpreter's exit slower in proportion to what the process holds
    (docs/benchmarks.md), and filelock's import alone outweighs our use of it: a pytest
    run writes its files with the standard library and locks them with flock."""
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass\n")
    pytester.makeconftest(
        """
        import sys

        def pytest_unconfigure(config):
            loaded = sorted(m for m in ("orjson", "filelock") if m in sys.modules)
            print("loaded at the end:", loaded)
        """
    )
    files = ["--perf-record=r.json", "--perf-baseline=b.json", "--perf-update-baseline"]
    files += ["--flaky-history=h.json", "--flaky-report=f.json", "--accel-report=a.html"]
    for _ in range(2):  # the second run reads what the first wrote
        result = pytester.runpytest_subprocess("-s", "-p", "no:rerunfailures", *files)
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(["loaded at the end: []"])
    record = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert [test.split("::")[1] for test in record["tests"]["id"]] == ["test_a", "test_b"]
    history = json.loads((pytester.path / "h.json").read_text(encoding="utf-8"))
    assert [len(env["runs"]) for env in history["envs"].values()] == [2]


@pytest.mark.processes
def test_comparing_fast_tests_with_a_baseline_needs_no_numpy_until_one_could_be_a_finding(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing numpy costs 0.1 s and 16 MB, most of what the plugin costs on a suite of
    fast tests (docs/benchmarks.md): a comparison that can find nothing runs without it
    (``perf.analysis.quiet``).  Updating the baseline, and a test slow enough to be a finding,
    still use it."""
    pytester.makepyfile(
        """
        import os, time
        def test_a(): pass
        def test_b(): pass
        def test_slow():
            time.sleep(float(os.environ.get("SLOW_SECONDS", "0")))
        """
    )
    pytester.makeconftest(
        """
        import sys

        def pytest_unconfigure(config):
            print("numpy at the end:", "numpy" in sys.modules)
        """
    )
    baseline = ["--perf-baseline=b.json", "-p", "no:xdist", "-s"]
    for _ in range(3):
        result = pytester.runpytest_subprocess(*baseline, "--perf-update-baseline")
        result.stdout.fnmatch_lines(["numpy at the end: True"])  # the summary is derived
    assert "summary" in json.loads((pytester.path / "b.json").read_text())["envs"]["cpu/x1"]
    result = pytester.runpytest_subprocess(*baseline, "--perf-record=r.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["perf: 0 regression(s)*3 test(s) compared*", "numpy at the end: False"]
    )
    comparison = json.loads((pytester.path / "r.json").read_text())["comparison"]
    assert comparison["compared"] == 3
    assert [run["run"] for run in comparison["suite"]["history"]] != []
    monkeypatch.setenv("SLOW_SECONDS", "0.3")
    result = pytester.runpytest_subprocess(*baseline)
    # Which findings a loaded machine's three samples allow is the rule's business
    # (test_comparison.py); here, that the full comparison ran.
    result.stdout.fnmatch_lines(
        ["perf: * regression(s)*3 test(s) compared*", "numpy at the end: True"]
    )


def test_pytest_help_renders_every_options_help_with_the_plugin_loaded(
    pytester: pytest.Pytester,
) -> None:
    """argparse %-formats help strings: one literal ``%`` in one option's help made
    ``pytest --help`` a traceback wherever the plugin was installed."""
    from pytest_accel.plugin import OPTION_GROUPS

    result = pytester.runpytest("--help")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    shown = " ".join(result.stdout.str().split())  # argparse wraps help over lines
    for group in OPTION_GROUPS:
        for spec in group.specs:
            assert spec.flag in shown
            # Each help's words reach the screen as written, a literal % included.
            first_words = " ".join(spec.help.split()[:6])
            assert first_words in shown, (spec.flag, first_words)
    assert "Once more than PCT% of at least 20 executed tests" in shown


@pytest.mark.processes
def test_the_version_is_one_everywhere_pytest_and_the_tool_show_it() -> None:
    """The package once said 0.1.0 while the CHANGELOG described 0.2 and 0.3: the wheel's
    metadata, pytest's plugin line and ``pytest-accel --version`` all read
    ``pytest_accel.__version__``."""
    from importlib.metadata import version

    from pytest_accel import __version__

    assert version("pytest-accel") == __version__
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "-VV", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert f"pytest-accel-{__version__} at " in shown.stdout + shown.stderr
    tool = subprocess.run(
        [sys.executable, "-m", "pytest_accel", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert tool.stdout.strip() == f"pytest-accel {__version__}"
