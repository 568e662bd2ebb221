"""GitHub Actions: escaping, workflow-command annotations and the job summary.

Test ids are user data: a parametrize id can hold ``::warning::``, ``%0A``, newlines or
``|``.  Everything that reaches a workflow command is escaped as GitHub's toolkit does,
and everything in Markdown is escaped for a table cell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

MAX_ANNOTATIONS = 10
MAX_SUMMARY_BYTES = 900 * 1024


class Location(NamedTuple):
    path: str
    line: int | None


def in_github_actions(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


_MARKDOWN_PUNCTUATION = "\\`*_[]|#~!"


def escape_cell(text: str) -> str:
    """A Markdown table cell: no line breaks, no column breaks, no markup, no HTML."""
    text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(f"\\{c}" if c in _MARKDOWN_PUNCTUATION else c for c in text)


def annotation(level: str, message: str, where: Location | None, title: str) -> str:
    """A ``::warning``/``::error`` workflow command, every part escaped."""
    props = []
    if where is not None:
        props.append(f"file={escape_property(where.path)}")
        if where.line is not None:
            props.append(f"line={where.line}")
    props.append(f"title={escape_property(title)}")
    return f"::{level} {','.join(props)}::{escape_data(message)}"


@dataclass
class Section:
    """One part of the job summary: its head is always written, its rows as far as the
    budget allows, then a note of how many were left out."""

    head: list[str]
    rows: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def render(self, allowance: int | None = None) -> str:
        lines = list(self.head)
        if allowance is None:
            lines += self.rows
        else:
            used = 0
            for index, row in enumerate(self.rows):
                used += len(row.encode()) + 1
                if used > allowance:
                    omitted = len(self.rows) - index
                    lines += [
                        "",
                        f"*{omitted} more row(s) left out to keep the job summary"
                        " under GitHub's size limit.*",
                    ]
                    break
                lines.append(row)
        return "\n".join([*lines, *self.tail]) + "\n\n"


def fit(sections: list[Section], budget: int) -> str:
    """The sections as Markdown within ``budget`` bytes: heads and tails first, then the
    rows shared out fairly (a section that needs less leaves the rest to the others).  A
    section whose head and tail no longer fit is left out whole, and so are the ones
    after it: nothing goes over the budget."""
    note = 120  # the "rows left out" line
    fixed = 0
    for count, section in enumerate(sections):
        size = len(Section(section.head, [], section.tail).render().encode()) + note
        if fixed + size > budget:
            sections = sections[:count]
            break
        fixed += size
    left = max(0, budget - fixed)
    needs = [sum(len(row.encode()) + 1 for row in s.rows) for s in sections]
    allowance = [0] * len(sections)
    for position, index in enumerate(sorted(range(len(sections)), key=needs.__getitem__)):
        share = left // (len(sections) - position)
        allowance[index] = min(needs[index], share)
        left -= allowance[index]
    return "".join(
        s.render(None if allowance[i] >= needs[i] else allowance[i]) for i, s in enumerate(sections)
    )


class JobSummary:
    """Every section the plugin appends to ``$GITHUB_STEP_SUMMARY`` in one run, written
    once at the end under one budget (what the step already wrote counts too)."""

    def __init__(self, path: str | None, budget: int = MAX_SUMMARY_BYTES) -> None:
        self.path = path  # None: only kept, for a runner elsewhere (the run store)
        self.budget = budget
        self.sections: list[Section] = []

    def add(self, section: Section) -> None:
        self.sections.append(section)

    def rendered(self) -> str:
        """The sections as a summary file with nothing in it yet would get them."""
        return fit(self.sections, self.budget)

    def write(self) -> str | None:
        """Append the sections within what is left of the budget; why nothing was
        written, where that is so (the file is over the budget already: GitHub rejects a
        summary over its limit, so nothing more is written to it)."""
        if not self.sections or self.path is None:
            return None
        return append_summary(self.path, fit(self.sections, self.budget - _size(self.path)))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def append_summary(path: str, text: str, budget: int = MAX_SUMMARY_BYTES) -> str | None:
    """Append ``text`` (fitted already) to the summary file ``path``; why not, where it
    is empty or does not fit what the file leaves of the budget."""
    existing = _size(path)
    if not text or existing + len(text.encode()) > budget:
        return (
            f"no job summary written: {path} holds {existing} bytes already, and"
            f" the plugin keeps the job summary under {budget} bytes"
            " (GitHub's limit is 1 MiB)"
        )
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
    return None


def _mermaid_text(text: str) -> str:
    """Text Mermaid shows inside double quotes: letters, digits and a few signs only, so
    nothing can end the string, the block, or the chart."""
    return "".join(c if c.isalnum() or c in " ._:/-()," else "_" for c in text)[:80]


def mermaid_line_chart(
    title: str, labels: Sequence[str], values: Sequence[float], unit: str
) -> list[str]:
    """A fenced ``mermaid`` block that GitHub draws: a line of ``values`` over ``labels``."""
    top = max(values) * 1.1 if values else 1.0
    axis = ", ".join(f'"{_mermaid_text(label)}"' for label in labels)
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "{_mermaid_text(title)}"',
        f"    x-axis [{axis}]",
        f'    y-axis "{_mermaid_text(unit)}" 0 --> {top:.3g}',
        f"    line [{', '.join(f'{v:.3f}' for v in values)}]",
        "```",
    ]
