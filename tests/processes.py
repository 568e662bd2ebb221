"""The ``processes`` mark, kept true: a test that starts a process other than git (a
pytest session or the command in a fresh interpreter, xdist workers, the forked
writers' parent, a browser, a script) is marked ``@pytest.mark.processes``, and one
that is not marked fails at the start it makes, saying so.

These are the suite's slow tests: 228 of its 1,930 spend about 70% of its CPU time
(docs/benchmarks.md). ``pytest -m "not processes"`` runs the rest, the quick loop; a
test that needs a fresh process for what it proves (what a run imports, a worker's
devices, a killed run's files) says so with the mark, and a test that only checks a
facet of a run another test makes has no reason to start one.

git is not counted: the plugin itself asks it for the commit in every run that
records, in process.
"""

from __future__ import annotations

import _posixsubprocess
import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

MARK = "processes"
_ALLOWED = frozenset({"git"})

# Fixtures that start processes: every test that uses one is marked (at collection),
# whichever of them is first to set it up on a worker.
PROCESS_FIXTURES = frozenset(
    {
        "project_map",  # a project's dependency map, made by a pytest session of it
        "real_files",  # a record, a baseline and a flaky history from real sessions
        "s3_server",  # moto's S3 server on loopback
    }
)

# The test running in this process and whether it is marked (none between tests:
# collection starts nothing); the fixtures being set up for it, innermost last.
_running: list[tuple[str, bool]] = []
_fixtures: list[str] = []


class UnmarkedProcess(RuntimeError):
    """A test not marked ``processes`` started a process."""


def _program(args: Any) -> str:
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    text = os.fsdecode(first)
    return os.path.basename(text.split()[0] if isinstance(args, str) and text else text)


def check_start(args: Any) -> None:
    """Raise ``UnmarkedProcess`` where the running test may not start ``args``."""
    if not _running:
        return
    nodeid, marked = _running[-1]
    program = _program(args)
    if marked or program in _ALLOWED:
        return
    if _fixtures and _fixtures[-1] not in PROCESS_FIXTURES:
        raise UnmarkedProcess(
            f"fixture {_fixtures[-1]!r} starts a process ({program}) for {nodeid}:"
            f" add it to PROCESS_FIXTURES in tests/processes.py, which says why"
        )
    # (A listed fixture too, where the test reaches it through request.getfixturevalue.)
    raise UnmarkedProcess(
        f"{nodeid} starts a process ({program}) but is not marked"
        f" @pytest.mark.{MARK} (tests/processes.py says why)"
    )


# Audit events, not wrapped functions: the plugin's selection wraps ``Popen`` itself
# while it observes a test (``selection.observe``) and then puts its own original
# back.  ``multiprocessing`` raises none: its starts are caught where it makes them,
# ``_posixsubprocess.fork_exec``, which it looks up at each start.
_fork_exec = _posixsubprocess.fork_exec
_STARTS = {"subprocess.Popen": 1, "os.posix_spawn": 1, "os.spawn": 1, "os.system": 0}
_FORKS = frozenset({"os.fork", "os.forkpty"})


def _guarded_fork_exec(args: Any, *more: Any) -> int:
    check_start(args or ["?"])
    return _fork_exec(args, *more)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _STARTS:
        check_start(args[_STARTS[event]])
    elif event in _FORKS:
        check_start(["fork"])


_hooked: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARK}: starts a process other than git (tests/processes.py); "
        f'-m "not {MARK}" runs the rest',
    )
    # Once for the process's life, as an audit hook stays: a session run in process
    # inside a test (pytester) that loads this plugin too shares it.
    if not _hooked:
        _posixsubprocess.fork_exec = _guarded_fork_exec
        sys.addaudithook(_audit)
        _hooked.append(True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(MARK)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Generator[None, object, object]:
    _fixtures.append(fixturedef.argname)
    try:
        return (yield)
    finally:
        _fixtures.pop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _running.append((item.nodeid, item.get_closest_marker(MARK) is not None))
    try:
        return (yield)
    finally:
        _running.pop()
