"""The pytest session ``pytest-accel detect`` runs: configured as a run here would be,
it keeps the detection and header line and stops before collecting."""

from __future__ import annotations

import pytest

from pytest_accel.cli.common import CliError
from pytest_accel.hardware.detection import Detection


class _Capture:
    """Keeps the session's facts and the header line, and stops before collection."""

    def __init__(self) -> None:
        self.detection: Detection | None = None
        self.header = ""
        self.where = ""

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        from pytest_accel.hardware.facts import setup
        from pytest_accel.hardware.plugin import header_line

        facts = setup(config)
        self.detection, self.header = facts.detection, header_line(facts)
        self.where = f"rootdir: {config.rootpath}"
        if config.inipath is not None:
            self.where += f", configfile: {config.inipath.name}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        return True  # nothing to collect: detection is all we came for


def detect_as_pytest(args: list[str]) -> tuple[Detection, str, str]:
    """The detection, header line and rootdir of a pytest run here with ``args``."""
    capture = _Capture()
    # No terminal, no cache, and no assertion rewriting: this process has imported the
    # plugin already, and nothing will run that needs rewritten asserts.
    quiet = ["-p", "pytest_accel", "-p", "no:terminal", "-p", "no:cacheprovider", "--assert=plain"]
    code = pytest.main([*quiet, *args], plugins=[capture])
    if capture.detection is None:
        raise CliError(f"pytest stopped before detecting anything (exit status {int(code)})")
    return capture.detection, capture.header, capture.where
