"""Flaky tests: reruns, quarantine lists, the cross-run history and the flaky share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_accel.flaky.options import OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "pytest_accel_keep_tests", "register"]


def pytest_accel_keep_tests(config: pytest.Config, tests: Sequence[str]) -> dict[str, str] | None:
    """Change-aware selection keeps what failed, was flaky or is quarantined."""
    options = resolve(config)
    if not (options.history or options.quarantine):
        return None
    from pytest_accel.files import InputError
    from pytest_accel.flaky.keep import kept_tests
    from pytest_accel.hardware.facts import session_facts
    from pytest_accel.settings import usage_error

    facts = session_facts(config)
    try:
        return kept_tests(options, tests, facts.key, facts.detection.platform)
    except InputError as exc:
        raise usage_error(str(exc)) from None


def register(config: pytest.Config) -> None:
    options = resolve(config)
    if options.enabled and not config.option.collectonly:  # nothing runs: no outcome to keep
        from pytest_accel.flaky.plugin import register_feature

        register_feature(config, options)
