"""The record's ``selection`` section: one type, built once, encoded only when written,
read back as it was written (``selection.section``)."""

from __future__ import annotations

import json

import pytest

from pytest_accel.files import InputError
from pytest_accel.selection.section import MapOfRun, Saved, SelectionSection, section_of

SECTION = SelectionSection(
    "changed",
    {"t.py::a": "changed since the map of abc: pkg/m.py::f"},
    {"t.py::b": "what it depends on is unchanged since the map of abc"},
    {"t.py::c": "over --accel-select-budget 10 s: for the nightly bucket"},
    (("conftest", "tests/conftest.py changed"),),
    ("git does not know origin/main here",),
    MapOfRun("abc", "main", "2026-11-28T10:00:00Z", -0.5),
    ("t.py::a",),
    Saved(12.5, 0.01, 1),
)


def test_a_section_reads_back_as_it_was_written() -> None:
    assert section_of("r.json", json.loads(json.dumps(SECTION.to_json()))) == SECTION
    decided = SelectionSection("shadow", {"t.py::a": "new"}, {"t.py::b": "unchanged"}, {})
    assert section_of("worker gw0", decided.to_json()) == decided
    assert "saved" not in decided.to_json()  # a decision, before its run was over
    assert decided.left_out == {}  # shadow mode leaves nothing out
    assert SECTION.left_out == {**SECTION.deselected, **SECTION.cut}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("mode", "sometimes", "selection.mode: 'sometimes' is not changed, programs or shadow"),
        ("kept", {"t.py::a": 3}, "selection.kept: expected node id -> reason (text)"),
        ("valves", [{"name": "git"}], "selection.valves: expected a list of {name, detail}"),
        ("map", {"commit": 5}, "selection.map.commit"),
        ("saved", {"device_seconds": -1}, "selection.saved.device_seconds"),
    ],
)
def test_a_damaged_field_is_one_line_naming_it(field: str, value: object, said: str) -> None:
    damaged = {**SECTION.to_json(), field: value}
    with pytest.raises(InputError) as raised:
        section_of("r.json", damaged)
    assert str(raised.value).startswith("r.json: ")
    assert said in str(raised.value)
