"""The report as one self-contained HTML page.

Nothing is fetched at view time: styles, script and charts are inline, and the page's
Content-Security-Policy forbids any request.  The tables read without JavaScript; the
small inline script only adds sorting and a search box.  Every text from the data goes
through ``html.escape``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from html import escape

from pytest_accel.cost.model import Spend, money
from pytest_accel.coverage.model import BUCKETS, LABELS, trend_line
from pytest_accel.outcomes import tally_words
from pytest_accel.report import svg
from pytest_accel.report.data import FlakyRow, ReportData, Row, RunSummary

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline';"
    " img-src data:; base-uri 'none'; form-action 'none'"
)


def _asset(name: str) -> str:
    from importlib import resources

    return resources.files("pytest_accel.report").joinpath(f"assets/{name}").read_text("utf-8")


def render(data: ReportData) -> str:
    return "".join(_page(data))


def _page(data: ReportData) -> Iterator[str]:
    yield '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    yield f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
    yield '<meta name="viewport" content="width=device-width, initial-scale=1">'
    yield f"<title>{escape(data.title)}</title><style>{_asset('report.css')}</style>"
    yield "</head><body>"
    yield f"<h1>{escape(data.title)}</h1>"
    if data.newest is not None:
        # The time is data; "N ago" is said by the script as the page is opened.
        shown = data.newest.replace("T", " ")[:16] + " UTC"
        yield (
            f'<p class="muted" id="made">Newest run ended <time datetime="{escape(data.newest)}">'
            f'{escape(shown)}</time><span id="made-ago"></span></p>'
        )
    yield from _summary(data.runs)
    yield from _findings(data)
    yield from _slowest(data)
    yield from _across(data)
    yield from _coverage(data)
    yield from _costs(data)
    yield from _selections(data)
    yield from _flaky(data.flaky, data.flaky_runs)
    yield from _shards(data)
    yield f"<script>{_asset('report.js')}</script></body></html>\n"


def _summary(runs: Sequence[RunSummary]) -> Iterator[str]:
    yield '<h2 id="summary">Summary</h2>'
    if not runs:
        yield '<p class="muted">No record given: only the baseline and history below.</p>'
        return
    yield (
        "<table><thead><tr><th>record</th><th>hardware key</th><th>commit</th><th>started</th>"
        "<th>layout</th><th>tests</th><th>wall time</th><th>suite total vs baseline</th>"
        "<th>findings</th><th>compilation (JAX)</th></tr></thead><tbody>"
    )
    for run in runs:
        outcomes = tally_words(run.outcomes)  # as the terminal's last line says it
        comparison = run.comparison
        if comparison is None:
            suite, findings = '<span class="muted">no baseline for this key</span>', ""
        else:
            ratio = run.suite_now / run.suite_then if run.suite_then else 1.0
            cls = "slower" if ratio > 1.2 else "faster" if ratio < 1 / 1.2 else ""
            suite = (
                f'<span class="{cls}">{run.suite_now:.2f} s vs {run.suite_then:.2f} s'
                f" ({ratio:.2f}x)</span> <small>against {escape(run.suite_basis)}</small>"
            )
            timing = comparison.timing
            findings = (
                f"{len(timing.regressions)} regression(s), {len(timing.changes)}"
                f" change(s), {len(timing.improvements)} improvement(s),"
                f" {len(timing.new)} new, {len(timing.missing)} missing"
            )
            if comparison.recompiles.found:
                findings += f", {len(comparison.recompiles.found)} recompiling"
            if comparison.device_memory.grew:
                findings += f", {len(comparison.device_memory.grew)} memory growth(s)"
            if timing.time == "execution":
                findings += "; judged on execution time"
        yield (
            f'<tr><td class="id">{escape(run.label)}</td><td class="id">{escape(run.key)}</td>'
            f'<td class="id">{escape((run.commit or "")[:12])}</td>'
            f"<td>{escape(run.started or '')}</td>"
            f"<td>{escape(run.layout or '')}</td><td>{escape(outcomes)}</td>"
            f'<td class="n">{run.duration:.1f} s</td><td>{suite}</td>'
            f"<td>{escape(findings)}</td><td>{escape(run.compilation)}</td></tr>"
        )
    yield "</tbody></table>"


def _findings(data: ReportData) -> Iterator[str]:
    yield '<h2 id="findings">Regressions and changes</h2>'
    if data.suite_trend is not None:
        yield f'<div class="finding">{svg.trend_chart(data.suite_trend)}</div>'
    if data.baseline_only:
        yield (
            '<p class="muted">No record given: the changes the baseline\'s own runs show,'
            " its newest run taken as the latest.</p>"
        )
    for cls, notes in (("slower", data.alarm_notes), ("muted", data.notes)):
        yield from (f'<p class="{cls} id">{escape(note)}</p>' for note in dict.fromkeys(notes))
    if not data.trends:
        compared = data.baseline_only or any(run.comparison is not None for run in data.runs)
        yield (
            '<p class="muted">'
            + ("Nothing got slower or faster." if compared else "No baseline to compare with.")
            + "</p>"
        )
        return
    for trend in data.trends:
        cls = "slower" if trend.slower else "faster"
        yield (
            f'<div class="finding"><p class="{cls} id">{escape(trend.headline)}</p>'
            f"{svg.trend_chart(trend)}</div>"
        )
    if data.more_findings:
        yield f"<p>{len(data.more_findings)} more:</p><ul>"
        yield from (f'<li class="id">{escape(line)}</li>' for line in data.more_findings)
        yield "</ul>"


SINGULAR = {"tests": "test", "classes": "class", "modules": "module"}


def _slowest(data: ReportData) -> Iterator[str]:
    for name, rows, detail in (
        ("tests", data.tests, "outcome"),
        ("classes", data.classes, "tests"),
        ("modules", data.modules, "tests"),
    ):
        yield f'<h2 id="slowest-{name}">Slowest {name}</h2>'
        if not rows:
            yield f'<p class="muted">No {name} recorded.</p>'
            continue
        priced = any(row.usd is not None for row in rows)
        several = any(row.record for row in rows)
        heads = [
            "wall seconds",
            name[:-1] if name != "classes" else "class",
            "hardware key",
            detail,
        ]
        heads += ["record"] * several + ["cost"] * priced
        yield from _table(f"slowest-{name}", heads, _rows(rows, priced, several))


def _rows(rows: Sequence[Row], priced: bool = False, several: bool = False) -> Iterator[str]:
    for row in rows:
        cost = ""
        if priced:
            value = "" if row.usd is None else money(row.usd)
            cost = f'<td class="n" data-v="{row.usd or 0:.8f}">{escape(value)}</td>'
        record = f'<td class="id">{escape(row.record)}</td>' if several else ""
        yield (
            f'<tr><td class="n" data-v="{row.seconds:.6f}">{row.seconds:.3f}</td>'
            f'<td class="id">{escape(row.id)}</td><td class="id">{escape(row.key)}</td>'
            f"<td>{escape(row.detail)}</td>{record}{cost}</tr>"
        )


def _table(ident: str, headers: Sequence[str], rows: Iterator[str]) -> Iterator[str]:
    yield (
        f'<input id="{ident}-search" class="search hidden" type="search"'
        f' placeholder="search {escape(ident.rsplit("-", maxsplit=1)[-1])}" aria-label="search">'
    )
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    yield f'<table id="{ident}" class="sortable"><thead><tr>{head}</tr></thead><tbody>'
    yield from rows
    yield "</tbody></table>"


def _across(data: ReportData) -> Iterator[str]:
    yield '<h2 id="across">The same tests across hardware keys</h2>'
    if not data.across:
        yield '<p class="muted">The baseline holds one hardware key, or none.</p>'
        return
    yield '<p class="muted">Median seconds in the baseline, per hardware key.</p>'

    def rows() -> Iterator[str]:
        for test, values in data.across:
            cells = "".join(
                f'<td class="n" data-v="{v:.6f}">{v:.3f}</td>' if v is not None else "<td></td>"
                for v in values
            )
            yield f'<tr><td class="id">{escape(test)}</td>{cells}</tr>'

    yield from _table("across", ["test", *data.across_keys], rows())


GAP_TESTS = 50  # tests named per gap between two keys


def _coverage(data: ReportData) -> Iterator[str]:
    """Per hardware key: what its newest record's tests came to, and its trend; then the
    tests that pass on one key and not on another."""
    if not data.coverage:
        return
    yield '<h2 id="coverage">Coverage per hardware key</h2>'
    yield (
        '<p class="muted">A test is covered where it passed; a failure, an expected'
        " failure or a skip never is. The newest record of each key; the trend over its"
        " records, oldest first.</p>"
    )
    heads = ["hardware key", "tests", *(LABELS[b] for b in BUCKETS), "covered", "trend"]

    def rows() -> Iterator[str]:
        for key, runs in data.coverage.items():
            latest = runs[-1]
            cells = "".join(f'<td class="n">{latest.counts.get(b, 0)}</td>' for b in BUCKETS)
            reasons = "; ".join(f"{n}x {r}" for r, n in sorted(latest.platform_reasons.items()))
            yield (
                f'<tr><td class="id" title="{escape(reasons)}">{escape(key)}</td>'
                f'<td class="n">{latest.tests}</td>{cells}'
                f'<td class="n" data-v="{latest.pct:.4f}">{latest.pct:.2f}%</td>'
                f"<td>{escape(trend_line(runs))}</td></tr>"
            )

    yield from _table("coverage-matrix", heads, rows())
    for gap in data.coverage_gaps:
        yield (
            f'<details class="gap"><summary>{gap.count} test(s) pass on'
            f' <span class="id">{escape(gap.covered_on)}</span> but not on'
            f' <span class="id">{escape(gap.missing_on)}</span></summary><ul>'
        )
        named = [(t, what) for what, tests in sorted(gap.tests.items()) for t in tests]
        for test, what in named[:GAP_TESTS]:
            yield f'<li><span class="id">{escape(test)}</span> ({escape(LABELS[what])})</li>'
        if len(named) > GAP_TESTS:
            yield f"<li>... and {len(named) - GAP_TESTS} more</li>"
        yield "</ul></details>"


COST_MODULES = 10  # the costliest modules listed per record


def _costs(data: ReportData) -> Iterator[str]:
    """Per record with a cost section: the run, its tests, its reruns, the projection;
    then its costliest modules."""
    if not data.costs:
        return
    yield '<h2 id="cost">Cost</h2>'
    heads = ["record", "hardware key", "price", "run", "tests", "reruns", "a month"]

    def cell(spent: Spend) -> str:
        usd, seconds = spent.usd, spent.device_seconds
        text = money(usd) if usd is not None else f"{seconds:,.1f} device-s"
        return f'<td class="n" title="{seconds:,.1f} device-seconds">{escape(text)}</td>'

    def rows() -> Iterator[str]:
        for path, cost in data.costs:
            price = _usd(cost.price)
            per_month = cost.per_month_usd
            month = "" if per_month is None else _usd(per_month)
            yield (
                f'<tr><td class="id">{escape(path)}</td><td class="id">{escape(cost.key)}</td>'
                f"<td>{escape(price)}{' / device-hour' if price != 'no price' else ''}</td>"
                f"{cell(cost.run)}{cell(cost.tests)}{cell(cost.reruns)}"
                f'<td class="n">{escape(month)}</td></tr>'
            )

    yield from _table("cost-runs", heads, rows())

    def modules() -> Iterator[str]:
        for path, cost in data.costs:
            for name, spent in list(cost.modules.items())[:COST_MODULES]:
                yield _spent_row(name, path, spent)

    yield from _table("cost-modules", ["module", "record", "device-seconds", "cost"], modules())

    def candidates() -> Iterator[str]:
        for path, cost in data.costs:
            for ident, spent in cost.cpu_candidates or ():
                yield _spent_row(ident, path, spent)

    rows_of_candidates = list(candidates())
    if rows_of_candidates:
        yield (
            '<h3 id="cpu-candidates">CPU-tier candidates</h3><p class="muted">Tests that'
            " passed on an accelerator key and compiled nothing there (docs/cost.md).</p>"
        )
        heads = ["test", "record", "device-seconds", "cost"]
        yield from _table("cpu-candidates", heads, iter(rows_of_candidates))


SELECTION_LISTED = 50  # tests listed per record and part


def _selections(data: ReportData) -> Iterator[str]:
    """Per record whose run selected by change: what it ran and saved, the valves that
    fired, what shadow mode missed, what the budget cut and what it left out, each
    with why."""
    if not data.selections:
        return
    from pytest_accel.selection.output import headline
    from pytest_accel.selection.section import Saved

    yield '<h2 id="selection">Change-aware selection</h2>'
    for path, found in data.selections:
        yield f"<p><b>{escape(path)}</b>: {escape(headline(found, found.saved or Saved()))}</p>"
        said = [f"kept every test: {name}: {detail}" for name, detail in found.valves]
        said += found.notes
        if said:
            yield "<ul>"
            yield from (f"<li>{escape(text)}</li>" for text in said)
            yield "</ul>"
        failed = set(found.failed)
        missed = [t for t in found.deselected if t in failed]
        shadow_missed = "missed by shadow mode (failed, would have been deselected)"
        parts = [
            (shadow_missed, missed, found.deselected),
            ("cut by the budget (the nightly bucket)", list(found.cut), found.cut),
        ]
        if found.mode != "shadow":
            parts.append(("deselected by change", list(found.deselected), found.deselected))
        for title, tests, reasons in parts:
            if not tests:
                continue
            listed = sorted(tests)[:SELECTION_LISTED]
            more = len(tests) - len(listed)
            yield f"<details><summary>{escape(title)}: {len(tests)}</summary><ul>"
            for test in listed:
                why = reasons.get(test, "")
                yield f'<li><span class="id">{escape(test)}</span>: {escape(why)}</li>'
            if more:
                yield f"<li>and {more} more (the record lists every one)</li>"
            yield "</ul></details>"


def _spent_row(name: str, path: str, spent: Spend) -> str:
    """A module's or a test's row: what it is, the record, device-seconds, dollars."""
    return (
        f'<tr><td class="id">{escape(name)}</td><td class="id">{escape(path)}</td>'
        f'<td class="n">{spent.device_seconds:,.1f}</td>'
        f'<td class="n">{escape(_usd(spent.usd))}</td></tr>'
    )


def _usd(value: object) -> str:
    return money(None if value is None else _number(value))


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _flaky(rows: Sequence[FlakyRow], runs: dict[str, int]) -> Iterator[str]:
    yield '<h2 id="flaky">Flaky history</h2>'
    if not runs:
        yield '<p class="muted">No flaky history given (--flaky-history).</p>'
        return
    if not rows:
        yield f"<p>No test failed in the history ({_runs_text(runs)}).</p>"
        return
    yield (
        f'<p class="muted">{_runs_text(runs)}. Each test\'s recorded outcomes, one cell a'
        " run, oldest first (hover a cell for its outcome):</p>"
    )
    yield '<ul class="legend" id="flaky-legend">'
    for letter in LEGEND:
        yield f'<li><span class="swatch {letter}"></span>{_name(letter)}</li>'
    yield "</ul>"
    width = max(runs.values())
    yield (
        '<table class="grid sortable" id="flaky-grid"><thead><tr><th>test</th>'
        "<th>hardware key</th><th>status</th><th>flip rate</th><th>failure rate</th>"
        f'<th colspan="{width}">outcomes per run</th></tr></thead><tbody>'
    )
    for row in rows:
        letters = row.letters.rjust(width, " ")
        cells = "".join(
            f'<td class="c {letter if letter != " " else "x"}" title="{_name(letter)}">'
            f'<span class="hidden">{letter}</span></td>'
            for letter in letters
        )
        yield (
            f'<tr><td class="id">{escape(row.test)}</td><td class="id">{escape(row.key)}</td>'
            f"<td>{escape(row.status)}</td>"
            f'<td class="n" data-v="{row.flip_rate:.4f}">{row.flip_rate:.2f}</td>'
            f'<td class="n" data-v="{row.failure_rate:.4f}">{row.failure_rate:.0%}</td>'
            f"{cells}</tr>"
        )
    yield "</tbody></table>"


LEGEND = ("P", "F", "K", "x")


def _name(letter: str) -> str:
    """What a cell's letter means (``x``: the test did not run in that run)."""
    return {"P": "passed", "F": "failed", "K": "flaky: passed on a rerun"}.get(
        letter, "not run (absent from that run)"
    )


def _runs_text(runs: dict[str, int]) -> str:
    return "; ".join(f"{escape(k)}: {n} run(s)" for k, n in sorted(runs.items()))


def _shards(data: ReportData) -> Iterator[str]:
    if not data.shards:
        return
    yield '<h2 id="shards">Shard balance</h2>'
    yield svg.shard_chart(data.shards)
