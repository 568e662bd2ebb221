"""Like with like (issue 58): the versions of jax, jaxlib, libtpu, torch, CUDA and ROCm
are in every record, and ``--accel-key-facets`` makes them part of the hardware key, so
a run is judged against runs of the same versions; ``compare --accel-key`` compares two
facets of one device kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_accel.hardware.detection import framework_versions

SUITE = """
import time

def test_steady():
    time.sleep(0.15)

def test_quick():
    pass
"""


def _installed(root: Path, *dist_infos: str) -> Path:
    """A folder on ``sys.path`` that holds these distributions (their metadata only)."""
    for name in dist_infos:
        (root / name).mkdir(parents=True)
    return root


def test_the_runtimes_versions_are_read_from_their_distributions_and_rocms_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _installed(
        tmp_path / "site",
        "libtpu-0.0.21.dist-info",
        "nvidia_cuda_runtime_cu12-12.4.127.dist-info",
        "jax-0.7.2.dist-info",
    )
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    sysroot = tmp_path / "root"
    (sysroot / "opt/rocm/.info").mkdir(parents=True)
    (sysroot / "opt/rocm/.info/version").write_text("6.2.1-116\n")
    versions = framework_versions(sysroot)
    assert versions["libtpu"] == "0.0.21"
    assert versions["cuda"] == "12.4.127"
    assert versions["rocm"] == "6.2.1"
    assert versions["jax"] == "0.7.2"  # the first on the path wins, as Python's import


@pytest.mark.processes
def test_facets_key_the_runs_by_version_and_compare_crosses_them(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three runs with jax 0.7.2 (a distribution first on the path), then one with the
    installed jax: a key of its own, nothing compared; ``compare --accel-key`` judges
    it against the 0.7.2 runs."""
    pytester.makepyfile(test_s=SUITE)
    old = _installed(tmp_path / "old-jax", "jax-0.7.2.dist-info")
    installed = framework_versions().get("jax") or "none"  # the release matrix has no jax
    monkeypatch.setenv("PYTHONPATH", str(old))
    for index in range(3):
        pytester.runpytest_subprocess(
            "--accel-key-facets=jax", f"--perf-record=r{index}.json", "-p", "no:randomly"
        ).assert_outcomes(passed=2)
    monkeypatch.delenv("PYTHONPATH")
    keys = {json.loads((pytester.path / f"r{i}.json").read_text())["env"]["key"] for i in range(3)}
    assert keys == {"cpu/x1/jax-0.7.2"}
    assert (
        pytester.run(
            sys.executable,
            "-m",
            "pytest_accel",
            "baseline",
            "r0.json",
            "r1.json",
            "r2.json",
            "--into",
            "b.json",
        ).ret
        == 0
    )
    now = pytester.runpytest_subprocess(
        "--accel-key-facets=jax", "--perf-baseline=b.json", "--perf-record=new.json"
    )
    now.stdout.fnmatch_lines(
        [
            f"perf: b.json has no timings for 'cpu/x1/jax-{installed}'; nothing compared (it has:"
            " cpu/x1/jax-0.7.2)*"
        ]
    )
    across = pytester.run(
        sys.executable,
        "-m",
        "pytest_accel",
        "compare",
        "new.json",
        "--baseline",
        "b.json",
        "--accel-key",
        "cpu/x1/jax-0.7.2",
    )
    assert across.ret == 0
    across.stdout.fnmatch_lines(["perf: 0 regression(s), * compared under cpu/x1/jax-0.7.2"])


def test_an_unknown_facet_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SUITE)
    result = pytester.runpytest_inprocess("--accel-key-facets=jax,tensorflow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--accel-key-facets: tensorflow: not a facet (known: jax,*"])
