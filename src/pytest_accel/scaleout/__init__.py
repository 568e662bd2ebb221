"""Going wider: one device set per pytest-xdist worker, and CI shards balanced by
recorded durations."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pytest_accel.scaleout.options import OPTIONS, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "register", "take_devices"]


def register(config: pytest.Config) -> None:
    """Refuse more xdist workers than devices before any worker starts; shard only with
    --accel-shard.  (A worker takes its devices earlier, in ``pin_worker``.)"""
    options = resolve(config)
    workers = getattr(config.option, "numprocesses", None)
    if not hasattr(config, "workerinput") and isinstance(workers, int) and workers > 0:
        from pytest_accel.scaleout.plugin import check_worker_count

        check_worker_count(config, workers)
    if options.shard is not None:
        from pytest_accel.scaleout.plugin import Sharding

        config.pluginmanager.register(Sharding(options), "pytest_accel:sharding")


def take_devices(early_config: pytest.Config) -> None:
    """An xdist worker takes its own devices before its conftests are imported."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from pytest_accel.scaleout.plugin import pin_worker

        pin_worker(early_config)
