"""Checks of a parsed file's fields, each failing with an InputError that names the
file and the field, and the timestamps the files write."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime, timezone
from typing import Any

from pytest_accel.files import InputError


def finite_number(value: Any) -> bool:
    """An int or a finite float, not a bool (an int is always finite, however large:
    ``math.isfinite`` would overflow on a 400-digit one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


# Larger than any test duration could be: a unit error or corruption.
MAX_SECONDS = 1e6


def expect_object(path: str, where: str, value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else InputError naming ``where``."""
    if not isinstance(value, dict):
        raise InputError(path, f"{where}: expected an object, got {type(value).__name__}")
    return value


def expect_seconds(path: str, where: str, value: Any) -> float:
    """A duration: a finite, non-negative, plausible number of seconds."""
    if not finite_number(value):  # bools included: True is no duration
        raise InputError(path, f"{where}: expected a number of seconds, got {_shown(value)}")
    if value < 0:
        raise InputError(path, f"{where}: {_shown(value)} is negative")
    if value > MAX_SECONDS:
        raise InputError(path, f"{where}: {_shown(value)} seconds is implausibly large")
    return float(value)


def expect_text(path: str, where: str, value: Any, *, optional: bool = False) -> str | None:
    """A string (or, with ``optional``, null)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if optional else "a string"
        raise InputError(path, f"{where}: expected {kind}, got {_shown(value)}")
    return value


def expect_int(path: str, where: str, value: Any, minimum: int | None = None) -> int:
    """An integer (not a bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(path, f"{where}: expected an integer, got {_shown(value)}")
    if minimum is not None and value < minimum:
        raise InputError(path, f"{where}: {value} is below {minimum}")
    return value


def kind_of(value: Any) -> str:
    """What a parsed JSON value is, for a message: ``null``, ``list``, ``str``, ..."""
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def check_version(path: str, data: Mapping[str, Any], supported: int, default: Any = None) -> int:
    """The document's ``version``: an integer from 1 to ``supported``."""
    version = data.get("version", default)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InputError(path, f"version: expected an integer, got {_shown(version)}")
    if version > supported:
        raise InputError(
            path, f"version {version} is newer than this pytest-accel reads ({supported}); upgrade"
        )
    if version < 1:
        raise InputError(path, f"version: {version} is not a valid version")
    return version


def check_header(
    path: str,
    data: Any,
    *,
    schema: str,
    supported: int,
    what: str,
    schema_required: bool = True,
) -> dict[str, Any]:
    """The one header check of every format: an object, its ``schema``, its ``version``."""
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}")
    found = data.get("schema", None if schema_required else schema)
    if found != schema:
        raise InputError(path, f"is not {what} (schema {found!r}, expected {schema!r})")
    check_version(path, data, supported, default=None if schema_required else 1)
    return data


_TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


def utc_timestamp(epoch: float) -> str:
    """``2026-11-21T02:00:00Z``: how every file of ours writes a moment."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime(_TIMESTAMP)


def expect_date(path: str, where: str, value: Any) -> str:
    """A day, ``YYYY-MM-DD`` (a TOML file's bare date too), that the calendar has."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    text = value.strip() if isinstance(value, str) else ""
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        raise InputError(path, f"{where}: expected a date YYYY-MM-DD, got {_shown(value)}")
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise InputError(path, f"{where}: {text!r} is not a real date") from None


def parse_utc_timestamp(path: str, where: str, text: Any) -> float:
    try:
        moment = datetime.strptime(str(text), _TIMESTAMP)
    except ValueError:
        raise InputError(path, f"{where}: {text!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    return moment.replace(tzinfo=timezone.utc).timestamp()
