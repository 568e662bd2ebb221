"""Quarantine lists: tests that still run but whose failures do not fail the session.

Two formats (docs/flaky.md): plain text, one node id per line with ``#`` comments, or
JSON ``{"version": 1, "entries": [{"test", "platforms", "reason", "issue", "expires"}]}``.
Pure logic: parsing with messages that name the file and line, and matching node ids.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from typing import Any

from pytest_accel.fields import check_version
from pytest_accel.files import InputError, read_bytes
from pytest_accel.hardware.platforms import platform_matches

QUARANTINE_SCHEMA = "pytest-accel/quarantine"
QUARANTINE_VERSION = 1
ENTRY_FIELDS = ("test", "platforms", "reason", "issue", "expires")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# C0 and C1 controls (tab and line breaks included) and Unicode's line separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A trailing comment needs whitespace before its '#': "test_x[#1]" keeps its '#'.
_TRAILING_COMMENT = re.compile(r"\s+#")


@dataclass(frozen=True)
class Entry:
    test: str
    platforms: tuple[str, ...] = ()
    reason: str | None = None
    issue: str | None = None
    expires: date | None = None
    line: int | None = None  # where it is in the file, for messages

    def expired(self, today: date) -> bool:
        """An entry applies up to and including its expiry day."""
        return self.expires is not None and today > self.expires

    def applies_on(self, platform: str) -> bool:
        return not self.platforms or any(platform_matches(p, platform) for p in self.platforms)

    def describe(self) -> str:
        details = [d for d in (self.reason, self.issue) if d]
        return f"{self.test} ({'; '.join(details)})" if details else self.test

    def where(self, path: str) -> str:
        return f"{path}:{self.line}" if self.line else path

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "platforms": list(self.platforms),
            "reason": self.reason,
            "issue": self.issue,
            "expires": self.expires.isoformat() if self.expires else None,
        }


def utc_today() -> date:
    """Expiry dates are read in UTC, like every time in our files."""
    return datetime.now(timezone.utc).date()


def candidate_keys(nodeid: str) -> Iterable[str]:
    """The node id, then what an entry may name to cover it: its parametrized base,
    its class, its module (most specific first)."""
    yield nodeid
    base = nodeid.split("[", 1)[0] if nodeid.endswith("]") else nodeid
    if base != nodeid:
        yield base
    parts = base.split("::")
    for end in range(len(parts) - 1, 0, -1):
        yield "::".join(parts[:end])


class Matcher:
    """Node id -> the entry that covers it; a few dict lookups per test."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.by_test: dict[str, Entry] = {}
        for entry in entries:
            self.by_test.setdefault(entry.test, entry)  # the first of duplicates wins

    def __bool__(self) -> bool:
        return bool(self.by_test)

    def match(self, nodeid: str) -> Entry | None:
        by_test = self.by_test
        for key in candidate_keys(nodeid):
            entry = by_test.get(key)
            if entry is not None:
                return entry
        return None


@dataclass(frozen=True)
class Quarantine:
    path: str
    entries: tuple[Entry, ...]

    def split(self, platform: str, today: date) -> tuple[list[Entry], list[Entry]]:
        """(entries that apply on ``platform`` today, expired entries)."""
        applying: list[Entry] = []
        expired: list[Entry] = []
        for entry in self.entries:
            if entry.expired(today):
                expired.append(entry)
            elif entry.applies_on(platform):
                applying.append(entry)
        return applying, expired


# 100,000 entries with reasons fit in 16 MiB; a larger file is a mistake (a log, a
# record), and parsing one costs about eight times its size in memory.
MAX_QUARANTINE_BYTES = 16 << 20


def load_quarantine(
    path: str | os.PathLike[str], known_platforms: Collection[str] | None = None
) -> Quarantine:
    name = os.fspath(path)
    raw = read_bytes(name, MAX_QUARANTINE_BYTES)
    try:
        text = raw.decode("utf-8-sig")  # an editor's BOM is untidy, not invalid
    except UnicodeDecodeError as exc:
        raise InputError(name, f"is not UTF-8 text (byte {exc.start})") from None
    if text.lstrip().startswith("{"):
        return parse_json(name, text, known_platforms)
    return parse_text(name, text)


def parse_text(path: str, text: str) -> Quarantine:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.strip()
        if not content or content.startswith("#"):
            continue
        reason = None
        comment = _TRAILING_COMMENT.search(content)
        if comment:
            reason = content[comment.end() :].strip() or None
            content = content[: comment.start()]
        problem = _nodeid_problem(content)
        if problem:
            raise InputError(path, f"line {number}: {problem}")
        entries.append(Entry(content, reason=reason, line=number))
    return Quarantine(path, tuple(entries))


MAX_NAME_BYTES = 255  # a file name longer than this cannot exist (NAME_MAX)
MAX_ID_CHARS = 4096


def _nodeid_problem(test: str) -> str | None:
    if _CONTROL.search(test):
        return f"{test[:80]!r} contains a control character (a tab or a line break?)"
    if len(test) > MAX_ID_CHARS:
        return f"{test[:40]!r}... is {len(test)} characters long; no node id is"
    file_part = test.split("::", 1)[0]
    for part in file_part.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            return f"{part[:40]!r}... is longer than any file name can be ({MAX_NAME_BYTES} bytes)"
    if test.startswith("-"):
        return f"{test!r} looks like a command-line option, not a node id"
    if test.startswith(("[", '"', "{")):
        return (
            f"{test[:40]!r} looks like JSON, not a node id (a JSON quarantine list is an"
            ' object: {"version": 1, "entries": [...]})'
        )
    if test.startswith("::") or test.endswith("::") or "::::" in test:
        return f"{test!r} is not a node id (an empty part between '::')"
    return None


def _line_of(text: str, test: str) -> int | None:
    """The line where an entry's test is written, for a message (JSON has no positions)."""
    import json

    found = text.find(json.dumps(test, ensure_ascii=False))
    if found < 0:
        found = text.find(json.dumps(test))
    return text.count("\n", 0, found) + 1 if found >= 0 else None


def parse_json(path: str, text: str, known_platforms: Collection[str] | None = None) -> Quarantine:
    import json

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    try:
        data = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(path, "is not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # NaN, Infinity, or an integer of thousands of digits
        raise InputError(path, f"is not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(k for k in data if k not in ("schema", "version", "entries"))
    unknown = [k for k in unknown if not k.startswith("_")]  # "_comment" and the like
    if unknown:
        raise InputError(
            path, f"unknown field {unknown[0]!r} (a quarantine file has version and entries)"
        )
    schema = data.get("schema", QUARANTINE_SCHEMA)
    if schema != QUARANTINE_SCHEMA:
        raise InputError(path, f"schema {schema!r} is not {QUARANTINE_SCHEMA!r}")
    check_version(path, data, QUARANTINE_VERSION, default=QUARANTINE_VERSION)
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise InputError(path, f"'entries' must be a list, got {type(raw_entries).__name__}")
    entries = tuple(
        _parse_entry(path, text, index, raw, known_platforms)
        for index, raw in enumerate(raw_entries)
    )
    return Quarantine(path, entries)


def _parse_entry(
    path: str,
    text: str,
    index: int,
    raw: Any,
    known_platforms: Collection[str] | None,
) -> Entry:
    if not isinstance(raw, dict):
        raise InputError(path, f"entries[{index}] must be an object, got {type(raw).__name__}")
    test = raw.get("test")
    line = _line_of(text, test) if isinstance(test, str) else None
    where = f"line {line}: entries[{index}]" if line else f"entries[{index}]"

    def fail(problem: str) -> InputError:
        return InputError(path, f"{where}: {problem}")

    if not isinstance(test, str) or not test.strip():
        raise fail("'test' must be a non-empty node id")
    test = test.strip()
    problem = _nodeid_problem(test)
    if problem:
        raise fail(problem)
    unknown = [k for k in raw if k not in ENTRY_FIELDS and not k.startswith("_")]
    if unknown:
        hint = next((f for f in ENTRY_FIELDS if f.startswith(unknown[0][:4])), None)
        raise fail(
            f"unknown field {unknown[0]!r}"
            + (f" (did you mean {hint!r}?)" if hint else f" (fields: {', '.join(ENTRY_FIELDS)})")
        )
    platforms = _platforms(raw.get("platforms"), known_platforms, fail)
    reason, issue = raw.get("reason"), raw.get("issue")
    if reason is not None and not isinstance(reason, str):
        raise fail(f"'reason' must be a string, got {type(reason).__name__}")
    if isinstance(issue, int) and not isinstance(issue, bool):
        issue = f"#{issue}"  # an issue number: untidy, not wrong
    if issue is not None and not isinstance(issue, str):
        raise fail(f"'issue' must be a string or a number, got {type(issue).__name__}")
    return Entry(
        test,
        platforms,
        reason or None,
        issue or None,
        _expiry(raw.get("expires"), fail),
        line,
    )


def _platforms(value: Any, known: Collection[str] | None, fail: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]  # "tpu" for ["tpu"]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise fail("'platforms' must be a list of platform names such as [\"tpu\"]")
    names = tuple(p.strip().lower() for p in value)
    if known is not None:
        for name in names:
            if name not in known:
                raise fail(
                    f"unknown platform {name!r} in 'platforms' (known: {', '.join(sorted(known))})"
                )
    return names


def _expiry(value: Any, fail: Any) -> date | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.fullmatch(value.strip()):
        raise fail(f"'expires' must be a date YYYY-MM-DD, got {value!r}")
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise fail(f"'expires' {value!r} is not a real date") from None


def to_json(entries: Iterable[Entry]) -> dict[str, Any]:
    return {
        "schema": QUARANTINE_SCHEMA,
        "version": QUARANTINE_VERSION,
        "entries": [e.to_json() for e in entries],
    }


def merged_entries(kept: Iterable[Entry], proposed: Iterable[Entry]) -> tuple[list[Entry], int]:
    """The entries of the lists in use (each test once, the first kept: its reason,
    issue, platforms and expiry were reviewed), then each proposed entry for a test none
    of them covers already (its own id, its parametrized base, class or module); and how
    many were added."""
    entries: list[Entry] = []
    seen: set[str] = set()
    for entry in kept:
        if entry.test not in seen:
            seen.add(entry.test)
            entries.append(replace(entry, line=None))
    covering = Matcher(entries)
    added = [entry for entry in proposed if covering.match(entry.test) is None]
    return entries + added, len(added)


def propose(analysis: Mapping[str, Any], expires: date) -> list[Entry]:
    """Entries for the tests ``history.analysis`` found flaky (never the broken ones:
    they need a fix), scoped to the platforms where they were flaky, sorted by test."""
    platforms: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for key, env in analysis["envs"].items():
        for verdict in env["flaky"]:
            names = platforms.setdefault(verdict["test"], [])
            if env["platform"] not in names:
                names.append(env["platform"])
            reasons.setdefault(
                verdict["test"],
                f"flaky on {key}: failed {verdict['failures']} of {verdict['runs']} run(s)"
                f", flaky in {verdict['flaky_runs']}, flip rate {verdict['flip_rate']:.2f}",
            )
    return [
        Entry(test, tuple(platforms[test]), reasons[test], None, expires)
        for test in sorted(platforms)
    ]
