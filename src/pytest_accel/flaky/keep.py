"""The tests change-aware selection must run whatever changed, as the flaky feature
knows them: those that failed or were flaky within the history's window under this
hardware key, and those a quarantine entry covers here today."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_accel.flaky.history import FAILED, FLAKY, load_history
from pytest_accel.flaky.options import FlakyOptions
from pytest_accel.flaky.quarantine import Matcher, load_quarantine, utc_today


def kept_tests(
    options: FlakyOptions, tests: Sequence[str], key: str, platform: str
) -> dict[str, str]:
    """Of ``tests``, those to keep and why.  The files were validated when the feature
    registered; a history not written yet keeps nothing."""
    kept: dict[str, str] = {}
    if options.quarantine:
        applying, _ = load_quarantine(options.quarantine).split(platform, utc_today())
        matcher = Matcher(applying)
        for test in tests:
            entry = matcher.match(test)
            if entry is not None:
                kept[test] = f"quarantined ({entry.describe()})"
    if options.history and os.path.exists(options.history):
        env = load_history(options.history).envs.get(key)
        letters = env.tests if env is not None else {}
        for test in tests:
            seen = letters.get(test, "")
            if test in kept or not seen:
                continue
            window = f"of the flaky history's last {len(seen)} run(s)"
            if FAILED in seen:
                kept[test] = f"failed in {seen.count(FAILED)} {window}"
            elif FLAKY in seen:
                kept[test] = f"flaky in {seen.count(FLAKY)} {window}"
    return kept
