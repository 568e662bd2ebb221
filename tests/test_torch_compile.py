"""torch.compile's compilations per test (``perf.compiles``): counted from Dynamo's
compile callbacks from the moment ``torch._dynamo`` is imported, recorded like JAX's,
and a test that recompiles far more than in its baseline is RECOMPILED.  Against a
fake ``torch`` package imported for real (``fakedevices.FAKE_TORCH_PACKAGE``), and
against PyTorch itself where it is installed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakedevices import FAKE_TORCH_PACKAGE

SUITE = """
import os

from torch._dynamo.callback import compiled


def test_once():
    compiled("0/0")


def test_retraces():
    # frame 1 compiled anew on every call (a new closure, a changing Python scalar)
    for attempt in range(int(os.environ.get("CALLS", "2"))):
        compiled(f"1/{attempt}")
    compiled("2/0", trigger="LAZY_BACKWARD")  # a lazy backward: seconds, no graph


def test_plain():
    pass
"""


@pytest.fixture
def torch_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    for path, text in FAKE_TORCH_PACKAGE.items():
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(text)
    pytester.makepyfile(test_compiled=SUITE)
    return pytester


def recorded(pytester: pytest.Pytester) -> dict[str, Any]:
    tests: dict[str, Any] = json.loads((pytester.path / "r.json").read_text())["tests"]
    return tests


@pytest.mark.processes
def test_each_tests_graphs_and_recompilations_are_recorded(torch_suite: pytest.Pytester) -> None:
    result = torch_suite.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    tests = recorded(torch_suite)
    assert tests["compiles"] == {
        "test_compiled.py::test_once": 1,
        "test_compiled.py::test_retraces": 2,
        "test_compiled.py::test_plain": 0,
    }
    assert tests["recompiles"]["test_compiled.py::test_retraces"] == 1
    assert tests["repeats"] == {"test_compiled.py::test_retraces": 2}
    assert tests["compile_seconds"]["test_compiled.py::test_plain"] == 0


@pytest.mark.processes
def test_a_test_that_recompiles_far_more_than_its_baseline_is_recompiled(
    torch_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        torch_suite.runpytest_subprocess(
            "--perf-baseline=b.json", "--perf-update-baseline", "-p", "no:cacheprovider"
        ).assert_outcomes(passed=3)
    monkeypatch.setenv("CALLS", "12")
    result = torch_suite.runpytest_subprocess(
        "--perf-baseline=b.json", "--perf-fail", "--perf-record=now.json", "-p", "no:cacheprovider"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "RECOMPILED test test_compiled.py::test_retraces: 11 recompilation(s) of functions"
            " it had compiled already, at most 1 in 3 baseline run(s)*"
        ]
    )
    (recompiled,) = json.loads((torch_suite.path / "now.json").read_text())["comparison"][
        "recompiled"
    ]
    assert (recompiled["current"], recompiled["baseline"]) == (11, 1)


SLOW_IMPORTS = """

def test_first_compile():
    # What torch.compile's first call does: import Dynamo, then Inductor, then compile.
    from torch._dynamo.callback import compiled
    import torch._inductor.compile_fx

    compiled("0/0")


def test_second_compile():
    from torch._dynamo.callback import compiled

    compiled("1/0")
"""
IMPORT_SECONDS = 0.3  # each of the two imports sleeps this long, at least


def slow_torch_package(pytester: pytest.Pytester) -> None:
    """The fake torch, with Dynamo's and Inductor's imports taking seconds."""
    sleep = f"import time\ntime.sleep({IMPORT_SECONDS})\n"
    files = {
        **FAKE_TORCH_PACKAGE,
        "torch/_dynamo/__init__.py": sleep + FAKE_TORCH_PACKAGE["torch/_dynamo/__init__.py"],
        "torch/_dynamo/repro/__init__.py": "",
        "torch/_dynamo/repro/after_dynamo.py": sleep,
        "torch/_inductor/__init__.py": "",
        "torch/_inductor/compile_fx.py": sleep,
        "own_slow_module.py": sleep,
    }
    for path, text in files.items():
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(text)


@pytest.mark.processes
def test_the_compilers_import_in_a_test_is_compiling_time(pytester: pytest.Pytester) -> None:
    """torch.compile's first call imports Dynamo and Inductor (3.8 s for Dynamo alone on
    a GPU machine): the process's first compilation, taken out of the judged call of
    the test that happens to pay it."""
    slow_torch_package(pytester)
    pytester.makepyfile(test_slow=SLOW_IMPORTS)
    result = pytester.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    tests = recorded(pytester)
    first, second = "test_slow.py::test_first_compile", "test_slow.py::test_second_compile"
    assert tests["call_compile_seconds"][first] >= 2 * IMPORT_SECONDS
    assert tests["compile_seconds"][first] >= 2 * IMPORT_SECONDS
    assert tests["compiles"] == {first: 1, second: 1}
    # Nothing imported in the second: its compile is the fake's instant one.
    assert tests["compile_seconds"][second] < IMPORT_SECONDS


@pytest.mark.processes
def test_the_compilers_import_at_collection_is_no_tests(pytester: pytest.Pytester) -> None:
    slow_torch_package(pytester)
    pytester.makepyfile(
        test_slow="import torch._dynamo\nimport torch._inductor.compile_fx\n" + SLOW_IMPORTS
    )
    result = pytester.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    seconds = recorded(pytester)["compile_seconds"]
    assert sum(seconds.values()) < IMPORT_SECONDS, seconds


@pytest.mark.processes
def test_the_compilers_later_imports_are_compiling_time(pytester: pytest.Pytester) -> None:
    """Dynamo imported at collection (as einops' suite does), its debugging wrapper of
    the backend imported by a test's first torch.compile (0.3 s there): that test's
    compiling time.  A module of the project's own imported by a test stays its own."""
    slow_torch_package(pytester)
    pytester.makepyfile(
        test_later="""
        from torch._dynamo.callback import compiled


        def test_first_compile():
            import torch._dynamo.repro.after_dynamo

            compiled("0/0")


        def test_own_import():
            import own_slow_module
        """
    )
    result = pytester.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    tests = recorded(pytester)
    assert tests["call_compile_seconds"]["test_later.py::test_first_compile"] >= IMPORT_SECONDS
    assert tests["compile_seconds"]["test_later.py::test_own_import"] < IMPORT_SECONDS
    own = tests["id"].index("test_later.py::test_own_import")
    assert tests["call"][own] >= IMPORT_SECONDS


@pytest.mark.requires("torch")
def test_torch_compile_itself_is_counted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_real="""
        import torch

        def test_new_shapes_compile_anew():
            double = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
            for n in range(3):
                double(torch.ones(n + 1))

        def test_nothing_compiled():
            assert torch.ones(2).sum() == 2
        """
    )
    result = pytester.runpytest_subprocess("--perf-record=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    tests = recorded(pytester)
    # Three shapes of one frame with dynamic=False: three graphs, two recompilations.
    assert tests["compiles"] == {
        "test_real.py::test_new_shapes_compile_anew": 3,
        "test_real.py::test_nothing_compiled": 0,
    }
    assert tests["recompiles"]["test_real.py::test_new_shapes_compile_anew"] == 2
    assert tests["compile_seconds"]["test_real.py::test_new_shapes_compile_anew"] > 0
