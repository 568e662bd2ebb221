"""What became of the files a user named is said under ``-q``, as pytest keeps its own
warnings there; ``-qq`` hides it (issue 57: a cold CI cache, a baseline path that does
not exist yet, was silent under ``-q``)."""

from __future__ import annotations

import pytest

SUITE = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("--perf-baseline=ci/baseline.json", "--perf-update-baseline"),
            "perf: no baseline at ci/baseline.json yet (this run starts it)",
        ),
        (("--perf-record=r.json",), "pytest-accel: timing record of 2 test(s) written to r.json"),
        (
            ("--accel-map=map.db", "--accel-map-programs=off"),
            "pytest-accel: dependency map of 2 test(s) written to map.db (*",
        ),
        (
            ("--flaky-history=h.json",),
            "pytest-accel: flaky history for 'cpu/x1' updated in h.json",
        ),
        (("--flaky-report=f.json",), "pytest-accel: flaky report written to f.json"),
        (("--accel-report=p.html",), "pytest-accel: HTML report written to p.html"),
    ],
    ids=["cold baseline", "record", "map", "flaky history", "flaky report", "page"],
)
def test_a_file_the_user_named_is_said_under_q_not_qq(
    pytester: pytest.Pytester, args: tuple[str, ...], said: str
) -> None:
    pytester.makepyfile(test_mod=SUITE)
    quiet = pytester.runpytest("-p", "no:cacheprovider", "-q", *args)
    quiet.assert_outcomes(passed=2)
    quiet.stdout.fnmatch_lines([said])
    quiet.stdout.no_fnmatch_line("*- pytest-accel * -*")  # no section bar under -q
    for made in ("r.json", "map.db", "h.json", "ci/baseline.json", "f.json", "p.html"):
        (pytester.path / made).unlink(missing_ok=True)
    quieter = pytester.runpytest("-p", "no:cacheprovider", "-qq", *args)
    assert quieter.ret == pytest.ExitCode.OK
    quieter.stdout.no_fnmatch_line(said)


def test_a_section_has_no_blank_line_under_its_title_nor_before_pytests_summary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_mod=SUITE + "\n\nimport pytest\n\n\ndef test_c():\n    pytest.skip('x')\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", "--perf-record=r.json")
    lines = result.stdout.lines
    bar = next(i for i, line in enumerate(lines) if "- pytest-accel performance -" in line)
    assert lines[bar + 1].startswith("pytest-accel: timing record of 3 test(s)"), lines
    summary = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    assert lines[summary - 1].strip(), lines  # no blank line before it
    assert lines[bar - 1].strip(), lines  # nor before the bar
