"""User data inside the lines we print: test ids, file names, hardware keys, messages.

A CI log reads every line that starts with ``::`` as a workflow command, so no value
may break a line: control characters (line breaks above all) are shown escaped, as
Python writes them.  Values quoted in messages are cut short.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

# C0 and C1 controls (tab and line breaks included) and Unicode's line separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PLAIN = re.compile(r"[A-Za-z0-9_.,:/=+-]{1,60}")


def one_line(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``, ...)."""
    if text.isprintable():
        return text
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def line_start(text: str) -> str:
    """``text`` made safe to begin a line: one line, and never starting with ``::``."""
    text = one_line(text)
    return f"./{text}" if text.startswith("::") else text


def shown(value: str, most: int = 40) -> str:
    """A value quoted for a message, cut short: a 5000-digit value is not repeated."""
    return repr(value if len(value) <= most else value[:most] + "...")


def capped(text: str, most: int = 1000) -> str:
    """``text`` cut in the middle when longer than ``most`` characters: an error line
    names a 100 KB value by its start and end, not in full."""
    if len(text) <= most:
        return text
    half = most // 2
    return f"{text[:half]}...({len(text) - 2 * half} characters cut)...{text[-half:]}"


def plain(value: str) -> str:
    """A setting's value as it is when plain, else quoted (escapes and all) and cut
    short, so that no value can break a line or run on for pages."""
    return value if _PLAIN.fullmatch(value) else shown(value, 60)


def problem(exc: BaseException, context: str = "") -> str:
    """An exception as one line: the file and the OS's words, or our own message.  The
    file is left out where ``context``, the rest of the line, names it already."""
    if isinstance(exc, OSError):
        named = exc.filename and str(exc.filename) not in context
        where = f"{exc.filename}: " if named else ""
        return f"{where}{exc.strerror or exc}"
    if isinstance(exc, ValueError | LookupError | TypeError):
        return f"{type(exc).__name__}: {exc}"  # a bug of ours: say so, in one line
    return str(exc) or type(exc).__name__


def size(count: float) -> str:
    """Bytes as people read a device's memory: ``512 B``, ``12.0 MiB``, ``2.50 GiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(count) >= scale:
            shown = count / scale
            if shown == int(shown):
                return f"{int(shown)} {unit}"
            return f"{shown:.2f} {unit}" if abs(shown) < 10 else f"{shown:.1f} {unit}"
    return f"{int(count)} B"


class Tone(enum.Enum):
    """What a line of output says, which decides its colour and at which verbosity it is
    shown (``reports.write_section``), as pytest decides a status's colour from its
    category (``_color_for_type``), never from the words of the line."""

    ALARM = "alarm"  # what fails a gate, or would with its option: a regression, over a limit
    CHANGE = "change"  # worth a look, no alarm: a flaky test, a finding still learning
    OK = "ok"  # a verdict that holds: nothing regressed, within a limit, an improvement
    NOTE = "note"  # how it was judged: shown at the default verbosity
    # What became of a file the user named (a record or map written, a baseline or
    # history not there yet): shown from -q on, as pytest keeps its warnings there.
    FILE = "file"
    DETAIL = "detail"  # one item's why (a test's reason): shown from -v on


@dataclass(frozen=True)
class Line:
    """One line of a feature's output and its tone; the text is made one line."""

    tone: Tone
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", one_line(self.text))


def texts(lines: list[Line]) -> list[str]:
    """The lines' words alone (the command line tool prints no colour)."""
    return [line.text for line in lines]
