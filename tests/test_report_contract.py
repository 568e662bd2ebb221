"""The report contract the features share, unit by unit: session-end work isolated so
one failure is one line and the rest still runs, exceptions as one line, the exit
reasons, and warnings through Python's machinery.  (The same paths in real runs are in
test_output_files.py and test_comparison.py.)"""

from __future__ import annotations

import errno
import warnings
from types import SimpleNamespace

import pytest

from pytest_accel.reports import Warned, exit_reasons_key, fail_session, isolated, warn
from pytest_accel.text import problem


class CustomWarning(UserWarning):
    pass


def session_of(pytester: pytest.Pytester, status: int = 0) -> pytest.Session:
    config = pytester.parseconfig()
    return SimpleNamespace(config=config, exitstatus=status)  # type: ignore[return-value]


def test_an_os_error_is_its_file_and_the_systems_words() -> None:
    error = OSError(errno.ENOSPC, "No space left on device", "/ci/record.json")
    assert problem(error) == "/ci/record.json: No space left on device"
    assert problem(PermissionError(13, "Permission denied")) == "Permission denied"


def test_a_bug_of_ours_says_its_type_in_one_line() -> None:
    assert problem(KeyError("tests")) == "KeyError: 'tests'"
    assert problem(TypeError("bad operand")) == "TypeError: bad operand"
    assert problem(RuntimeError("stopped")) == "stopped"
    assert problem(RuntimeError()) == "RuntimeError"


def test_a_failure_inside_isolated_work_fails_the_session_with_a_reason(
    pytester: pytest.Pytester,
) -> None:
    session = session_of(pytester)
    with isolated(session, "write the timing record r.json"):
        raise OSError(errno.EROFS, "Read-only file system", "r.json")
    with isolated(session, "update the baseline b.json"):
        pass  # the next piece still runs, and succeeds
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert session.config.stash[exit_reasons_key] == [
        "could not write the timing record r.json: Read-only file system"  # named once
    ]


def test_a_failing_run_keeps_its_own_exit_status(pytester: pytest.Pytester) -> None:
    session = session_of(pytester, status=pytest.ExitCode.INTERRUPTED)
    fail_session(session, "--perf-fail: 2 regression(s)")
    assert session.exitstatus == pytest.ExitCode.INTERRUPTED
    assert session.config.stash[exit_reasons_key] == ["--perf-fail: 2 regression(s)"]


def test_isolated_work_does_not_swallow_ctrl_c(pytester: pytest.Pytester) -> None:
    session = session_of(pytester)
    with pytest.raises(KeyboardInterrupt), isolated(session, "fold the history"):
        raise KeyboardInterrupt
    assert session.config.stash.get(exit_reasons_key, []) == []


def test_a_warning_goes_through_the_filters_at_the_test_file(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn(config, CustomWarning("2x slower"), "t.py", 7) == Warned()
    [found] = caught
    assert (found.filename, found.lineno, str(found.message)) == ("t.py", 7, "2x slower")


def test_a_warning_turned_into_an_error_is_reported_as_escalated(
    pytester: pytest.Pytester,
) -> None:
    config = pytester.parseconfig()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CustomWarning)
        warned = warn(config, CustomWarning("2x slower"), "t.py", 7)
    assert warned.escalated_by == (
        "Python's warning filter error::CustomWarning (python -W, PYTHONWARNINGS)"
    )


def test_a_blanket_error_filter_shows_the_warning_and_is_named(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warned = warn(config, CustomWarning("2x slower"), "t.py", 7)
    assert warned.escalated_by is None
    assert warned.blanket == "Python's warning filter error::Warning (python -W, PYTHONWARNINGS)"
    assert [str(w.message) for w in caught] == ["2x slower"]


def test_a_path_that_would_start_a_workflow_command_is_defused(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn(config, CustomWarning("x"), "::error::pwned", None)
    assert caught[0].filename == "./::error::pwned"
    assert caught[0].lineno == 0


def test_with_the_warnings_plugin_off_nothing_is_issued(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig("-p", "no:warnings")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warn(config, CustomWarning("x"), "t.py", 1)
    assert caught == []
