"""Which accelerator a run has, and which tests can run on it: its options
(``options``), detection (built-in probes and third-party detectors, ``detection``),
the refusal to pretend (``policy``), the session's facts (``facts``), the markers and
selection (``markers``, ``plugin``).

Always on: every run detects and selects.  No pytest at import: the command line tool
imports the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_accel.hardware.options import OPTIONS

if TYPE_CHECKING:
    import pytest

    from pytest_accel.hardware.facts import SessionFacts

__all__ = ["OPTIONS", "configure_node", "register", "register_detectors", "set_devices", "setup"]


def register_detectors(pluginmanager: pytest.PytestPluginManager) -> None:
    """The built-in detectors, first and last of the ``pytest_accel_detect`` providers."""
    from pytest_accel.hardware.plugin import register_detectors as register

    register(pluginmanager)


def set_devices(early_config: pytest.Config) -> None:
    """``--accel-cpu-devices``, before conftests (which may import jax) are loaded."""
    from pytest_accel.hardware.plugin import set_cpu_devices

    set_cpu_devices(early_config)


def setup(config: pytest.Config) -> SessionFacts:
    """The session's facts: options, detection and the policy's verdict, the key."""
    from pytest_accel.hardware.facts import setup as resolve

    return resolve(config)


def register(config: pytest.Config) -> None:
    """The markers, and the selection that skips what cannot run here."""
    from pytest_accel.hardware.plugin import register as register_selection

    register_selection(config)


def configure_node(node: Any) -> None:
    """pytest-xdist's controller hands each worker its detection."""
    from pytest_accel.hardware.facts import configure_node as hand_over

    hand_over(node)
