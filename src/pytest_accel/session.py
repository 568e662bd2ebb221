"""The facts every feature needs, resolved once per session by the hardware feature
(``hardware.facts.setup``): the ``--accel`` options, what was detected and how the
request was checked against it, and the hardware key.  Kept in ``config.stash``.

Here, apart from the hardware package, so that a feature reads the facts without
reaching into another feature: only types of the hardware package are named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_accel.hardware.detection import Detection
    from pytest_accel.hardware.options import AccelOptions


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


def get(config: pytest.Config) -> Session:
    """This session's facts (resolved in ``pytest_configure``, before any feature)."""
    return config.stash[session_key]
