"""The report's charts as SVG, parsed back: well-formed, escaped, with a title, a
legend and the points where the data puts them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import pytest

from pytest_accel.report.data import Shard, Trend
from pytest_accel.report.svg import HEIGHT, TOP, nice_ceiling, shard_chart, trend_chart

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything not well-formed


def trend(
    seconds: Sequence[float | None],
    *,
    change_at: int | None = None,
    kind: str = "test",
    ident: str = "t.py::test_a",
    slower: bool = True,
) -> Trend:
    labels = [f"c{i}" for i in range(len(seconds))]
    return Trend(kind, ident, labels, list(seconds), change_at, "headline", slower)


@pytest.mark.parametrize(
    ("value", "top"),
    [
        (0.0, 1.0),
        (-3.0, 1.0),
        (0.7, 1.0),
        (1.0, 1.0),
        (1.1, 2.0),
        (2.2, 2.5),
        (3.0, 5.0),
        (7.5, 10.0),
        (0.00042, 0.0005),
        (1234.0, 2000.0),
    ],
)
def test_the_axis_top_is_a_round_number_at_least_the_value(value: float, top: float) -> None:
    assert nice_ceiling(value) == pytest.approx(top)
    assert nice_ceiling(value) >= value


def test_a_trend_chart_is_well_formed_svg_with_a_title_naming_the_test() -> None:
    root = parse(trend_chart(trend([0.2, 0.21, 0.2, 0.4, 0.41])))
    assert root.tag == f"{SVG}svg"
    title = root.find(f"{SVG}title")
    assert title is not None
    assert title.text == "test t.py::test_a: duration per run"


def test_the_suite_trend_has_its_own_title() -> None:
    root = parse(trend_chart(trend([10.0, 11.0], kind="session", ident="suite")))
    title = root.find(f"{SVG}title")
    assert title is not None
    assert title.text == "suite total: seconds per run"


def test_a_hostile_test_id_is_escaped_and_cannot_open_a_script() -> None:
    hostile = 't.py::test[</svg><script>alert(1)</script>"&]'
    svg = trend_chart(trend([0.1, 0.2], ident=hostile))
    assert "<script>" not in svg
    root = parse(svg)
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    title = root.find(f"{SVG}title")
    assert title is not None
    assert hostile in (title.text or "")


def test_the_largest_value_stays_inside_the_plot() -> None:
    svg = trend_chart(trend([1.0, 2.0, 9.0]))
    ys = [float(y) for y in re.findall(r'cy="([0-9.]+)"', svg)]
    assert ys
    assert min(ys) >= TOP - 0.01  # nothing above the plot's top
    assert max(ys) <= HEIGHT


def test_a_change_point_adds_a_dashed_line_and_a_legend_entry() -> None:
    with_change = trend_chart(trend([0.2] * 5 + [0.4] * 3, change_at=5))
    without = trend_chart(trend([0.2] * 8))
    assert "change point" in with_change
    assert "change point" not in without
    assert with_change.count("stroke-dasharray") > without.count("stroke-dasharray")


def test_a_faster_change_is_drawn_in_the_faster_colour() -> None:
    slower = trend_chart(trend([0.4] * 5 + [0.2] * 3, change_at=5, slower=True))
    faster = trend_chart(trend([0.4] * 5 + [0.2] * 3, change_at=5, slower=False))
    assert "#1e7b34" in faster
    assert "#1e7b34" not in slower


def test_runs_without_a_sample_break_the_line_but_every_sample_is_a_point() -> None:
    svg = trend_chart(trend([0.2, 0.2, None, 0.3, 0.3, 0.3]))
    parse(svg)
    assert len(re.findall(r"<circle", svg)) == 5


def test_a_trend_with_no_samples_still_draws() -> None:
    parse(trend_chart(trend([None, None])))


def shards(*seconds: float) -> list[Shard]:
    return [Shard(f"{i + 1}/{len(seconds)}", 10 * (i + 1), s) for i, s in enumerate(seconds)]


def test_no_shards_draw_nothing() -> None:
    assert shard_chart([]) == ""


def test_each_shard_is_a_bar_labelled_with_its_seconds_and_tests() -> None:
    svg = shard_chart(shards(10.0, 12.0, 8.0))
    root = parse(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "shard 1/3" in texts
    assert "12 s, 20 test(s)" in texts
    assert any("a perfect split, 10 s each" in t for t in texts)


def test_bars_are_as_long_as_their_share_of_the_axis() -> None:
    svg = shard_chart(shards(10.0, 20.0))
    widths = [float(w) for w in re.findall(r'<rect x="150" y="[0-9.]+" width="([0-9.]+)"', svg)]
    assert len(widths) == 2
    assert widths[1] == pytest.approx(2 * widths[0], rel=0.01)


def test_a_shard_name_is_escaped() -> None:
    svg = shard_chart([Shard("<b>1</b>", 1, 1.0)])
    assert "<b>" not in svg
    parse(svg)
