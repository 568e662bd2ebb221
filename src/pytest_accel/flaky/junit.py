"""JUnit XML as Maven Surefire writes it for reruns.

pytest's ``--junitxml`` writes one ``<testcase>`` per test and ignores the attempts our
reruns log as ``rerun``.  CI readers that know Surefire (Jenkins' junit plugin, Gradle's
``mergeReruns``, dorny/test-reporter, action-junit-report) read those attempts from:

- a test that passed in the end: one ``<flakyFailure>`` (a failed call) or
  ``<flakyError>`` (a failed setup) per failed attempt, and no ``<failure>``;
- a test that failed every attempt: pytest's ``<failure>`` (or ``<error>``) for the last
  attempt, then one ``<rerunFailure>`` (or ``<rerunError>``) per earlier attempt.

Each element has the attempt's ``message`` and exception ``type``, a ``<stackTrace>``
with pytest's report of it, and its captured output.  Registered only in the process
that writes the JUnit file, after pytest's own plugin handled each report.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
MESSAGE_LIMIT = 1000


def _xml_text(text: str) -> str:
    """Text XML 1.0 can hold: other characters are written as ``#xNN``."""
    return _NOT_XML.sub(lambda m: f"#x{ord(m.group()):02X}", text)


def attempt_element(report: pytest.TestReport, final_passed: bool) -> ET.Element:
    """The Surefire element for one failed attempt of a test."""
    kind = "Failure" if report.when == "call" else "Error"
    tag = ("flaky" if final_passed else "rerun") + kind
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or report.longrepr or "")
    found = _TYPE.match(message)
    attrs = {"message": _xml_text(message.splitlines()[0][:MESSAGE_LIMIT] if message else "")}
    if found:
        attrs["type"] = found.group(1)
    element = ET.Element(tag, attrs)
    trace = ET.SubElement(element, "stackTrace")
    trace.text = _xml_text(str(report.longrepr or ""))
    for section, text in (("system-out", report.capstdout), ("system-err", report.capstderr)):
        if text:
            ET.SubElement(element, section).text = _xml_text(text)
    return element


class SurefireAttempts:
    """Adds the attempts of rerun tests to pytest's JUnit XML."""

    def __init__(self, xml: Any) -> None:
        self.xml = xml  # pytest's LogXML
        self.pending: dict[tuple[str, Any], list[pytest.TestReport]] = {}

    @pytest.hookimpl(trylast=True)  # after pytest's junitxml has seen the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        key = (report.nodeid, getattr(report, "node", None))
        if str(report.outcome) == "rerun":  # our reruns' outcome, not one of pytest's
            self.pending.setdefault(key, []).append(report)
            return
        attempts = self.pending.get(key)
        if not attempts:
            return
        final_passed = report.passed and report.when == "call"
        final_failed = (report.failed and report.when in ("setup", "call")) or (
            report.skipped and hasattr(report, "wasxfail")  # a quarantined failure
        )
        if not (final_passed or final_failed):
            return  # a setup that passed: the attempt goes on
        del self.pending[key]
        reporter = self.xml.node_reporter(report)
        for attempt in attempts:
            reporter.append(attempt_element(attempt, final_passed))


def register(config: pytest.Config) -> None:
    """When pytest writes JUnit XML in this process."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest without it: its JUnit XML stays as it is
        return
    xml = config.stash.get(xml_key, None)
    if xml is not None:
        config.pluginmanager.register(SurefireAttempts(xml), "pytest_accel:junit_attempts")
