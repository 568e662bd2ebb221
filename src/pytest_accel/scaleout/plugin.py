"""The scale-out feature's hooks: a worker's own devices (``--accel-pin``), ``-n auto``
as the device count, and ``--accel-shard`` as its own ``trylast`` selection hook.

The pure parts are in ``pinning`` and ``sharding``.  A pinned worker answers
``pytest_accel_worker_detection``; sharding answers ``pytest_accel_shard`` and asks
``pytest_accel_expected_durations`` (the timing feature answers, from its baseline).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping

import pytest

from pytest_accel.hardware.detection import (
    Detection,
    DetectionContext,
    DetectionError,
    count_of,
    sysroot_from_env,
)
from pytest_accel.hardware.facts import SessionFacts, session_facts, setup
from pytest_accel.hardware.options import option as accel_option
from pytest_accel.hardware.options import registered_rows
from pytest_accel.outcomes import test_id
from pytest_accel.process_state import set_env
from pytest_accel.reports import node_parents
from pytest_accel.scaleout.options import ScaleoutOptions, option, resolve
from pytest_accel.scaleout.pinning import Pin, PinError, pinnable, plan_pin, shareable
from pytest_accel.scaleout.sharding import Plan, make_units, oversized_note, plan, weights_for
from pytest_accel.settings import early_setting


def pin_worker(early_config: pytest.Config) -> None:
    """In an xdist worker, take this worker's slice of the devices (--accel-pin=auto).

    xdist names the worker and the worker count in the environment before the worker's
    configuration is built; ``workerinput`` arrives only after conftests are imported,
    so this detects (cheaply, no probe) in the worker itself.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    workers = count_of(os.environ.get("PYTEST_XDIST_WORKER_COUNT", ""))
    if not worker or not workers:
        return
    if (early_setting(early_config, option("--accel-pin")) or "auto").lower() != "auto":
        return
    accel = (early_setting(early_config, accel_option("--accel")) or "auto").lower()
    if accel == "cpu" or early_setting(early_config, accel_option("--accel-emulate")):
        return
    try:
        root = sysroot_from_env(os.environ)
    except DetectionError as exc:
        raise pytest.UsageError(str(exc)) from None
    # Every detector there is so far (the built-in ones, a plugin's: a conftest's comes
    # later), the first to answer wins, as in the controller.
    context = DetectionContext(root, dict(os.environ), None if accel == "auto" else accel)
    found = early_config.hook.pytest_accel_detect(context=context)
    extra = registered_rows(early_config)
    if found is None or not pinnable(found.platform, extra):
        return
    try:
        pin = plan_pin(found, os.environ, worker, workers, extra)
    except PinError as exc:
        raise pytest.UsageError(f"--accel-pin: {exc}") from None
    set_env(early_config, pin.env)
    early_config.pluginmanager.register(PinnedWorker(pin), "pytest_accel:pinned_worker")


class PinnedWorker:
    """An xdist worker that holds its own share of the devices."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin

    def pytest_accel_worker_detection(self, detection: Detection) -> Detection:
        return pinned_detection(detection, self.pin)


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


def _pinnable(config: pytest.Config, options: ScaleoutOptions, facts: SessionFacts) -> bool:
    return (
        options.pin == "auto"
        and facts.options.emulate is None
        and pinnable(facts.detection.platform, registered_rows(config))
        and not facts.detection.pinned
    )


def check_worker_count(config: pytest.Config, workers: int) -> None:
    """Refuse more xdist workers than devices before any worker starts."""
    facts = session_facts(config)
    if not _pinnable(config, resolve(config), facts):
        return
    devices = shareable(facts.detection, os.environ, registered_rows(config))
    if workers > len(devices):
        raise pytest.UsageError(
            f"--accel-pin: -n {workers} workers cannot each hold one of {len(devices)}"
            f" {facts.detection.platform} device(s); use -n {len(devices)} (or -n auto),"
            " or --accel-pin=off to share them"
        )


def auto_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on an accelerator runner: one worker per device (TPU: per chip)."""
    facts = setup(config)
    if not _pinnable(config, resolve(config), facts):
        return None
    return len(shareable(facts.detection, os.environ, registered_rows(config))) or None


def _skipped(item: pytest.Item) -> bool:
    """A test that will not run here (selection or the user skipped it unconditionally)."""
    return any(mark.name == "skip" for mark in item.iter_markers())


class Sharding:
    """``--accel-shard K/N``: after selection, keep this shard's tests."""

    def __init__(self, options: ScaleoutOptions) -> None:
        assert options.shard is not None
        self.options = options
        self.plan: Plan | None = None

    # The outermost wrapper: it plans once everything else (markers, -m, -k, quarantine,
    # change-aware selection, itself a wrapper) has deselected what it does.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None]:
        result = yield
        self._shard(config, items)
        return result

    def _shard(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        known = config.hook.pytest_accel_expected_durations(config=config) or {}
        kept, elsewhere, self.plan = shard_items(items, self.options, known)
        if elsewhere:
            config.hook.pytest_deselected(items=elsewhere)
            items[:] = kept

    def pytest_report_collectionfinish(self) -> str | None:
        return None if self.plan is None else shard_line(self.options, self.plan)

    def pytest_accel_shard(self) -> str:
        return str(self.options.shard_label)


def shard_items(
    items: list[pytest.Item], options: ScaleoutOptions, known: Mapping[str, float]
) -> tuple[list[pytest.Item], list[pytest.Item], Plan]:
    """This shard's items, the others, and the plan; identical on every shard."""
    assert options.shard is not None
    index, count = options.shard
    nodeids = [test_id(item.nodeid) for item in items]
    parents = node_parents(items)
    column = 0 if options.shard_by == "class" else 1
    groups = {nodeid: parents[nodeid][column] for nodeid in nodeids}
    skipped = {n for n, item in zip(nodeids, items, strict=True) if _skipped(item)}
    weights = weights_for(nodeids, known, zero=skipped)
    shard_plan = plan(make_units(nodeids, groups, weights, options.shard_by), count)
    mine = set(shard_plan.tests(index - 1))
    kept = [item for n, item in zip(nodeids, items, strict=True) if n in mine]
    elsewhere = [item for n, item in zip(nodeids, items, strict=True) if n not in mine]
    return kept, elsewhere, shard_plan


def shard_line(options: ScaleoutOptions, shard_plan: Plan) -> str:
    assert options.shard is not None
    loads = shard_plan.loads()
    index = options.shard[0] - 1
    note = oversized_note(shard_plan, options.shard_by, "--accel-shard-by")
    return (
        f"accel-shard {options.shard_label} by {options.shard_by}:"
        f" {len(shard_plan.tests(index))} test(s), estimated {loads[index]:.1f}s; all shards:"
        f" {', '.join(f'{load:.1f}s' for load in loads)} (largest {shard_plan.imbalance():.3f}x"
        " the ideal)" + ("" if note is None else f"; {note}")
    )
