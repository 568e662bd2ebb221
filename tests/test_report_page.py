"""The report page from hand-made report data, parsed back as HTML: each section's
empty state, the sortable tables with their machine-readable values, the flaky grid
cell by cell, and ids escaped everywhere.  (A real browser renders it in
test_report.py.)"""

from __future__ import annotations

from html.parser import HTMLParser

from pytest_accel.report.data import FlakyRow, ReportData, Row, Shard, Trend
from pytest_accel.report.page import render


class Cells(HTMLParser):
    """The text of each table cell, and every start tag's attributes, by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._table: str | None = None
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "table":
            self._table = found.get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self.tables[self._table][-1].append("")
            self._in_cell = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._in_cell = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._in_cell and self._table is not None:
            self.tables[self._table][-1][-1] += data


def parsed(data: ReportData) -> tuple[str, Cells]:
    page = render(data)
    cells = Cells()
    cells.feed(page)
    return page, cells


def test_an_empty_report_says_what_each_section_is_missing() -> None:
    page, _ = parsed(ReportData())
    assert "No record given: only the baseline and history below." in page
    assert "No baseline to compare with." in page
    assert "No tests recorded." in page
    assert "The baseline holds one hardware key, or none." in page
    assert "No flaky history given (--flaky-history)." in page
    assert 'id="shards"' not in page


def test_the_slowest_tables_are_sortable_with_exact_values() -> None:
    data = ReportData(tests=[Row("t.py::slow", "cpu/x1", 1.23456789, "passed")])
    _, cells = parsed(data)
    assert cells.tables["slowest-tests"] == [
        ["wall seconds", "test", "hardware key", "outcome"],
        ["1.235", "t.py::slow", "cpu/x1", "passed"],
    ]
    assert ("td", {"class": "n", "data-v": "1.234568"}) in cells.tags
    assert ("table", {"id": "slowest-tests", "class": "sortable"}) in cells.tags


def test_the_flaky_grid_has_a_cell_per_run_right_aligned() -> None:
    data = ReportData(
        flaky=[FlakyRow("cpu/x1", "t.py::flips", "PFK", "flaky", 1.0, 1 / 3)],
        flaky_runs={"cpu/x1": 5},
    )
    page, cells = parsed(data)
    [header, row] = cells.tables["flaky-grid"]
    assert header[:5] == ["test", "hardware key", "status", "flip rate", "failure rate"]
    assert row[:5] == ["t.py::flips", "cpu/x1", "flaky", "1.00", "33%"]
    assert row[5:] == [" ", " ", "P", "F", "K"]  # two runs before the test existed
    titles = [
        a.get("title") for tag, a in cells.tags if tag == "td" and "c" in (a.get("class") or "")
    ]
    assert titles == [
        "not run (absent from that run)",
        "not run (absent from that run)",
        "passed",
        "failed",
        "flaky: passed on a rerun",
    ]
    assert "cpu/x1: 5 run(s)" in page


def test_a_history_without_failures_says_so() -> None:
    page, _ = parsed(ReportData(flaky_runs={"cpu/x1": 12}))
    assert "No test failed in the history (cpu/x1: 12 run(s))." in page


def test_keys_side_by_side_leave_a_missing_median_empty() -> None:
    data = ReportData(
        across_keys=["cpu/x1", "tpu/x8"], across=[("t.py::a", [2.0, None]), ("t.py::b", [1.0, 0.1])]
    )
    _, cells = parsed(data)
    assert cells.tables["across"] == [
        ["test", "cpu/x1", "tpu/x8"],
        ["t.py::a", "2.000", ""],
        ["t.py::b", "1.000", "0.100"],
    ]


def test_findings_beyond_the_charts_are_listed_and_shards_drawn() -> None:
    trend = Trend("test", "t.py::a", ["c1", "this run"], [0.1, 0.3], None, "REGRESSION a", True)
    data = ReportData(
        trends=[trend],
        more_findings=["REGRESSION test t.py::b: 0.3s", "CHANGED test t.py::c"],
        shards=[Shard("1/2", 3, 1.0), Shard("2/2", 2, 1.5)],
    )
    page, _ = parsed(data)
    assert '<p class="slower id">REGRESSION a</p>' in page
    assert "<p>2 more:</p>" in page
    assert '<li class="id">CHANGED test t.py::c</li>' in page
    assert 'id="shards"' in page
    assert "Shard balance: seconds per shard" in page


def test_hostile_ids_are_escaped_in_every_section() -> None:
    hostile = '<img src=x onerror=alert(1)>"&'
    data = ReportData(
        tests=[Row(hostile, hostile, 1.0, hostile)],
        across_keys=[hostile, "b"],
        across=[(hostile, [1.0, 2.0])],
        flaky=[FlakyRow(hostile, hostile, "F", "broken", 0.0, 1.0)],
        flaky_runs={hostile: 1},
        more_findings=[hostile],
    )
    page, cells = parsed(data)
    assert "<img" not in page
    assert not [tag for tag, _ in cells.tags if tag == "img"]
    assert "&lt;img src=x onerror=alert(1)&gt;&quot;&amp;" in page
