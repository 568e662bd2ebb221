"""The hardware feature's hooks: the built-in detectors, device variables for the test
processes, the header line, and marker-based skipping and deselection.

Always on: every run detects and selects.  The logic is in ``detection`` and
``markers``; the policy (what an explicit request demands) in ``policy``.
"""

from __future__ import annotations

import os
import re
import warnings
from operator import attrgetter
from typing import Any

import pytest

from pytest_accel.hardware.builtin import detect_builtin
from pytest_accel.hardware.detection import (
    Detection,
    DetectionContext,
    cpu_detection,
    framework_versions,
)
from pytest_accel.hardware.facts import SessionFacts, session_facts
from pytest_accel.hardware.markers import (
    CHECKED_MARKERS,
    MARKERS,
    RUN,
    MarkerError,
    closest,
    evaluate_marks,
)
from pytest_accel.hardware.options import option
from pytest_accel.hardware.platforms import platform_matches
from pytest_accel.outcomes import PLATFORM_SKIP_PROPERTY
from pytest_accel.process_state import set_env
from pytest_accel.reports import parent_runs
from pytest_accel.settings import early_setting, parse_positive_int
from pytest_accel.text import one_line

_XLA_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=\d+")


class BuiltinDetector:
    """The first detectors asked: framework selectors, masks and system probes."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_accel_detect(self, context: DetectionContext) -> Detection | None:
        return detect_builtin(context)


class CpuFallback:
    """The last detector: no accelerator answered, so the run is on CPU."""

    @pytest.hookimpl(trylast=True)
    def pytest_accel_detect(self, context: DetectionContext) -> Detection:
        return cpu_detection(context)


def register_detectors(pluginmanager: pytest.PytestPluginManager) -> None:
    """Third-party detectors sit between these two (``hookspecs``)."""
    pluginmanager.register(BuiltinDetector(), "pytest_accel_builtin_detector")
    pluginmanager.register(CpuFallback(), "pytest_accel_cpu_fallback")


def set_cpu_devices(early_config: pytest.Config) -> None:
    """``--accel-cpu-devices``: before conftests (which may import jax) are loaded."""
    value = early_setting(early_config, option("--accel-cpu-devices"))
    if not value:
        return
    count = parse_positive_int("--accel-cpu-devices", value)
    flags = _XLA_HOST_COUNT.sub("", os.environ.get("XLA_FLAGS", "")).strip()
    flag = f"--xla_force_host_platform_device_count={count}"
    set_env(
        early_config, {"JAX_NUM_CPU_DEVICES": str(count), "XLA_FLAGS": f"{flags} {flag}".strip()}
    )


def header_line(facts: SessionFacts, *, running: bool = False) -> str:
    """``accel: tpu x8 (TPU v6 lite) via pci; jax 0.8.0``.  ``running``: tests will run
    (not ``--collect-only``), which under emulation they do on this machine's devices."""
    detection, requested = facts.detection, facts.options.requested
    line = f"accel: {detection.describe()}"
    if requested and not platform_matches(requested, detection.platform):
        line += f" (requested {requested}: missing, its tests skip)"
    if running and facts.options.emulate is not None:
        line += (
            f" (emulated: the tests selected for {detection.platform} run here, on this"
            " machine's devices; a test that checks its device fails; use --collect-only"
            " to preview)"
        )
    versions = framework_versions()
    for name in ("jax", "torch"):
        if name in versions:
            line += f"; {name} {versions[name]}"
    for what in detection.ignored:
        line += f"; ignored {what}"
    return one_line(line)


Marks = tuple[tuple[str, tuple[Any, ...], dict[str, Any]], ...]


_NAME = attrgetter("name")


def _own_selection_marks(node: pytest.Item | pytest.Collector) -> Marks:
    """The marks this feature reads (selection) or checks (every marker it registers)."""
    own = node.own_markers
    if not own or CHECKED_MARKERS.isdisjoint(map(_NAME, own)):  # most: no generator to start
        return ()
    return tuple((m.name, m.args, dict(m.kwargs)) for m in own if m.name in CHECKED_MARKERS)


def _inherited_marks(node: pytest.Collector | None, cache: dict[int, Marks]) -> Marks:
    """Selection marks of a collector and its parents, closest first, once per collector.

    Equivalent to ``item.iter_markers()`` without rebuilding each item's parent chain:
    ten thousand tests share a few hundred classes and modules.
    """
    if node is None:
        return ()
    marks = cache.get(id(node))
    if marks is None:
        marks = _own_selection_marks(node) + _inherited_marks(node.parent, cache)
        cache[id(node)] = marks
    return marks


class Selection:
    """Skips (or with ``--accel-only`` deselects) what cannot run on this hardware."""

    def __init__(self, facts: SessionFacts) -> None:
        self.facts = facts

    def pytest_report_header(self, config: pytest.Config) -> str:
        return header_line(self.facts, running=not config.option.collectonly)

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        detection, options = self.facts.detection, self.facts.options
        kept: list[pytest.Item] = []
        deselected: list[pytest.Item] = []
        cache: dict[int, Marks] = {}
        errors: list[str] = []
        # A test with no marks this feature reads runs, or is left out under
        # --accel-only, the same way as every other such test: decided once.
        unmarked = (
            deselected if options.only and not RUN.targets_platform(detection.platform) else kept
        )
        for parent, tests in parent_runs(items):
            inherited = _inherited_marks(parent, cache)
            for item in tests:
                marks = _own_selection_marks(item) + inherited
                if marks:
                    self._select(item, marks, kept, deselected, errors)
                else:
                    unmarked.append(item)
        if errors:
            raise pytest.UsageError(marker_errors(errors))
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = kept

    def _select(
        self,
        item: pytest.Item,
        marks: Marks,
        kept: list[pytest.Item],
        deselected: list[pytest.Item],
        errors: list[str],
    ) -> None:
        """Run, skip or leave out a test with marks this feature reads."""
        detection, options = self.facts.detection, self.facts.options
        try:
            verdict = evaluate_marks(
                marks,
                detection,
                options.known_platforms,
                targets_accelerator=self.facts.targets_accelerator,
            )
        except MarkerError as exc:
            errors.append(f"{item.nodeid}: {exc}")  # every bad marker, then stop
            return
        if options.only and not verdict.targets_platform(detection.platform):
            deselected.append(item)
            return
        if verdict.skip_reason is not None:
            item.add_marker(pytest.mark.skip(reason=verdict.skip_reason))
            # On the item, so its reports carry it (xdist too): coverage counts it.
            item.user_properties.append((PLATFORM_SKIP_PROPERTY, verdict.skip_reason))
        kept.append(item)

    @pytest.hookimpl(tryfirst=True)  # before the terminal (and any other reader) takes it
    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        """pytest's own warning for an unknown marker, with the one of ours meant where
        it is two edits from one (``multi_gpus``, ``tpu_cl``): a typo that makes a test
        run where it should not.  One warning, not a second one of our own."""
        warning = warning_message.message
        if not isinstance(warning, pytest.PytestUnknownMarkWarning):
            return
        named = UNKNOWN_MARK.match(str(warning))
        meant = closest(named.group(1), MARKERS) if named else None
        if named is not None and meant is not None:
            warning_message.message = pytest.PytestUnknownMarkWarning(
                f"@pytest.mark.{named.group(1)} is not a registered marker; did you mean"
                f" @pytest.mark.{meant}? As written it selects nothing and the test runs"
                " everywhere (--strict-markers makes unknown markers errors)"
            )


def marker_errors(errors: list[str]) -> str:
    """One error, or all of them a line each (a marker reused by many tests, once)."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return f"{len(unique)} bad pytest-accel markers:\n" + "\n".join(
        one_line(error) for error in unique
    )


# pytest's message (src/_pytest/mark/structures.py): "Unknown pytest.mark.NAME - is
# this a typo?  You can register custom marks ..."
UNKNOWN_MARK = re.compile(r"Unknown pytest\.mark\.([A-Za-z_][A-Za-z0-9_]*)\b")


def register(config: pytest.Config) -> None:
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)
    config.pluginmanager.register(Selection(session_facts(config)), "pytest_accel:selection")
