"""Flaky tests: reruns, quarantine lists, the cross-run history and the flaky share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.flaky.options import OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "register"]


def register(config: pytest.Config) -> None:
    options = resolve(config)
    if options.enabled and not config.option.collectonly:  # nothing runs: no outcome to keep
        from pytest_accel.flaky.plugin import register_feature

        register_feature(config, options)
