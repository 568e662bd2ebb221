"""The Surefire elements for failed attempts, built from stand-in reports: the tag by
how the test ended and which phase failed, the message and exception type, the stack
trace and output, and text XML cannot hold.  (JUnit files from real runs, parsed
element by element, are in test_flaky_ci.py.)"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import pytest

from pytest_accel.flaky.junit import MESSAGE_LIMIT, SurefireAttempts, attempt_element


@dataclass
class Crash:
    message: str


@dataclass
class LongRepr:
    reprcrash: Crash
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Report:
    nodeid: str = "t.py::test_a"
    when: str = "call"
    outcome: str = "rerun"
    longrepr: object = None
    capstdout: str = ""
    capstderr: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    @property
    def skipped(self) -> bool:
        return self.outcome == "skipped"


def element_for(report: Report, final_passed: bool) -> ET.Element:
    return attempt_element(report, final_passed)  # type: ignore[arg-type]  # a stand-in


def log(attempts: SurefireAttempts, report: Report) -> None:
    attempts.pytest_runtest_logreport(report)  # type: ignore[arg-type]  # a stand-in


def failing(message: str, when: str = "call", **fields: str) -> Report:
    trace = f"def test_a():\n>       assert False\nE       {message}"
    return Report(when=when, longrepr=LongRepr(Crash(message), trace), **fields)


@pytest.mark.parametrize(
    ("when", "final_passed", "tag"),
    [
        ("call", True, "flakyFailure"),
        ("setup", True, "flakyError"),
        ("call", False, "rerunFailure"),
        ("setup", False, "rerunError"),
    ],
)
def test_the_tag_says_how_the_test_ended_and_which_phase_failed(
    when: str, final_passed: bool, tag: str
) -> None:
    element = element_for(failing("AssertionError: x", when), final_passed)
    assert element.tag == tag


def test_the_element_carries_message_type_trace_and_output() -> None:
    report = failing("ValueError: bad input\nmore", capstdout="printed\n", capstderr="warned\n")
    element = element_for(report, final_passed=True)
    assert element.attrib == {"message": "ValueError: bad input", "type": "ValueError"}
    trace = element.find("stackTrace")
    assert trace is not None
    assert trace.text is not None
    assert "assert False" in trace.text
    assert element.findtext("system-out") == "printed\n"
    assert element.findtext("system-err") == "warned\n"


def test_no_output_means_no_output_elements() -> None:
    element = element_for(failing("AssertionError"), final_passed=True)
    assert element.find("system-out") is None
    assert element.find("system-err") is None
    assert element.attrib["type"] == "AssertionError"


def test_a_dotted_exception_type_is_kept_whole_and_prose_has_none() -> None:
    dotted = element_for(failing("jax.errors.JaxRuntimeError: oom"), True)
    assert dotted.attrib["type"] == "jax.errors.JaxRuntimeError"
    prose = element_for(failing("assert 1 == 2 failed"), True)
    assert "type" not in prose.attrib


def test_a_long_message_is_cut_and_characters_xml_cannot_hold_are_escaped() -> None:
    message = "E: " + "x" * 5000 + "\x00\x1b"
    element = element_for(failing(message), True)
    assert len(element.attrib["message"]) == MESSAGE_LIMIT
    hostile = element_for(failing("E: bell\x07 and nul\x00"), True)
    assert hostile.attrib["message"] == "E: bell#x07 and nul#x00"
    ET.fromstring(ET.tostring(hostile))  # well-formed


def test_a_report_without_a_crash_uses_its_text() -> None:
    report = Report(longrepr="collected nothing to rerun")
    element = element_for(report, False)
    assert element.attrib["message"] == "collected nothing to rerun"
    assert element.findtext("stackTrace") == "collected nothing to rerun"


class FakeXml:
    """pytest's LogXML, as far as the attempts use it: a node reporter per report."""

    def __init__(self) -> None:
        self.elements: dict[str, list[ET.Element]] = {}

    def node_reporter(self, report: Report) -> FakeXml:
        self.current = self.elements.setdefault(report.nodeid, [])
        return self

    def append(self, element: ET.Element) -> None:
        self.current.append(element)


def test_attempts_wait_for_the_final_outcome_then_go_into_its_testcase() -> None:
    xml = FakeXml()
    attempts = SurefireAttempts(xml)
    log(attempts, failing("AssertionError: 1"))
    log(attempts, failing("AssertionError: 2"))
    log(attempts, Report(when="setup", outcome="passed"))
    assert xml.elements == {}  # the last attempt is still going
    log(attempts, Report(when="call", outcome="passed"))
    tags = [(e.tag, e.attrib["message"]) for e in xml.elements["t.py::test_a"]]
    assert tags == [("flakyFailure", "AssertionError: 1"), ("flakyFailure", "AssertionError: 2")]
    assert attempts.pending == {}


def test_a_test_that_failed_every_attempt_gets_rerun_elements() -> None:
    xml = FakeXml()
    attempts = SurefireAttempts(xml)
    log(attempts, failing("AssertionError: 1"))
    log(attempts, Report(outcome="failed"))
    assert [e.tag for e in xml.elements["t.py::test_a"]] == ["rerunFailure"]


def test_a_test_that_never_reran_adds_nothing() -> None:
    xml = FakeXml()
    attempts = SurefireAttempts(xml)
    log(attempts, Report(outcome="failed"))
    log(attempts, Report(nodeid="t.py::b", outcome="passed"))
    assert xml.elements == {}
