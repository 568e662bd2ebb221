"""Scaling out: devices per xdist worker and duration-balanced CI shards.

The logic behind the plugin's hooks for ``--accel-pin`` and ``--accel-shard``; the
pure parts are in ``pinning`` and ``sharding``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pytest

from pytest_accel.baseline import Baseline, median_durations
from pytest_accel.detection import Detection, DetectionContext, detect_builtin, sysroot_from_env
from pytest_accel.options import AccelOptions, early_setting
from pytest_accel.pinning import PINNED_PLATFORMS, Pin, PinError, plan_pin, shareable
from pytest_accel.results import collect_nodes
from pytest_accel.sharding import Plan, make_units, plan, weights_for


def pin_worker(
    early_config: pytest.Config, set_env: Callable[[dict[str, str]], None]
) -> Pin | None:
    """In an xdist worker, take this worker's slice of the devices (--accel-pin=auto).

    xdist names the worker and the worker count in the environment before the worker's
    configuration is built; ``workerinput`` arrives only after conftests are imported,
    so this detects (cheaply, no probe) in the worker itself.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker or not workers.isdigit():
        return None
    if (early_setting(early_config, "--accel-pin") or "auto").lower() != "auto":
        return None
    accel = (early_setting(early_config, "--accel") or "auto").lower()
    if accel == "cpu" or early_setting(early_config, "--accel-emulate"):
        return None
    context = DetectionContext(
        sysroot_from_env(os.environ), dict(os.environ), None if accel == "auto" else accel
    )
    found = detect_builtin(context)
    if found is None or found.platform not in PINNED_PLATFORMS:
        return None
    try:
        pin = plan_pin(found, os.environ, worker, int(workers))
    except PinError as exc:
        raise pytest.UsageError(f"--accel-pin: {exc}") from None
    set_env(pin.env)
    return pin


def pinned_detection(detection: Detection, pin: Pin) -> Detection:
    """What a pinned worker sees: its own share of the controller's detection."""
    return Detection(
        detection.platform,
        pin.device_count,
        detection.device_kind,
        f"{detection.source}; {pin.describe()}",
        detection.evidence,
        pinned=True,
    )


def pinnable(opts: AccelOptions, detection: Detection) -> bool:
    return (
        opts.pin == "auto"
        and opts.emulate is None
        and detection.platform in PINNED_PLATFORMS
        and not detection.pinned
    )


def check_worker_count(workers: object, opts: AccelOptions, detection: Detection) -> None:
    """Refuse more xdist workers than devices before any worker starts."""
    if not isinstance(workers, int) or workers < 1 or not pinnable(opts, detection):
        return
    devices = shareable(detection, os.environ)
    if workers > len(devices):
        raise pytest.UsageError(
            f"--accel-pin: -n {workers} workers cannot each hold one of {len(devices)}"
            f" {detection.platform} device(s); use -n {len(devices)} (or -n auto),"
            " or --accel-pin=off to share them"
        )


def auto_workers(opts: AccelOptions, detection: Detection) -> int | None:
    """``-n auto`` on an accelerator runner: one worker per device (TPU: per chip)."""
    if not pinnable(opts, detection):
        return None
    return len(shareable(detection, os.environ)) or None


def known_durations(baseline: Baseline | None, key: str) -> dict[str, float]:
    """Median test durations under ``key``; empty without a baseline for it."""
    env = baseline.for_key(key) if baseline is not None else None
    return {} if env is None else median_durations(env)


def shard_items(
    items: list[pytest.Item],
    opts: AccelOptions,
    durations: Mapping[str, float],
    skipped: set[str],
) -> tuple[list[pytest.Item], list[pytest.Item], Plan]:
    """This shard's items, the others, and the plan; identical on every shard."""
    assert opts.shard is not None
    index, count = opts.shard
    nodeids = [item.nodeid for item in items]
    parents = collect_nodes(items).parents
    column = 0 if opts.shard_by == "class" else 1
    groups = {nodeid: parents[nodeid][column] for nodeid in nodeids}
    weights = weights_for(nodeids, durations, zero=skipped)
    shard_plan = plan(make_units(nodeids, groups, weights, opts.shard_by), count)
    mine = set(shard_plan.tests(index - 1))
    kept = [i for i in items if i.nodeid in mine]
    return kept, [i for i in items if i.nodeid not in mine], shard_plan


def shard_line(opts: AccelOptions, shard_plan: Plan) -> str:
    assert opts.shard is not None
    loads = shard_plan.loads()
    index = opts.shard[0] - 1
    return (
        f"accel-shard {opts.shard_label} by {opts.shard_by}: {len(shard_plan.tests(index))}"
        f" test(s), estimated {loads[index]:.1f}s; all shards:"
        f" {', '.join(f'{load:.1f}s' for load in loads)} (largest {shard_plan.imbalance():.3f}x"
        " the ideal)"
    )
