"""What selection did, as a CI user sees it: the terminal's lines (each with its tone),
the job summary's section.  From the decision as the record keeps it (plain values:
the session's own, a worker's, or a record's), so every output says the same."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_accel.github import Section, escape_cell
from pytest_accel.text import Line, Tone

SHOWN = 10  # tests named per list at the default verbosity


@dataclass(frozen=True)
class RunCounts:
    """What the session did with the decision: kept tests the markers then skipped
    here, and pytest's own deselected count (-k, -m and other options' too)."""

    skipped: int = 0
    deselected: int | None = None  # None: a record's, not a session's


def headline(
    found: Mapping[str, Any], saved: Mapping[str, Any], counts: RunCounts = RunCounts()
) -> str:
    """``selection (changed): 12 of 300 test(s) run; 288 deselected (unchanged since the
    map of abc1234 (main), 2.1 days old); 540 device-seconds ($0.12) not spent``."""
    kept, left, cut = len(found["kept"]), len(found["deselected"]), len(found["cut"])
    total = kept + left + cut
    mode = found["mode"]
    verb = "would run" if mode == "shadow" else "run"
    ran = kept - counts.skipped if mode != "shadow" else kept
    line = f"selection ({mode}): {ran} of {total} test(s) {verb}"
    if counts.skipped and mode != "shadow":
        line += f"; {counts.skipped} skipped here"
    if left:
        line += f"; {left} {'would be ' if mode == 'shadow' else ''}deselected"
        others = (counts.deselected or 0) - left - cut
        if others > 0 and mode != "shadow":
            line += f" ({left + others} in all with -k, -m and other options)"
    if cut:
        line += f"; {cut} cut by the budget (the nightly bucket)"
    info = found.get("map")
    if info:
        where = (info.get("commit") or "")[:12] or "an unknown commit"  # null: made outside git
        branch = f" ({info['branch']})" if info.get("branch") else ""
        line += f"; map of {where}{branch}{_age(info.get('age_days'))}"
    if saved.get("tests_with_durations"):  # a figure only where durations are known
        usd = saved.get("usd")
        money = f" (${usd:.3g})" if isinstance(usd, int | float) else ""
        line += f"; {saved['device_seconds']:,.3g} device-seconds{money} not spent"
    return line


def notes_of(found: Mapping[str, Any]) -> list[str]:
    """What the run's selection did without (``Decision.notes``); a record written
    before there were notes has none."""
    notes = found.get("notes")
    return [str(note) for note in notes] if isinstance(notes, list) else []


def _age(days: object) -> str:
    """The map's age when the run decided (the section keeps it)."""
    if not isinstance(days, int | float):
        return ""
    return f", {days:.1f} days old" if days >= 0.05 else ", made just now"


def terminal_lines(
    found: Mapping[str, Any],
    saved: Mapping[str, Any],
    missed: Mapping[str, str],
    counts: RunCounts = RunCounts(),
) -> list[Line]:
    """The headline, each valve that fired, what selection did without, what shadow
    mode missed, the budget's cut, and at ``-v`` every test's reason."""
    lines = [Line(Tone.OK, headline(found, saved, counts))]
    for valve in found["valves"]:
        lines.append(
            Line(Tone.CHANGE, f"selection kept every test: {valve['name']}: {valve['detail']}")
        )
    lines += [Line(Tone.CHANGE, f"selection: {note}") for note in notes_of(found)]
    if missed:
        named = ", ".join(sorted(missed)[:SHOWN])
        lines.append(
            Line(
                Tone.ALARM,
                f"shadow: {len(missed)} failing test(s) would have been deselected: {named}",
            )
        )
    if found["cut"]:
        cut = sorted(found["cut"])
        more = f" and {len(cut) - SHOWN} more" if len(cut) > SHOWN else ""
        lines.append(
            Line(Tone.CHANGE, f"cut for the nightly bucket: {', '.join(cut[:SHOWN])}{more}")
        )
    for verb in ("kept", "deselected"):
        lines += [Line(Tone.DETAIL, f"{verb} {t}: {why}") for t, why in sorted(found[verb].items())]
    return lines


def summary_section(
    found: Mapping[str, Any],
    saved: Mapping[str, Any],
    missed: Mapping[str, str],
    counts: RunCounts = RunCounts(),
) -> Section:
    head = ["### pytest-accel selection", "", escape_cell(headline(found, saved, counts)), ""]
    head += [
        escape_cell(f"kept every test: {v['name']}: {v['detail']}") + "  " for v in found["valves"]
    ]
    head += [escape_cell(note) + "  " for note in notes_of(found)]
    rows = [f"| missed (shadow) | {escape_cell(t)} | {escape_cell(w)} |" for t, w in missed.items()]
    rows += [f"| cut | {escape_cell(t)} | {escape_cell(w)} |" for t, w in found["cut"].items()]
    rows += [f"| kept | {escape_cell(t)} | {escape_cell(w)} |" for t, w in found["kept"].items()]
    if not rows:
        return Section(head)
    head += ["| | test | why |", "| --- | --- | --- |"]
    return Section(head, rows)
