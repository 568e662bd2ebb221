"""A ``perf`` marker's setting for one test, apart from the findings: a recording run
keeps each test's override in its record without loading what a comparison finds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Override:
    """A ``perf(threshold=..., min_delta=..., ignore=...)`` marker on one test."""

    threshold: float | None = None
    min_delta: float | None = None
    ignore: bool = False
