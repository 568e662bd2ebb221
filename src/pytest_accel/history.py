"""Cross-run flaky history: the last outcomes of each test, per hardware key.

Outcomes are letters, oldest first: ``P`` passed, ``F`` failed (the run's final
outcome), ``K`` passed after a rerun (flaky within the run).  Skipped tests add
nothing.  Pure logic plus one locked read-fold-replace of the file; the format is in
docs/flaky.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_accel.records import FAILING
from pytest_accel.storage import InputError, read_json, update_locked

HISTORY_SCHEMA = "pytest-accel/flaky-history"
HISTORY_VERSION = 1
DEFAULT_WINDOW = 50
PASSED, FAILED, FLAKY = "P", "F", "K"
_LETTERS = PASSED + FAILED + FLAKY

# SPEC 6: flaky across runs when 0.05 < failure rate < 0.95 with at least 2 failures
# in at least 10 runs; broken at 0.95 or more (see classify for reruns).
FLAKY_MIN_RATE = 0.05
BROKEN_RATE = 0.95
FLAKY_MIN_FAILURES = 2
FLAKY_MIN_RUNS = 10


def outcome_letter(outcome: str, earlier: Iterable[str] = ()) -> str | None:
    """A test's letter for one run: its final outcome, and whether it needed a rerun."""
    if outcome in FAILING:
        return FAILED
    if outcome != "passed":
        return None  # skipped, xfailed, xpassed: nothing learned
    return FLAKY if any(o in FAILING for o in earlier) else PASSED


@dataclass
class EnvHistory:
    platform: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)  # the last `window` runs
    tests: dict[str, str] = field(default_factory=dict)  # node id -> letters, oldest first


@dataclass
class History:
    window: int = DEFAULT_WINDOW
    envs: dict[str, EnvHistory] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    test: str
    runs: int
    failures: int
    flaky_runs: int  # runs that passed only after a rerun
    status: str  # "flaky", "broken" or "ok"

    flip_rate: float = 0.0

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "runs": self.runs,
            "failures": self.failures,
            "flaky_runs": self.flaky_runs,
            "failure_rate": round(self.failure_rate, 4),
            "flip_rate": round(self.flip_rate, 4),
        }


def classify(test: str, letters: str) -> Verdict:
    """Flaky, broken or ok, from one test's outcomes (docs/flaky.md has the rule).

    SPEC 6's rule on final outcomes, with a run that passed only after a rerun counted
    as a failed first attempt: a test that needs reruns is flaky even though its final
    outcomes never fail, and one lucky rerun in 50 runs is not enough to say so.
    """
    runs = len(letters)
    failures = letters.count(FAILED)
    flaky_runs = letters.count(FLAKY)
    if not failures and not flaky_runs:
        return Verdict(test, runs, 0, 0, "ok")
    first_attempt_failures = failures + flaky_runs
    if failures / runs >= BROKEN_RATE:
        status = "broken"
    elif (
        runs >= FLAKY_MIN_RUNS
        and first_attempt_failures >= FLAKY_MIN_FAILURES
        and first_attempt_failures / runs > FLAKY_MIN_RATE
    ):
        status = "flaky"
    else:
        status = "ok"
    # Status changes between runs, and a rerun's fail-then-pass inside one run.
    statuses = letters.replace(FLAKY, PASSED)
    flips = statuses.count(PASSED + FAILED) + statuses.count(FAILED + PASSED) + flaky_runs
    flip_rate = min(1.0, flips / max(runs - 1, 1))
    return Verdict(test, runs, failures, flaky_runs, status, flip_rate)


def verdicts(tests: Mapping[str, str]) -> list[Verdict]:
    """Flaky and broken tests, flaky ones ranked by flip rate (most unstable first)."""
    found = []
    for test, letters in tests.items():
        if FAILED in letters or FLAKY in letters:
            verdict = classify(test, letters)
            if verdict.status != "ok":
                found.append(verdict)
    found.sort(key=lambda v: (v.status != "flaky", -v.flip_rate, -v.failure_rate, v.test))
    return found


def fold(
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
    env = history.envs.setdefault(key, EnvHistory())
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
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema != HISTORY_SCHEMA:
        raise InputError(
            path, f"'schema' is {schema!r}, not {HISTORY_SCHEMA!r}: not a flaky history file"
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(path, f"'version' must be a positive integer, got {version!r}")
    if version > HISTORY_VERSION:
        raise InputError(
            path, f"version {version} is newer than this pytest-accel reads; upgrade it"
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


def _parse_env(path: str, key: str, raw: Any) -> EnvHistory:
    where = f"envs[{key!r}]"
    if not isinstance(raw, dict):
        raise InputError(path, f"{where} must be an object, got {type(raw).__name__}")
    platform = raw.get("platform")
    if platform is not None and not isinstance(platform, str):
        raise InputError(path, f"{where}.platform must be a string, got {platform!r}")
    runs = raw.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise InputError(path, f"{where}.runs must be a list of objects")
    tests = raw.get("tests", {})
    if not isinstance(tests, dict):
        raise InputError(path, f"{where}.tests must be an object, got {type(tests).__name__}")
    for test, letters in tests.items():
        if not isinstance(letters, str) or letters.strip(_LETTERS):
            raise InputError(
                path,
                f"{where}.tests[{test!r}] must be a string of P, F and K (oldest first),"
                f" got {letters!r}",
            )
    return EnvHistory(platform, runs, tests)


def load_history(path: str | os.PathLike[str]) -> History:
    return parse_history(os.fspath(path), read_json(path))


def update_history_file(
    path: str | os.PathLike[str],
    runs: Sequence[tuple[str, str | None, Mapping[str, str], Mapping[str, Any]]],
    window: int,
) -> History:
    """Fold runs ``(key, platform, letters, run info)`` in under ``PATH.lock``.

    Read, fold and atomic replace happen while holding the lock, so parallel jobs
    updating one history lose no run.  A missing file is created.
    """

    def fold_runs(history: History) -> None:
        for key, platform, outcomes, run in runs:
            fold(history, key, platform=platform, outcomes=outcomes, run=run, window=window)

    return update_locked(path, load_history, lambda: History(window), fold_runs, to_json)


def platform_of_key(key: str, env: EnvHistory) -> str:
    return env.platform or key.split("/", 1)[0]


@dataclass(frozen=True)
class Share:
    """The flaky share of one platform's tests."""

    platform: str
    tests: int
    flaky: int

    @property
    def pct(self) -> float:
        return 100.0 * self.flaky / self.tests if self.tests else 0.0


def analysis(history: History) -> dict[str, Any]:
    """The offline report: per key, flaky and broken tests; per platform, the share of
    flaky tests among every test the history knows there."""
    envs = {}
    tests: dict[str, set[str]] = {}
    flaky: dict[str, set[str]] = {}
    for key, env in sorted(history.envs.items()):
        platform = platform_of_key(key, env)
        found = verdicts(env.tests)
        envs[key] = {
            "platform": platform,
            "runs": len(env.runs),
            "tests": len(env.tests),
            "flaky": [v.to_json() for v in found if v.status == "flaky"],
            "broken": [v.to_json() for v in found if v.status == "broken"],
        }
        tests.setdefault(platform, set()).update(t for t, s in env.tests.items() if s)
        flaky.setdefault(platform, set()).update(v.test for v in found if v.status == "flaky")
    shares = {p: Share(p, len(tests[p]), len(flaky[p])) for p in sorted(tests)}
    return {
        "window": history.window,
        "envs": envs,
        "flaky_pct": {p: round(s.pct, 4) for p, s in shares.items()},
    }


def letters_from_record(path: str, data: Mapping[str, Any]) -> dict[str, str]:
    """A record's tests as one run's letters (its ``attempts`` tell a rerun pass)."""
    letters = {}
    for test, entry in data["tests"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("outcome"), str):
            raise InputError(path, f"tests[{test!r}].outcome: expected a string")
        attempts = entry.get("attempts") or []
        if not isinstance(attempts, list):
            raise InputError(path, f"tests[{test!r}].attempts: expected a list")
        earlier = [a.get("outcome", "") for a in attempts[:-1] if isinstance(a, dict)]
        letter = outcome_letter(entry["outcome"], earlier)
        if letter is not None:
            letters[test] = letter
    return letters


def history_from_files(paths: Sequence[str], window: int | None = None) -> History:
    """Histories and records read into one history: records are folded in as runs, in
    the order they started; histories for the same key are joined, the later last."""
    from pytest_accel.baseline import record_key
    from pytest_accel.records import RECORD_SCHEMA

    combined = History(window or DEFAULT_WINDOW)
    records: list[tuple[str, str, str, dict[str, Any]]] = []
    for path in paths:
        data = read_json(path)
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema == RECORD_SCHEMA:
            key, record = record_key(path, data)
            run = record.get("run")
            started = run.get("started") if isinstance(run, dict) else None
            records.append((str(started or ""), path, key, record))
            continue
        if schema != HISTORY_SCHEMA:
            raise InputError(path, f"is neither a flaky history nor a record (schema {schema!r})")
        history = parse_history(path, data)
        combined.window = window or max(combined.window, history.window)
        for key, env in history.envs.items():
            target = combined.envs.setdefault(key, EnvHistory(env.platform))
            target.platform = target.platform or env.platform
            target.runs = [*target.runs, *env.runs][-combined.window :]
            for test, letters in env.tests.items():
                target.tests[test] = (target.tests.get(test, "") + letters)[-combined.window :]
    for started, path, key, record in sorted(records, key=lambda r: r[0]):
        env_info = record.get("env")
        platform = env_info.get("platform") if isinstance(env_info, dict) else None
        fold(
            combined,
            key,
            platform=platform if isinstance(platform, str) else None,
            outcomes=letters_from_record(path, record),
            run={"started": started or None, "source": path},
            window=combined.window,
        )
    return combined
