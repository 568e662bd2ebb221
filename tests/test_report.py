"""The HTML report: written at session end (``--accel-report``) and from files
(``pytest-accel report``), self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench import synthetic
from pytest_accel.cli import main
from pytest_accel.perf.formats.baseline import EnvHistory, add_run
from pytest_accel.perf.formats.record import check_record, timings
from tests.browser import NEEDS_CHROMIUM, chromium, measure
from tests.test_comparison import history, write_baseline

HOSTILE = ["<script>alert(1)</script>", 'q"uote', "</svg>&amp"]
SUITE = f"""
import os
import time

import pytest


def test_first():
    pass


def test_slow():
    time.sleep(float(os.environ.get("SLEEP", "0.1")))


@pytest.mark.parametrize("name", {HOSTILE!r})
def test_hostile(name):
    time.sleep(float(os.environ.get("SLEEP", "0.1")) if name.startswith("<script") else 0)
"""
IDS = [
    "test_mod.py::test_first",
    "test_mod.py::test_slow",
    *(f"test_mod.py::test_hostile[{name}]" for name in HOSTILE),
]
FLAKY_HISTORY = {
    "schema": "pytest-accel/flaky-history",
    "version": 1,
    "window": 50,
    "envs": {
        "cpu/x1": {
            "platform": "cpu",
            "runs": [{"started": f"2026-11-{d:02d}T00:00:00Z"} for d in range(1, 13)],
            "tests": {
                "test_mod.py::test_slow": "P" * 12,
                "t.py::test_<img src=x onerror=alert(1)>": "PFPPFPPKPFPP",
                "t.py::test_broken": "F" * 12,
            },
        }
    },
}


class Page(HTMLParser):
    """The text, the tags and the attributes of a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(self.text)


def prepare(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mod=SUITE)
    calls = dict.fromkeys(IDS, 0.0005) | {IDS[1]: 0.1, IDS[2]: 0.1}
    write_baseline(pytester.path / "b.json", history([calls] * 10, warmup=True))
    (pytester.path / "h.json").write_text(json.dumps(FLAKY_HISTORY))


@pytest.fixture
def report(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    prepare(pytester)
    monkeypatch.setenv("SLEEP", "0.35")
    result = pytester.runpytest(
        "--perf-baseline=b.json", "--perf-record=r.json", "--accel-report=out/report.html"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["pytest-accel: HTML report written to out/report.html"])
    return (pytester.path / "out/report.html").read_text(encoding="utf-8")


def test_the_report_shows_the_run_its_regressions_with_trends_and_the_slowest_tests(
    report: str,
) -> None:
    page = Page(report)
    text = page.all_text
    for heading in ("Summary", "Regressions and changes", "Slowest tests", "Slowest modules"):
        assert heading in text
    assert "REGRESSION test test_mod.py::test_slow:" in text
    charts = [a for tag, a in page.tags if tag == "svg"]
    titles = re.findall(r"<title>(.*?)</title>", report)
    assert "test test_mod.py::test_slow: duration per run" in titles
    assert len(charts) >= 3  # the suite total and the two regressions
    assert "seconds" in text  # the y axis says its unit
    assert "run (commit, or start time), oldest first" in text
    rows = [a for tag, a in page.tags if tag == "tr"]
    assert len(rows) >= 1 + 5  # the slowest tests: every test


def test_the_report_is_self_contained_and_fetches_nothing(report: str) -> None:
    page = Page(report)
    csp = next(a for tag, a in page.tags if tag == "meta" and a.get("http-equiv"))
    assert "default-src 'none'" in str(csp["content"])
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "data"):
            assert name not in attrs, (tag, attrs)
    assert "url(" not in report
    assert "@import" not in report
    assert not re.search(r"fetch\(|XMLHttpRequest|import\(", report)
    urls = re.findall(r"https?://[^\s\"'<>]+", report)
    assert set(urls) <= {"http://www.w3.org/2000/svg"}  # a namespace, never fetched


def test_hostile_test_ids_are_escaped_in_html_and_svg(report: str) -> None:
    assert report.count("<script") == 1  # the page's own script
    assert report.count("<svg") == report.count("</svg>")
    assert 'q"uote' not in report.replace("&quot;", "")
    assert "test_hostile[&lt;script&gt;alert(1)&lt;/script&gt;]" in report
    assert "&lt;/svg&gt;&amp;amp" in report
    page = Page(report)
    assert "test_mod.py::test_hostile[<script>alert(1)</script>]" in page.all_text


def test_the_cli_report_from_files_has_the_flaky_grid_and_the_shard_balance(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prepare(pytester)
    monkeypatch.setenv("SLEEP", "0.35")
    for shard in ("1/2", "2/2"):
        pytester.runpytest(f"--accel-shard={shard}", f"--perf-record=s{shard[0]}.json")
    monkeypatch.chdir(pytester.path)
    assert main(["merge", "-o", "merged.json", "s1.json", "s2.json"]) == 0
    capsys.readouterr()
    argv = ["report", "merged.json", "--baseline", "b.json", "--history", "h.json"]
    assert main([*argv, "-o", "r.html"]) == 0
    assert re.fullmatch(r"r\.html: HTML report, \d+ KiB\n", capsys.readouterr().out)
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    page = Page(html)
    text = page.all_text
    assert "Flaky history" in text
    grid = html[html.index('id="flaky-grid"') :]
    assert "t.py::test_broken" in grid
    assert "t.py::test_&lt;img src=x onerror=alert(1)&gt;" in grid
    assert "<img" not in html
    assert "test_mod.py::test_slow" not in grid  # it never failed
    assert grid.count('class="c F"') == 12 + 3
    assert "Shard balance" in text
    merged = json.loads((pytester.path / "merged.json").read_text())["run"]["merged_from"]
    for entry in merged:
        assert f"shard {entry['shard']}: {entry['seconds']:.3g} s" in text
    assert sum(e["seconds"] for e in merged) > 0.35  # the slow tests ran in one of them


def test_a_report_needs_something_to_show_and_a_place_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "-o", str(tmp_path / "r.html")]) == 2
    assert "nothing to report" in capsys.readouterr().err
    (tmp_path / "dir.html").mkdir()
    record = tmp_path / "r.json"
    record.write_text(json.dumps(synthetic.record({"t.py::a": 0.1})))
    assert main(["report", str(record), "-o", str(tmp_path / "dir.html")]) == 2
    assert "dir.html" in capsys.readouterr().err


def test_the_option_refuses_a_path_it_cannot_write_before_any_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "taken").mkdir()
    result = pytester.runpytest("--accel-report=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --accel-report: taken: *"])


def test_the_job_summary_draws_the_suite_total_over_runs_as_a_mermaid_chart(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_accel.perf.formats.baseline import Baseline
    from pytest_accel.perf.offline import baseline_json

    pytester.makepyfile(test_mod=SUITE)
    hostile_key = 'cpu/x1 "]```<b>,'
    calls = dict.fromkeys(IDS, 0.0005) | {IDS[1]: 0.1, IDS[2]: 0.1}
    env = history([calls] * 10, warmup=True)
    (pytester.path / "b.json").write_text(json.dumps(baseline_json(Baseline({hostile_key: env}))))
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest("--perf-baseline=b.json", f"--perf-env-key={hostile_key}")
    text = summary.read_text(encoding="utf-8")
    block = text[text.index("```mermaid") :]
    block = block[: block.index("```", 3) + 3]
    lines = block.splitlines()
    assert len(lines) == 7  # nothing in the key opened or closed anything
    assert lines[1] == "xychart-beta"
    assert lines[2] == '    title "Suite total per run, cpu/x1 ______b_,"'
    labels = re.findall(r'"([^"]*)"', lines[3])
    assert len(labels) == 11
    assert labels[-1] == "this run"
    assert lines[4].startswith('    y-axis "seconds" 0 --> ')
    values = lines[5].removeprefix("    line [").removesuffix("]").split(", ")
    assert len(values) == 11
    assert all(float(v) >= 0 for v in values)


def _png_pixels_differ(path: Path) -> bool:
    """Whether a PNG holds more than one colour (decoded with zlib: no image library)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat = 8, b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"IDAT":
            idat += data[at + 8 : at + 8 + length]
        at += 12 + length
    pixels = zlib.decompress(idat)
    return len(set(pixels[: 1 << 20])) > 16


@NEEDS_CHROMIUM
@pytest.mark.processes
def test_a_real_browser_renders_the_regression_its_trend_and_the_flaky_grid(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prepare(pytester)
    monkeypatch.setenv("SLEEP", "0.35")
    pytester.runpytest(
        "--perf-baseline=b.json", "--flaky-history=h.json", "--accel-report=report.html"
    )
    url = (pytester.path / "report.html").as_uri()
    browser = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "REGRESSION test test_mod.py::test_slow" in dom
    assert "<svg" in dom
    assert "test test_mod.py::test_slow: duration per run" in dom
    assert 'id="flaky-grid"' in dom
    # The script ran: the search boxes it shows are no longer hidden.
    assert re.search(r'<input id="slowest-tests-search" class="search"', dom)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*browser, f"--screenshot={shot}", "--window-size=1200,1600", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000
    assert _png_pixels_differ(shot)


@NEEDS_CHROMIUM
@pytest.mark.processes
def test_no_chart_label_is_clipped_in_a_real_browser(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every text of every chart (run labels slanted under the axis, the first one
    included; the axis titles; the legend) lies inside its chart, at 1400 px."""
    prepare(pytester)
    # Runs of two commits over several days: each label is the commit and the start
    # ("1f3a9c2 11-26 14:02"), the longest labels a chart shows.
    env = EnvHistory()
    calls = dict.fromkeys(IDS, 0.0005) | {IDS[1]: 0.1, IDS[2]: 0.1}
    for index in range(10):
        data = synthetic.record(calls, started=synthetic.STARTED + index * 86_000, warmup=True)
        data["run"]["commit"] = ("1f3a9c2d" if index < 5 else "8be04d71") * 5
        add_run(env, timings(check_record("r.json", data)), 50)
    write_baseline(pytester.path / "b.json", env)
    monkeypatch.setenv("SLEEP", "0.35")
    pytester.runpytest("--perf-baseline=b.json", "--accel-report=report.html")
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "<title>1f3a9c2 " in page  # a run label of commit and start
    found = measure(pytester.path / "report.html", tmp_path)
    assert found["texts"]["findings"] == "Regressions and changes"
    assert found["clipped"] == []


@NEEDS_CHROMIUM
@pytest.mark.processes
def test_how_long_ago_the_run_ended_is_told_when_the_page_is_opened(
    pytester: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page holds when its newest run ended (the same bytes whenever it is
    written); "3 days ago" is worked out by the browser as the page is opened."""
    from datetime import datetime, timedelta, timezone

    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    pytester.runpytest("--perf-record=r.json").assert_outcomes(passed=1)
    record = json.loads((pytester.path / "r.json").read_text())
    started = datetime.now(timezone.utc) - timedelta(days=3, hours=2)
    record["run"]["started"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    (pytester.path / "r.json").write_text(json.dumps(record))
    pages = [pytester.path / "one.html", pytester.path / "two.html"]
    for page in pages:
        assert main(["report", str(pytester.path / "r.json"), "-o", str(page)]) == 0
    html = pages[0].read_text(encoding="utf-8")
    assert html == pages[1].read_text(encoding="utf-8")
    assert f'<time datetime="{started.strftime("%Y-%m-%dT%H:%M")}' in html
    assert '<span id="made-ago"></span></p>' in html  # empty until the page is opened
    found = measure(pages[0], tmp_path)
    assert found["texts"]["made"].endswith(" UTC (3 days ago)"), found["texts"]["made"]


def test_the_same_tests_across_hardware_keys_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.perf.formats.baseline import Baseline
    from pytest_accel.perf.offline import baseline_json

    cpu = history([{"t.py::test_a": 0.4, "t.py::test_b": 0.1}] * 3)
    tpu = history([{"t.py::test_a": 0.05, "t.py::test_c": 0.2}] * 3, key="tpu/TPU v5 lite/x8")
    baseline = tmp_path / "b.json"
    envs = {"cpu/x1": cpu, "tpu/TPU v5 lite/x8": tpu}
    baseline.write_text(json.dumps(baseline_json(Baseline(envs))))
    assert main(["report", "--baseline", str(baseline), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    table = html[html.index('id="across"') : html.index("</table>", html.index('id="across"'))]
    assert "<th>cpu/x1</th><th>tpu/TPU v5 lite/x8</th>" in table
    assert table.count("<tr>") == 2  # the header and test_a: the only test on both
    assert re.search(r"t\.py::test_a</td><td[^>]*>0\.40\d</td><td[^>]*>0\.050</td>", table)
    assert "No record given" in html


QUARANTINE_SUITE = """
import pytest

def test_ok():
    pass

def test_known_bad():
    assert False, "quarantined"

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
"""


class _Cells(HTMLParser):
    """The text of every table cell, row by row, per table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table: str | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.table = dict(attrs).get("id") or f"table{len(self.tables)}"
            self.tables[self.table] = []
        elif tag == "tr" and self.table is not None:
            self.tables[self.table].append([])
        elif tag == "td":
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None and self.table is not None:
            self.tables[self.table][-1].append("".join(self.cell))
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def cells(page: str) -> dict[str, list[list[str]]]:
    parser = _Cells()
    parser.feed(page)
    return parser.tables


def test_a_quarantined_failure_is_counted_as_quarantined_and_a_skip_is_not_ranked(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_q=QUARANTINE_SUITE)
    (pytester.path / "q.txt").write_text("test_q.py::test_known_bad\n")
    result = pytester.runpytest(
        "--flaky-quarantine=q.txt", "--perf-record=r.json", "--accel-report=in-run.html"
    )
    assert result.ret == 0
    record = json.loads((pytester.path / "r.json").read_text())
    assert record["tests"]["quarantined"] == ["test_q.py::test_known_bad"]
    assert main(["report", str(pytester.path / "r.json"), "-o", str(pytester.path / "p.html")]) == 0
    for page in ("p.html", "in-run.html"):
        tables = cells((pytester.path / page).read_text())
        summary = next(rows for rows in tables.values() if rows and rows[-1][1] == "cpu/x1")
        assert "1 passed, 1 skipped, 1 quarantined" in summary[-1]
        assert "failed" not in summary[-1]
        slowest = [row[1] for row in tables["slowest-tests"] if row]
        assert sorted(slowest) == ["test_q.py::test_known_bad", "test_q.py::test_ok"]


def test_several_records_of_one_key_show_a_change_once(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dict.fromkeys(IDS[:2], 0.2)
    after = {**before, IDS[1]: 0.6}
    # A baseline of shards, as docs/ci.md builds it: a change is judged within a layout.
    write_baseline(pytester.path / "b.json", history([before] * 10 + [after] * 3, shard="1/2"))
    paths = []
    for shard in ("1/2", "2/2"):
        data = synthetic.record(after, shard=shard, started=synthetic.STARTED + 14 * 3600.0)
        path = pytester.path / f"r{shard[0]}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    out = pytester.path / "p.html"
    assert (
        main(["report", *paths, "--baseline", str(pytester.path / "b.json"), "-o", str(out)]) == 0
    )
    page = out.read_text()
    assert page.count("CHANGED test test_mod.py::test_slow") == 1


def test_a_baseline_alone_draws_its_changes_and_suite_total(
    pytester: pytest.Pytester,
) -> None:
    before = dict.fromkeys(IDS[:2], 0.2)
    after = {**before, IDS[1]: 0.6}
    write_baseline(pytester.path / "b.json", history([before] * 10 + [after] * 4))
    out = pytester.path / "trends.html"
    assert main(["report", "--baseline", str(pytester.path / "b.json"), "-o", str(out)]) == 0
    page = out.read_text()
    assert "No baseline to compare with" not in page
    assert "the changes the baseline's own runs show" in page
    assert re.search(
        r"CHANGED under cpu/x1: test test_mod\.py::test_slow: 0\.2\d*s -&gt; 0\.6", page
    )
    assert page.count("<svg") == 2  # the suite total and the change's trend


def test_the_flaky_grid_has_a_legend_for_every_cell_colour(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "h.json").write_text(json.dumps(FLAKY_HISTORY))
    out = pytester.path / "grid.html"
    assert main(["report", "--history", str(pytester.path / "h.json"), "-o", str(out)]) == 0
    page = out.read_text()
    legend = page.split('<ul class="legend" id="flaky-legend">', 1)[1].split("</ul>", 1)[0]
    swatches = re.findall(r'<span class="swatch (\w)"></span>([^<]+)</li>', legend)
    assert swatches == [
        ("P", "passed"),
        ("F", "failed"),
        ("K", "flaky: passed on a rerun"),
        ("x", "not run (absent from that run)"),
    ]
    grid_classes = set(re.findall(r'<td class="c (\w)"', page))
    assert grid_classes <= {letter for letter, _ in swatches}


OVERRIDDEN = """
import time
import pytest

def test_first():
    pass

@pytest.mark.perf(threshold=5.0)
def test_allowed_to_vary():
    time.sleep(0.3)

def test_new_and_slow():
    time.sleep(0.25)
"""


def test_the_in_run_page_says_what_the_terminal_said_overrides_and_new_slow_included(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_mod=OVERRIDDEN)
    calls = {"test_mod.py::test_first": 0.0002, "test_mod.py::test_allowed_to_vary": 0.1}
    write_baseline(pytester.path / "b.json", history([calls] * 6, warmup=True))
    result = pytester.runpytest(
        "--perf-baseline=b.json", "--perf-new-slow=0.2", "--accel-report=page.html"
    )
    # 3x the baseline: within the test's own @perf(threshold=5.0), not within the suite's.
    result.stdout.fnmatch_lines(
        [
            "REGRESSION session suite total: *",
            "NEW SLOW test test_mod.py::test_new_and_slow: 0.2*s (no baseline yet)",
            "perf: 1 regression(s), 0 change(s), 0 improvement(s), 1 new (1 slow)*",
        ]
    )
    result.stdout.no_fnmatch_line("REGRESSION test *")
    page = (pytester.path / "page.html").read_text()
    assert "REGRESSION test" not in page  # recomputed without the override, it was there
    assert "1 regression(s), 0 change(s), 0 improvement(s), 1 new, 0 missing" in page


def test_a_report_of_several_records_says_which_record_each_row_is_of(
    pytester: pytest.Pytester,
) -> None:
    """Once each test was listed once per record with nothing to tell the rows apart."""
    pytester.makepyfile(test_two="def test_a(): pass\ndef test_b(): pass\n")
    for name in ("first", "second"):
        pytester.runpytest(f"--perf-record={name}.json").assert_outcomes(passed=2)
    paths = [str(pytester.path / f"{name}.json") for name in ("first", "second")]
    assert main(["report", *paths, "-o", str(pytester.path / "p.html")]) == 0
    page = (pytester.path / "p.html").read_text()
    # A headline wraps between words, a long id anywhere (never break-all).
    assert "word-break:break-all" not in page
    assert "overflow-wrap:anywhere" in page
    tables = cells(page)
    rows = [row for row in tables["slowest-tests"] if row]
    assert sorted((row[1], row[4]) for row in rows) == [
        ("test_two.py::test_a", "first.json"),
        ("test_two.py::test_a", "second.json"),
        ("test_two.py::test_b", "first.json"),
        ("test_two.py::test_b", "second.json"),
    ]
    # One record: no record column.
    assert main(["report", paths[0], "-o", str(pytester.path / "one.html")]) == 0
    single = cells((pytester.path / "one.html").read_text())["slowest-tests"]
    assert {len(row) for row in single if row} == {4}


def test_a_report_of_many_records_judges_each_against_the_runs_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """13 runs, t.py::a 2.5x slower from the seventh on, all folded into the baseline
    given: the fourth run (before the slowdown) is judged against the three before it,
    never "improved" against a baseline mostly of later runs; the eleventh's change is
    found against the ten before it. Each finding names its record; its chart ends at
    its record, named."""
    paths = []
    for index in range(13):
        wobble = (1.00, 1.03, 0.98, 1.01, 0.97, 1.02, 0.99, 1.03, 0.97, 1.00)[index % 10]
        calls = {"t.py::a": (0.1 if index < 6 else 0.25) * wobble, "t.py::b": 0.3 * wobble}
        data = synthetic.record(calls, started=synthetic.STARTED + index * 3600.0)
        data["run"]["commit"] = f"{index:02d}" + "c" * 38
        path = tmp_path / f"r{index:02d}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    baseline = tmp_path / "b.json"
    assert main(["baseline", *paths, "--into", str(baseline)]) == 0
    out = tmp_path / "page.html"
    assert main(["report", paths[3], paths[10], "--baseline", str(baseline), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "improved test t.py::a" not in page
    assert "r10.json: CHANGED test t.py::a: 0.1s -&gt; 0.2" in page
    assert "since 06cccccccccc, 5 runs" in page
    assert "r03.json:" not in page.partition('id="findings"')[2].partition('id="slowest')[0]
    chart = page[page.index("r10.json: CHANGED") :]
    chart = chart[: chart.index("</svg>")]
    assert ">r10.json<" in chart  # the last run on its axis: the record
    assert "record r10.json" in chart  # the legend names it
    assert "this run" not in chart
    # One record: as before, "this run".
    one = tmp_path / "one.html"
    assert main(["report", paths[10], "--baseline", str(baseline), "-o", str(one)]) == 0
    single = one.read_text(encoding="utf-8")
    assert "CHANGED test t.py::a" in single
    assert "r10.json: CHANGED" not in single
    capsys.readouterr()


def test_runs_are_told_apart_on_a_charts_axis() -> None:
    from pytest_accel.perf.model.timings import RunIdentity, run_labels

    distinct = [RunIdentity("a" * 40), RunIdentity("b" * 40)]
    assert run_labels(distinct) == ["aaaaaaa", "bbbbbbb"]
    same_commit = [
        RunIdentity("c" * 40, None, "2026-11-26T14:02:10Z"),
        RunIdentity("c" * 40, None, "2026-11-26T15:30:00Z"),
    ]
    assert run_labels(same_commit) == ["ccccccc 14:02", "ccccccc 15:30"]
    one_minute = [
        RunIdentity(None, None, "2026-11-25T14:02:10Z"),
        RunIdentity(None, None, "2026-11-26T14:02:10Z"),
        RunIdentity(None, None, "2026-11-26T14:02:40Z"),
    ]
    assert run_labels(one_minute) == ["11-25 14:02:10", "11-26 14:02:10", "11-26 14:02:40"]
    assert run_labels([RunIdentity(), RunIdentity()]) == ["run 1", "run 2"]


def test_slanted_axis_labels_never_overlap_and_the_last_is_this_run() -> None:
    import itertools
    import re

    from pytest_accel.report.data import Trend
    from pytest_accel.report.svg import trend_chart

    labels = [f"11-26 14:{m:02d}" for m in range(40)] + ["this run"]
    chart = trend_chart(
        Trend("test", "t.py::a", labels, [0.1] * len(labels), None, "REGRESSION t", True)
    )
    xs = [
        float(x)
        for x in re.findall(
            r'<text x="([0-9.]+)" y="[0-9]+" text-anchor="end"'
            r' transform="rotate',
            chart,
        )
    ]
    assert len(xs) < len(labels)
    assert min(b - a for a, b in itertools.pairwise(xs)) * 0.57 >= 24  # the gap
    assert ">this run<title>" in chart


GROUPED = """
import time

class TestPair:
    def test_one(self):
        time.sleep(0.02)

    def test_two(self):
        time.sleep(0.01)

def test_alone():
    pass
"""


def _group_rows(page: str, name: str) -> list[tuple[str, str]]:
    """The slowest classes or modules table: (id, tests) per row, as shown."""
    table = page.split(f'id="slowest-{name}"', 1)[1].split("</table>", 1)[0]
    return re.findall(
        r'<td class="id">([^<]*)</td><td class="id">[^<]*</td><td>([^<]*)</td>', table
    )


def test_the_in_run_page_ranks_classes_and_modules_as_the_page_from_their_record(
    pytester: pytest.Pytester,
) -> None:
    """The session's page reads the classes and modules as the run built them; the
    command's, as the record holds them: the same rows, counted alike."""
    pytester.makepyfile(test_grouped=GROUPED, test_other="def test_b():\n    pass\n")
    pytester.runpytest("--perf-record=r.json", "--accel-report=in-run.html").assert_outcomes(
        passed=4
    )
    assert main(["report", "r.json", "-o", "from-record.html"]) == 0
    in_run = (pytester.path / "in-run.html").read_text()
    from_record = (pytester.path / "from-record.html").read_text()
    classes = _group_rows(in_run, "classes")
    assert classes == [("test_grouped.py::TestPair", "2 test(s)")]
    assert sorted(_group_rows(in_run, "modules")) == [
        ("test_grouped.py", "3 test(s)"),
        ("test_other.py", "1 test(s)"),
    ]
    for name in ("classes", "modules"):
        assert _group_rows(in_run, name) == _group_rows(from_record, name)
