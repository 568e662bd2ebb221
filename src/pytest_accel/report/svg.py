"""Charts as inline SVG, drawn here: nothing to fetch, nothing to run.

Every chart has a title, axes with units and a legend.  All text is escaped for HTML
(which is also what SVG inside HTML needs): a test id cannot close the ``<svg>`` or
open a ``<script>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from math import ceil, floor, log10

from pytest_accel.report.data import Shard, Trend

WIDTH, HEIGHT = 720, 264
# The title, then the legend, above the plot; below it, run labels slanted at 35
# degrees (14 characters reach about 50 px down and 80 px left: the first run's label
# ends under the plot's left edge, so the margin holds it) and the axis title under them.
LEFT, RIGHT, TOP, BOTTOM = 92, 16, 48, 86
LABEL_CHARS = 14
LABEL_GAP = 24  # px between neighbouring labels' baselines, at their slant: no overlap
SLOWER, FASTER, LINE, CURRENT, GRID = "#c0392b", "#1e7b34", "#2c5d8f", "#e67e22", "#d8dde3"
GRID_DARK = "#7a8694"  # a reference line: the baseline runs' median


def nice_ceiling(value: float) -> float:
    """The axis top: 1, 2, 2.5 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** floor(log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f}" if seconds >= 100 else f"{seconds:.3g}"


def trend_chart(trend: Trend) -> str:
    """A test's (class's, module's) duration over the baseline's runs and this one: a
    line, this run as a larger dot, and the change point as a dashed line with the run
    it names."""
    values = trend.seconds
    present = [v for v in values if v is not None]
    if trend.reference is not None:
        present.append(trend.reference)
    top = nice_ceiling(max(present) * 1.1 if present else 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(values) - 1, 1)

    def x(index: int) -> float:
        return LEFT + index * step

    def y(seconds: float) -> float:
        return TOP + plot_h * (1 - seconds / top)

    title = (
        "suite total: seconds per run"
        if trend.kind == "session"
        else f"{trend.kind} {trend.id}: duration per run"
    )
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}"'
        f' height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="{LEFT}" y="16" class="title">{escape(_short(title, 90))}</text>',
    ]
    for tick in range(5):  # y axis: seconds
        value = top * tick / 4
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}"'
            f' stroke="{GRID}"/><text x="{LEFT - 6}" y="{y(value) + 4:.1f}"'
            f' text-anchor="end">{_fmt(value)}</text>'
        )
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" transform="rotate(-90 14 {TOP + plot_h / 2:.1f})"'
        f' text-anchor="middle">seconds ({escape(trend.unit)})</text>'
    )
    if trend.reference is not None:  # what this run is set against: drawn, not implied
        ref = y(trend.reference)
        parts.append(
            f'<line class="reference" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{ref:.1f}"'
            f' y2="{ref:.1f}" stroke="{GRID_DARK}" stroke-dasharray="3 3"/>'
        )
    # Slanted labels sit step * sin(35 degrees) apart: every n-th is shown so that they
    # do not overlap, and always this run's, the last (dropping its neighbour if close).
    every = max(1, ceil(LABEL_GAP / (step * 0.57)))
    last = len(values) - 1
    for index, label in enumerate(trend.labels):  # x axis: runs
        shown = index == last or (index % every == 0 and last - index >= every)
        if not shown:
            continue
        parts.append(
            f'<text x="{x(index):.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="end"'
            f' transform="rotate(-35 {x(index):.1f} {HEIGHT - BOTTOM + 14})">'
            f"{escape(_short(label, LABEL_CHARS))}<title>{escape(label)}</title></text>"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        "run (commit, or start time), oldest first</text>"
    )
    if trend.change_at is not None and 0 <= trend.change_at < len(values):
        at = x(trend.change_at) - step / 2 if trend.change_at else x(0)
        since = trend.labels[trend.change_at] if trend.change_at < len(trend.labels) else ""
        right_half = at > LEFT + plot_w / 2  # the label goes where there is room
        anchor, nudge = ("end", -4) if right_half else ("start", 4)
        parts.append(
            f'<line class="change" x1="{at:.1f}" x2="{at:.1f}" y1="{TOP}" y2="{TOP + plot_h}"'
            f' stroke="{SLOWER if trend.slower else FASTER}" stroke-dasharray="5 4"/>'
            f'<text x="{at + nudge:.1f}" y="{TOP + 12}" text-anchor="{anchor}">change since'
            f" {escape(_short(since, LABEL_CHARS))}</text>"
        )
    for segment in _segments(values):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in segment)
        parts.append(f'<polyline points="{points}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    for index, sample in enumerate(values):
        if sample is None:
            continue
        last = index == len(values) - 1
        parts.append(
            f'<circle cx="{x(index):.1f}" cy="{y(sample):.1f}" r="{5 if last else 2.5}"'
            f' fill="{CURRENT if last else LINE}"><title>{escape(trend.labels[index])}:'
            f" {_fmt(sample)} s</title></circle>"
        )
    # The last run: this run, or the record it is of where a report has several.
    current = trend.labels[-1] if trend.labels else "this run"
    entries = [
        (LINE, "duration (s)"),
        (CURRENT, current if current == "this run" else f"record {current}"),
    ]
    if trend.reference is not None:
        entries.append((GRID_DARK, "baseline median"))
    parts.append(_legend(entries, trend))
    parts.append("</svg>")
    return "".join(parts)


def _legend(entries: Sequence[tuple[str, str]], trend: Trend | None = None) -> str:
    items = list(entries)
    if trend is not None and trend.change_at is not None:
        items.append((SLOWER if trend.slower else FASTER, "change point"))
    parts, at = [], LEFT
    for color, text in items:
        parts.append(
            f'<rect x="{at}" y="24" width="10" height="10" fill="{color}"/>'
            f'<text x="{at + 14}" y="33">{escape(text)}</text>'
        )
        at += 130
    return f'<g class="legend">{"".join(parts)}</g>'


def _segments(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Runs without a sample break the line."""
    segments: list[list[tuple[int, float]]] = [[]]
    for index, value in enumerate(values):
        if value is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append((index, value))
    return [s for s in segments if len(s) > 1]


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def shard_chart(shards: Sequence[Shard]) -> str:
    """Each shard's total against the ideal (the total over the shards)."""
    if not shards:
        return ""
    bar_h, gap = 22, 8
    height = TOP + len(shards) * (bar_h + gap) + 44
    top = nice_ceiling(max(s.seconds for s in shards) * 1.05)
    ideal = sum(s.seconds for s in shards) / len(shards)
    plot_w = WIDTH - 150 - RIGHT

    def x(seconds: float) -> float:
        return 150 + plot_w * seconds / top

    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
        f' height="{height}" xmlns="http://www.w3.org/2000/svg">',
        "<title>Shard balance: seconds per shard</title>",
        '<text x="150" y="16" class="title">Shard balance: seconds per shard</text>',
    ]
    for index, shard in enumerate(shards):
        top_y = TOP + index * (bar_h + gap)
        parts.append(
            f'<text x="142" y="{top_y + 15}" text-anchor="end">shard {escape(shard.name)}</text>'
            f'<rect x="150" y="{top_y}" width="{x(shard.seconds) - 150:.1f}" height="{bar_h}"'
            f' fill="{LINE}"><title>shard {escape(shard.name)}: {_fmt(shard.seconds)} s,'
            f" {shard.tests} test(s)</title></rect>"
            f'<text x="{x(shard.seconds) + 4:.1f}" y="{top_y + 15}">{_fmt(shard.seconds)} s,'
            f" {shard.tests} test(s)</text>"
        )
    bottom = TOP + len(shards) * (bar_h + gap)
    parts.append(
        f'<line x1="{x(ideal):.1f}" x2="{x(ideal):.1f}" y1="{TOP - 4}" y2="{bottom}"'
        f' stroke="{CURRENT}" stroke-dasharray="5 4"/>'
        f'<text x="{150 + plot_w / 2:.1f}" y="{bottom + 30}" text-anchor="middle">'
        f"seconds (the dashed line: a perfect split, {_fmt(ideal)} s each)</text>"
    )
    parts.append(_legend([(LINE, "shard total (s)"), (CURRENT, "ideal")]))
    parts.append("</svg>")
    return "".join(parts)
