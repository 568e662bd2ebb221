"""``--collect-only`` runs nothing, so nothing is timed, compared or written; a bad
marker keyword is reported for every test that has one, all at once."""

from __future__ import annotations

import json

import pytest

PASSING = "def test_a(): pass\ndef test_b(): pass\n"


def test_collect_only_prints_no_perf_or_flaky_section_and_writes_nothing(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline").assert_outcomes(passed=2)
    (pytester.path / "h.json").write_text("")  # would be an error if it were read
    before = (pytester.path / "b.json").read_bytes()
    result = pytester.runpytest(
        "--collect-only",
        "--perf-record=r.json",
        "--perf-baseline=b.json",
        "--perf-update-baseline",
        "--flaky-report=f.json",
        "--accel-report=page.html",
    )
    assert result.ret == 0
    result.stdout.no_fnmatch_line("*pytest-accel performance*")
    result.stdout.no_fnmatch_line("*pytest-accel flaky*")
    result.stdout.no_fnmatch_line("perf: *")
    result.stdout.fnmatch_lines(["*2 tests collected*"])
    for name in ("r.json", "f.json", "page.html"):
        assert not (pytester.path / name).exists()
    assert (pytester.path / "b.json").read_bytes() == before


def test_collect_only_still_plans_shards_from_the_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    pytester.runpytest("--perf-baseline=b.json", "--perf-update-baseline")
    result = pytester.runpytest("--collect-only", "--perf-baseline=b.json", "--accel-shard=1/2")
    result.stdout.fnmatch_lines(["accel-shard 1/2 by class: 1 test(s), estimated*"])


def test_every_bad_marker_keyword_is_reported_at_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.tpu(min_devces=4, knd="v5*")
        def test_a():
            pass

        @pytest.mark.multi_gpu(m=2)
        def test_b():
            pass

        def test_fine():
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: 2 bad pytest-accel markers:",
            "test_every_bad_marker_keyword_is_reported_at_once.py::test_a: @pytest.mark.tpu:"
            " unknown keywords 'knd' (did you mean kind=?), 'min_devces' (did you mean"
            " min_devices=?); it takes min_devices=, kind=",
            "test_every_bad_marker_keyword_is_reported_at_once.py::test_b:"
            " @pytest.mark.multi_gpu: unknown keyword 'm' (did you mean n=?); it takes n=",
        ]
    )
    assert "passed" not in result.stdout.str()


def test_a_flaky_history_is_not_given_an_empty_run_by_collect_only(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(PASSING)
    pytester.runpytest("--flaky-history=h.json").assert_outcomes(passed=2)
    pytester.runpytest("--collect-only", "--flaky-history=h.json")
    history = json.loads((pytester.path / "h.json").read_text())
    assert len(history["envs"]["cpu/x1"]["runs"]) == 1
