"""Cross-run flaky history: the last outcomes of each test, per hardware key.

Outcomes are letters, oldest first: ``P`` passed, ``F`` failed (the run's final
outcome), ``K`` passed after a rerun (flaky within the run).  Skipped tests add
nothing.  Read, validated and written only here (one locked read-add-replace of the file);
the format is in docs/flaky.md, the rules that read it in ``classify``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.fields import check_header
from pytest_accel.files import InputError, read_json
from pytest_accel.flaky.options import DEFAULT_WINDOW
from pytest_accel.locking import FileIdentity, file_identity, update_locked
from pytest_accel.outcomes import FAILING

HISTORY_SCHEMA = "pytest-accel/flaky-history"
HISTORY_VERSION = 1
PASSED, FAILED, FLAKY = "P", "F", "K"
_LETTERS = PASSED + FAILED + FLAKY


def outcome_letter(outcome: str, earlier: Iterable[str] = ()) -> str | None:
    """A test's letter for one run: its final outcome, and whether it needed a rerun."""
    if outcome in FAILING:
        return FAILED
    if outcome != "passed":
        return None  # skipped, xfailed, xpassed: nothing learned
    return FLAKY if any(o in FAILING for o in earlier) else PASSED


@dataclass
class KeyOutcomes:
    """One hardware key's runs and each test's letters over them, oldest first."""

    platform: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)  # the last `window` runs
    tests: dict[str, str] = field(default_factory=dict)  # node id -> letters, oldest first


@dataclass
class History:
    window: int = DEFAULT_WINDOW
    envs: dict[str, KeyOutcomes] = field(default_factory=dict)

    def share_ids(self, canonical: Mapping[str, str]) -> None:
        """Hold each test id that ``canonical`` has (``reports.collected_ids``) as its
        string there: the same ids, not a second copy of them."""
        for env in self.envs.values():
            tests = env.tests
            env.tests = dict(zip(map(canonical.get, tests, tests), tests.values(), strict=True))


def add_run(
    history: History,
    key: str,
    *,
    platform: str | None,
    outcomes: Mapping[str, str],
    run: Mapping[str, Any],
    window: int,
) -> None:
    """Append one run's letters under ``key``, keeping the last ``window`` of each test."""
    history.window = window
    env = history.envs.setdefault(key, KeyOutcomes())
    env.platform = platform or env.platform
    env.runs = [*env.runs, dict(run)][-window:]
    tests = env.tests
    for test, letter in outcomes.items():
        tests[test] = (tests.get(test, "") + letter)[-window:]
    if any(len(letters) > window for letters in tests.values()):  # a smaller window
        for test, letters in tests.items():
            tests[test] = letters[-window:]


def to_json(history: History) -> dict[str, Any]:
    return {
        "schema": HISTORY_SCHEMA,
        "version": HISTORY_VERSION,
        "window": history.window,
        "envs": {
            key: {"platform": env.platform, "runs": env.runs, "tests": env.tests}
            for key, env in sorted(history.envs.items())
        },
    }


def parse_history(path: str, data: Any) -> History:
    """Validate a history file; unknown fields are ignored (a newer minor writer)."""
    check_header(
        path,
        data,
        schema=HISTORY_SCHEMA,
        supported=HISTORY_VERSION,
        what="a pytest-accel flaky history",
    )
    window = data.get("window", DEFAULT_WINDOW)
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise InputError(path, f"'window' must be a positive integer, got {window!r}")
    envs = data.get("envs", {})
    if not isinstance(envs, dict):
        raise InputError(path, f"'envs' must be an object, got {type(envs).__name__}")
    history = History(window)
    for key, raw in envs.items():
        history.envs[key] = _parse_env(path, key, raw)
    return history


def _parse_env(path: str, key: str, raw: Any) -> KeyOutcomes:
    where = f"envs[{key!r}]"
    if not isinstance(raw, dict):
        raise InputError(path, f"{where} must be an object, got {type(raw).__name__}")
    platform = raw.get("platform")
    if platform is not None and not isinstance(platform, str):
        raise InputError(path, f"{where}.platform must be a string, got {platform!r}")
    runs = raw.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise InputError(path, f"{where}.runs must be a list of objects")
    for index, run in enumerate(runs):
        _check_run(path, f"{where}.runs[{index}]", run)
    tests = raw.get("tests", {})
    if not isinstance(tests, dict):
        raise InputError(path, f"{where}.tests must be an object, got {type(tests).__name__}")
    if _all_letters(tests.values()):
        # Interned: the baseline and the quarantine list name the same tests.
        return KeyOutcomes(
            platform, runs, dict(zip(map(sys.intern, tests), tests.values(), strict=True))
        )
    for test, letters in tests.items():  # find the culprit
        if not isinstance(letters, str) or letters.strip(_LETTERS):
            raise InputError(
                path,
                f"{where}.tests[{test!r}] must be a string of P, F and K (oldest first),"
                f" got {letters!r}",
            )
    return KeyOutcomes(platform, runs, tests)


_DROP_LETTERS = str.maketrans("", "", _LETTERS)


def _all_letters(values: Iterable[Any]) -> bool:
    """Every value a string of P, F and K: one pass in C over 10,000 tests' outcomes."""
    try:
        return not "".join(values).translate(_DROP_LETTERS)
    except TypeError:  # a value that is not a string
        return False


_RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "started": (str, type(None)),
    "exitstatus": (int,),
    "tests": (int,),
    "source": (str, type(None)),
    "mass_failure": (bool,),
}


def _check_run(path: str, where: str, run: Mapping[str, Any]) -> None:
    """A run's known fields have their types (unknown ones are a newer writer's)."""
    for name, types in _RUN_FIELDS.items():
        value = run.get(name)
        if name in run and not (
            isinstance(value, types) and (bool in types or not isinstance(value, bool))
        ):
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise InputError(path, f"{where}.{name}: expected {expected}, got {value!r:.60}")


def load_history(path: str | os.PathLike[str]) -> History:
    return parse_history(os.fspath(path), read_json(path))


HistoryRead = tuple[FileIdentity | None, History]


def read_history(path: str | os.PathLike[str]) -> HistoryRead:
    """The history and the identity of the file it was read from (taken first, so a
    change while reading makes the identity stale, never the history)."""
    identity = file_identity(path)
    return identity, load_history(path)


def update_history_file(
    path: str | os.PathLike[str],
    runs: Sequence[tuple[str, str | None, Mapping[str, str], Mapping[str, Any]]],
    window: int,
    read_before: HistoryRead | None = None,
) -> History:
    """Fold runs ``(key, platform, letters, run info)`` in under ``PATH.lock``.

    Read, fold and atomic replace happen while holding the lock, so parallel jobs
    updating one history lose no run.  A missing file is created.  ``read_before``
    (from ``read_history``) is reused if the file has not changed since.
    """

    def fold_runs(history: History) -> None:
        for key, platform, outcomes, run in runs:
            add_run(history, key, platform=platform, outcomes=outcomes, run=run, window=window)

    return update_locked(
        path, load_history, lambda: History(window), fold_runs, to_json, read_before=read_before
    )


def run_letters(
    outcomes: Mapping[str, str], attempts: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """One run's letters from each test's final outcome and, for the tests that had more
    than one attempt, the outcomes of every attempt (a rerun pass is ``K``)."""
    letters = {}
    for test, outcome in outcomes.items():
        letter = outcome_letter(outcome, attempts.get(test, ())[:-1])
        if letter is not None:
            letters[test] = letter
    return letters


@dataclass(frozen=True)
class RecordedRun:
    """One run read from a timing record, as the history would have folded it."""

    started: str
    source: str
    key: str
    platform: str | None
    letters: Mapping[str, str]


def combine(
    histories: Sequence[History], runs: Sequence[RecordedRun], window: int | None = None
) -> History:
    """Histories and recorded runs as one history: histories for the same key are joined
    in the order given, then the runs are folded in the order they started."""
    combined = History(window or DEFAULT_WINDOW)
    for history in histories:
        combined.window = window or max(combined.window, history.window)
        for key, env in history.envs.items():
            target = combined.envs.setdefault(key, KeyOutcomes(env.platform))
            target.platform = target.platform or env.platform
            target.runs = [*target.runs, *env.runs][-combined.window :]
            for test, letters in env.tests.items():
                target.tests[test] = (target.tests.get(test, "") + letters)[-combined.window :]
    for run in sorted(runs, key=lambda r: r.started):
        add_run(
            combined,
            run.key,
            platform=run.platform,
            outcomes=run.letters,
            run={"started": run.started or None, "source": run.source},
            window=combined.window,
        )
    return combined
