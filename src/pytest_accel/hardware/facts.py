"""The session's facts, resolved once (``setup``): the ``--accel`` options
(``options``), the detection and the policy's verdict on it (``policy``), and the
hardware key, kept as a ``SessionFacts`` that every feature reads (``session_facts``).

``setup`` runs whichever hook asks first (pytest-xdist may ask for ``-n auto`` before
``pytest_configure``).  An xdist worker takes the controller's detection from
``workerinput`` instead of detecting again, narrowed to its own devices by whichever
feature answers ``pytest_accel_worker_detection``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_accel.hardware.detection import Detection, DetectionError, framework_versions
from pytest_accel.hardware.options import AccelOptions, known_platforms, resolve_options
from pytest_accel.hardware.policy import WORKERINPUT_DETECTION, resolve_detection
from pytest_accel.settings import (
    HARDWARE_KEY_FACETS_OPTION,
    HARDWARE_KEY_OPTION,
    HOST_OPTION,
    HOSTS_OPTION,
    KEY_FACETS,
    RUN_NAME_OPTION,
    parse_non_negative_int,
    parse_positive_int,
    raw_setting,
)


@dataclass(frozen=True)
class Slice:
    """This session as one host of a multi-host run (a TPU slice runs one pytest per
    host): its index, how many hosts the run has (None: not known), and the name all
    of them share, which joins their records (None: not given)."""

    host: int
    hosts: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class SessionFacts:
    options: AccelOptions
    detection: Detection
    key: str  # the hardware key timings and histories are kept under
    slice: Slice | None = None  # one host of several; None: the only one

    @property
    def targets_accelerator(self) -> bool:
        """An explicit ``--accel=tpu`` whose TPU is missing still targets one."""
        return self.detection.is_accelerator or self.options.requested not in (None, "cpu")


_facts_key = pytest.StashKey[SessionFacts]()


def session_facts(config: pytest.Config) -> SessionFacts:
    """This session's facts (resolved in ``pytest_configure``, before any feature)."""
    return config.stash[_facts_key]


def hardware_key(
    detection: Detection,
    override: str | None = None,
    facets: Sequence[tuple[str, str | None]] = (),
) -> str:
    """``platform/device_kind/xN`` (kind omitted when unknown or the platform itself),
    or ``override``; then each facet as ``name-version`` (``jax-0.8.1``; ``jax-none``
    where it is not installed): runs of other versions are another key's."""
    if override:
        key = override
    else:
        parts = [detection.platform]
        if detection.device_kind and detection.device_kind != detection.platform:
            parts.append(detection.device_kind)
        parts.append(f"x{detection.device_count}")
        key = "/".join(parts)
    return "/".join([key, *(f"{name}-{version or 'none'}" for name, version in facets)])


def key_facets(config: pytest.Config) -> list[tuple[str, str | None]]:
    """``--accel-key-facets``: each named framework or runtime and its version here."""
    given = raw_setting(config, HARDWARE_KEY_FACETS_OPTION)
    if not given:
        return []
    names = [name.strip().lower().replace("-", "_") for name in str(given).split(",")]
    unknown = [name for name in names if name not in KEY_FACETS]
    if unknown or not all(names):
        raise pytest.UsageError(
            f"--accel-key-facets: {', '.join(unknown) or 'an empty name'}: not a facet"
            f" (known: {', '.join(KEY_FACETS)})"
        )
    versions = framework_versions()
    return [(name, versions.get(name)) for name in dict.fromkeys(names)]


def _key_override(config: pytest.Config) -> str | None:
    key = raw_setting(config, HARDWARE_KEY_OPTION)
    if key is not None and not str(key).strip():
        raise pytest.UsageError("--accel-key: the key must not be empty")
    return str(key).strip() if key else None


def setup(config: pytest.Config) -> SessionFacts:
    """Options and detection, resolved (and probed) once per session."""
    found = config.stash.get(_facts_key, None)
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
    facts = config.stash[_facts_key] = SessionFacts(
        options,
        detection,
        hardware_key(detection, _key_override(config), key_facets(config)),
        slice_of(config, os.environ),
    )
    return facts


# Where a multi-host TPU slice says which host this is, and which hosts it has.
HOST_VARIABLES = ("TPU_WORKER_ID", "CLOUD_TPU_TASK_ID")
HOSTS_VARIABLE = "TPU_WORKER_HOSTNAMES"  # comma-separated, one per host


def slice_of(config: pytest.Config, environ: Mapping[str, str]) -> Slice | None:
    """``--accel-host`` (else the slice's own variable), ``--accel-hosts`` (else the
    slice's host names, counted) and ``--accel-run-name`` (else GitHub's run id and
    attempt); None on a host of its own (no index given or found)."""
    given = raw_setting(config, HOST_OPTION)
    host = parse_non_negative_int("--accel-host", str(given)) if given else None
    if host is None:
        found = next((environ[v].strip() for v in HOST_VARIABLES if v in environ), "")
        host = int(found) if found.isdigit() else None
    if host is None:
        return None
    counted = raw_setting(config, HOSTS_OPTION)
    hosts = parse_positive_int("--accel-hosts", str(counted)) if counted else None
    if hosts is None and environ.get(HOSTS_VARIABLE, "").strip():
        hosts = len([h for h in environ[HOSTS_VARIABLE].split(",") if h.strip()])
    if hosts is not None and host >= hosts:
        raise pytest.UsageError(f"--accel-host: host {host} of {hosts}: hosts count from 0")
    name = raw_setting(config, RUN_NAME_OPTION)
    if not name and environ.get("GITHUB_RUN_ID"):
        name = f"{environ['GITHUB_RUN_ID']}-{environ.get('GITHUB_RUN_ATTEMPT', '1')}"
    return Slice(host, hosts, (str(name).strip() or None) if name else None)


def configure_node(node: Any) -> None:
    """xdist controller: hand the detection to each worker instead of re-detecting."""
    found = node.config.stash.get(_facts_key, None)
    if found is not None:
        node.workerinput[WORKERINPUT_DETECTION] = found.detection.to_json()
