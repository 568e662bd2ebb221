"""The facts every feature needs, resolved once per session: the ``--accel`` options
(``hardware.options``), what was detected and how the request was checked against it
(``hardware.policy``), and the hardware key; and the stash keys through which features
hand each other what they need.

``setup(config)`` runs whichever hook asks first (pytest-xdist may ask for ``-n auto``
before ``pytest_configure``) and keeps the result in ``config.stash``.  An xdist worker
takes the controller's detection from ``workerinput`` instead of detecting again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_accel.hardware.detection import Detection, DetectionError
from pytest_accel.hardware.options import AccelOptions, known_platforms, resolve_options
from pytest_accel.hardware.policy import WORKERINPUT_DETECTION, resolve_detection
from pytest_accel.settings import HARDWARE_KEY_OPTION, raw_setting


@dataclass(frozen=True)
class Session:
    options: AccelOptions
    detection: Detection
    key: str  # the hardware key timings and histories are kept under

    @property
    def targets_accelerator(self) -> bool:
        """An explicit ``--accel=tpu`` whose TPU is missing still targets one."""
        return self.detection.is_accelerator or self.options.requested not in (None, "cpu")


session_key = pytest.StashKey[Session]()
# Set in an xdist worker by the feature that gives it a share of the devices (scaleout).
worker_view_key = pytest.StashKey[Callable[[Detection], Detection]]()
# "K/N" when this session runs one CI shard (set by the scale-out feature).
shard_key = pytest.StashKey[str]()
# How to learn each test's expected duration (filled by the timing feature when it has a
# baseline; read by sharding): a callable, so that nothing is loaded unless it is asked.
durations_key = pytest.StashKey[Callable[[], Mapping[str, float]]]()
# Set by a feature that needs this run's timings (the HTML report): the timing feature
# then collects them even without --perf-record or --perf-baseline.
timings_wanted_key = pytest.StashKey[bool]()


def hardware_key(detection: Detection, override: str | None = None) -> str:
    """``platform/device_kind/xN`` (kind omitted when unknown or the platform itself)."""
    if override:
        return override
    parts = [detection.platform]
    if detection.device_kind and detection.device_kind != detection.platform:
        parts.append(detection.device_kind)
    parts.append(f"x{detection.device_count}")
    return "/".join(parts)


def _key_override(config: pytest.Config) -> str | None:
    key = raw_setting(config, HARDWARE_KEY_OPTION)
    if key is not None and not str(key).strip():
        raise pytest.UsageError("--accel-key: the key must not be empty")
    return str(key).strip() if key else None


def setup(config: pytest.Config) -> Session:
    """Options and detection, resolved (and probed) once per session."""
    found = config.stash.get(session_key, None)
    if found is not None:
        return found
    options = resolve_options(config, known_platforms(config))
    try:
        detection = resolve_detection(config, options, config.stash.get(worker_view_key, None))
    except DetectionError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = config.stash[session_key] = Session(
        options, detection, hardware_key(detection, _key_override(config))
    )
    return session


def get(config: pytest.Config) -> Session:
    return config.stash[session_key]


def configure_node(node: Any) -> None:
    """xdist controller: hand the detection to each worker instead of re-detecting."""
    found = node.config.stash.get(session_key, None)
    if found is not None:
        node.workerinput[WORKERINPUT_DETECTION] = found.detection.to_json()
