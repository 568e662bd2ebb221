"""Timing records, baselines and regressions: ``--perf-record``, ``--perf-baseline``
and the files, rule and output behind them."""

from __future__ import annotations

import pytest

from pytest_accel.perf.options import OPTIONS, resolve

__all__ = ["OPTIONS", "register"]


def register(config: pytest.Config) -> None:
    """With --perf-record or --perf-baseline: workers annotate reports, the process that
    owns the session compares and writes."""
    options = resolve(config)
    if options.enabled:
        from pytest_accel.perf.plugin import register_feature

        register_feature(config, options)
