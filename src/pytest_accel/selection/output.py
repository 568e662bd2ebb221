"""What selection did, as a CI user sees it: the terminal's lines (each with its tone),
the job summary's section.  From one ``SelectionSection`` (the session's own, a
worker's, or a record's), so every output says the same."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_accel.github import Section, escape_cell
from pytest_accel.selection.section import Saved, SelectionSection
from pytest_accel.text import Line, Tone

SHOWN = 10  # tests named per list at the default verbosity


@dataclass(frozen=True)
class RunCounts:
    """What the session did with the decision: kept tests the markers then skipped
    here, and pytest's own deselected count (-k, -m and other options' too)."""

    skipped: int = 0
    deselected: int | None = None  # None: a record's, not a session's


def headline(found: SelectionSection, saved: Saved, counts: RunCounts = RunCounts()) -> str:
    """``selection (changed): 12 of 300 test(s) run; 288 deselected (unchanged since the
    map of abc1234 (main), 2.1 days old); 540 device-seconds ($0.12) not spent``."""
    kept, left, cut = len(found.kept), len(found.deselected), len(found.cut)
    total = kept + left + cut
    mode = found.mode
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
    info = found.map
    if info is not None:
        where = (info.commit or "")[:12] or "an unknown commit"  # None: made outside git
        branch = f" ({info.branch})" if info.branch else ""
        line += f"; map of {where}{branch}{_age(info.age_days)}"
    if saved.tests_with_durations:  # a figure only where durations are known
        money = f" (${saved.usd:.3g})" if saved.usd is not None else ""
        line += f"; {saved.device_seconds:,.3g} device-seconds{money} not spent"
    return line


def _age(days: float | None) -> str:
    """The map's age when the run decided (the section keeps it)."""
    if days is None:
        return ""
    return f", {days:.1f} days old" if days >= 0.05 else ", made just now"


def terminal_lines(
    found: SelectionSection,
    saved: Saved,
    missed: Mapping[str, str],
    counts: RunCounts = RunCounts(),
) -> list[Line]:
    """The headline, each valve that fired, what selection did without, what shadow
    mode missed, the budget's cut, and at ``-v`` every test's reason."""
    lines = [Line(Tone.OK, headline(found, saved, counts))]
    for name, detail in found.valves:
        lines.append(Line(Tone.CHANGE, f"selection kept every test: {name}: {detail}"))
    lines += [Line(Tone.CHANGE, f"selection: {note}") for note in found.notes]
    if missed:
        named = ", ".join(sorted(missed)[:SHOWN])
        lines.append(
            Line(
                Tone.ALARM,
                f"shadow: {len(missed)} failing test(s) would have been deselected: {named}",
            )
        )
    if found.cut:
        cut = sorted(found.cut)
        more = f" and {len(cut) - SHOWN} more" if len(cut) > SHOWN else ""
        lines.append(
            Line(Tone.CHANGE, f"cut for the nightly bucket: {', '.join(cut[:SHOWN])}{more}")
        )
    for verb, reasons in (("kept", found.kept), ("deselected", found.deselected)):
        lines += [Line(Tone.DETAIL, f"{verb} {t}: {why}") for t, why in sorted(reasons.items())]
    return lines


def summary_section(
    found: SelectionSection,
    saved: Saved,
    missed: Mapping[str, str],
    counts: RunCounts = RunCounts(),
) -> Section:
    head = ["### pytest-accel selection", "", escape_cell(headline(found, saved, counts)), ""]
    head += [escape_cell(f"kept every test: {n}: {detail}") + "  " for n, detail in found.valves]
    head += [escape_cell(note) + "  " for note in found.notes]
    rows = [f"| missed (shadow) | {escape_cell(t)} | {escape_cell(w)} |" for t, w in missed.items()]
    rows += [f"| cut | {escape_cell(t)} | {escape_cell(w)} |" for t, w in found.cut.items()]
    rows += [f"| kept | {escape_cell(t)} | {escape_cell(w)} |" for t, w in found.kept.items()]
    if not rows:
        return Section(head)
    head += ["| | test | why |", "| --- | --- | --- |"]
    return Section(head, rows)
