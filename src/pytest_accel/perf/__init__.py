"""Timing records, baselines and regressions: ``--perf-record``, ``--perf-baseline``
and the files, rule and output behind them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.perf.options import OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "register"]


def register(config: pytest.Config) -> None:
    """With --perf-record or --perf-baseline, or when another feature wants the timings
    (``pytest_accel_wants_timings``: the HTML report, cost, coverage): workers annotate
    reports, the process that owns the session compares and writes."""
    options = resolve(config)
    wanted = any(config.hook.pytest_accel_wants_timings(config=config))
    if options.enabled or wanted:
        from pytest_accel.perf.plugin import register_feature

        register_feature(config, options, wanted=wanted)
    elif options.max_device_memory is not None and not config.option.collectonly:
        from pytest_accel.perf.plugin import register_meter

        register_meter(config, options)
