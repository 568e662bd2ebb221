"""The session's facts, resolved once (``setup``): the ``--accel`` options
(``options``), the detection and the policy's verdict on it (``policy``), and the
hardware key, kept as a ``session.Session``.

``setup`` runs whichever hook asks first (pytest-xdist may ask for ``-n auto`` before
``pytest_configure``).  An xdist worker takes the controller's detection from
``workerinput`` instead of detecting again, narrowed to its own devices by whichever
feature answers ``pytest_accel_worker_detection``.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_accel.hardware.detection import Detection, DetectionError
from pytest_accel.hardware.options import known_platforms, resolve_options
from pytest_accel.hardware.policy import WORKERINPUT_DETECTION, resolve_detection
from pytest_accel.session import Session, session_key
from pytest_accel.settings import HARDWARE_KEY_OPTION, raw_setting


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

    def worker_view(detection: Detection) -> Detection:
        narrowed = config.hook.pytest_accel_worker_detection(config=config, detection=detection)
        return detection if narrowed is None else narrowed

    try:
        detection = resolve_detection(config, options, worker_view)
    except DetectionError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = config.stash[session_key] = Session(
        options, detection, hardware_key(detection, _key_override(config))
    )
    return session


def configure_node(node: Any) -> None:
    """xdist controller: hand the detection to each worker instead of re-detecting."""
    found = node.config.stash.get(session_key, None)
    if found is not None:
        node.workerinput[WORKERINPUT_DETECTION] = found.detection.to_json()
