"""Change-aware selection's options: the dependency map, the mode, what a change is
diffed against, the map's age limit and the budget."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.file_uses import FileUse
from pytest_accel.files import InputError, resolved
from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    number_value,
    parse_choice,
    spec_in,
    text_setting,
    usage_error,
)
from pytest_accel.text import shown

if TYPE_CHECKING:
    import pytest

    from pytest_accel.selection.decide import SelectionBudget

ALWAYS_MARKER = "accel_always"  # a test selection always runs
DEFAULT_MAX_AGE = 14.0  # days: a map older than this keeps every test (a valve)
PROGRAM_MODES = ("auto", "off")
# Selection's modes; its logic (``decide``, ``changes``: git, hashing) is imported when a
# run selects, not with the options every pytest run parses.
MODES = ("off", "changed", "programs", "shadow")

OPTIONS = OptionGroup(
    "accel-select",
    "Change-aware selection",
    "change-aware selection (pytest-accel)",
    (
        OptionSpec(
            "--accel-map",
            "The dependency map (SQLite). Without --accel-select: a mapping run, which"
            " records the code each test ran (coverage.py) and, with JAX, the programs it"
            " compiled, into PATH (created on first use, updated under a lock). With"
            " --accel-select: the map selection reads.",
            metavar="PATH",
        ),
        OptionSpec(
            "--accel-select",
            "off (default); changed: deselect the tests whose code is unchanged since the"
            " map; programs: run the tests whose compiled programs changed (with"
            " --accel-map-head); shadow: run every test and report what changed would have"
            " left out.",
            metavar="MODE",
            default="off",
        ),
        OptionSpec(
            "--accel-changed-since",
            "Also count as changed what differs from git REF (a pull request's base; in"
            " CI, origin/main): the work tree is compared with the map's commit and with REF.",
            metavar="REF",
        ),
        OptionSpec(
            "--accel-map-head",
            "With --accel-select=programs: the map the CPU tier's mapping run made of this"
            " commit, whose compiled programs are compared with --accel-map's.",
            metavar="PATH",
        ),
        OptionSpec(
            "--accel-map-max-age",
            f"Keep every test when the map is older than DAYS (default {DEFAULT_MAX_AGE:g});"
            " 0 keeps every test whatever its age.",
            metavar="DAYS",
            default=f"{DEFAULT_MAX_AGE:g}",
        ),
        OptionSpec(
            "--accel-map-programs",
            "In a mapping run: auto (default) fingerprints the programs each test compiles"
            " where the suite uses JAX; off does not. Either way JAX's caches are cleared"
            " before each test, so each traces (and compiles) what it uses afresh.",
            metavar="MODE",
            default="auto",
        ),
        OptionSpec(
            "--accel-select-ignore",
            "A glob (repeatable; ini: one a line) of files no test reads, whose change"
            " fires no valve, added to the documentation, images and licences already"
            " ignored (docs/selection.md).",
            metavar="GLOB",
            repeatable=True,
        ),
        OptionSpec(
            "--accel-select-budget",
            "Run at most this much of the selected tests, the most valuable first, and list"
            " the rest for the nightly bucket: USD (2.50, with --accel-price) or seconds"
            " (600s).",
            metavar="AMOUNT",
        ),
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class SelectionOptions:
    map: str | None
    mode: str  # MODES
    since: str | None
    head: str | None
    max_age: float
    programs: str  # PROGRAM_MODES
    budget: SelectionBudget | None
    ignore: tuple[str, ...] = ()  # globs of files whose change is none

    @property
    def mapping(self) -> bool:
        """A mapping run: the map is written, nothing is selected."""
        return self.map is not None and self.mode == "off"

    @property
    def selecting(self) -> bool:
        return self.mode != "off"


_SECONDS = re.compile(r"\s*([0-9.eE+-]+)\s*(s|sec|secs|seconds)\s*", re.I)
_USD = re.compile(r"\s*\$?\s*([0-9.eE+-]+)\s*(usd)?\s*", re.I)


def parse_budget(flag: str, text: str) -> SelectionBudget:
    """``600s`` (seconds of the selected tests) or ``2.50``, ``$2.50``, ``2.50usd``."""
    from pytest_accel.selection.decide import SelectionBudget

    for pattern, unit in ((_SECONDS, "seconds"), (_USD, "usd")):
        found = pattern.fullmatch(text)
        if found:
            value = number_value(found.group(1))
            if value is not None and value > 0:
                return SelectionBudget(value, unit)
    raise usage_error(
        f"{flag}: {shown(text)} is not an amount: give USD (2.50, $2.50) or seconds (600s)"
    )


def resolve(config: pytest.Config) -> SelectionOptions:
    """The options, validated: a bad value stops the run before any test (exit 4)."""

    def get(flag: str) -> str | None:
        return text_setting(config, option(flag))

    mode = parse_choice("--accel-select", get("--accel-select"), MODES, "off")
    path, head = get("--accel-map"), get("--accel-map-head")
    if mode != "off" and not path:
        raise usage_error(f"--accel-select={mode} needs --accel-map PATH: the map it reads")
    if mode == "programs" and not head:
        raise usage_error(
            "--accel-select=programs needs --accel-map-head PATH: the map the CPU tier made"
            " of this commit, whose programs it compares with --accel-map's"
        )
    age = get("--accel-map-max-age")
    budget = get("--accel-select-budget")
    return SelectionOptions(
        map=path,
        mode=mode,
        since=get("--accel-changed-since"),
        head=head,
        max_age=_days("--accel-map-max-age", age) if age else DEFAULT_MAX_AGE,
        programs=parse_choice(
            "--accel-map-programs", get("--accel-map-programs"), PROGRAM_MODES, "auto"
        ),
        budget=parse_budget("--accel-select-budget", budget) if budget else None,
        ignore=_globs(config),
    )


def _days(flag: str, text: str) -> float:
    """A number of days, 0 included (0: every map is too old)."""
    value = number_value(text)
    if value is None or value < 0:
        raise usage_error(f"{flag}: {shown(text)} is not a number of days (0 or more)")
    return value


def _globs(config: pytest.Config) -> tuple[str, ...]:
    spec = option("--accel-select-ignore")
    given = getattr(config.option, spec.dest, None)
    found = given if given else config.getini(spec.dest)
    return tuple(str(g).strip() for g in found or () if str(g).strip())


def file_uses(config: pytest.Config) -> tuple[FileUse, ...]:
    """The map is read (selection) or read and rewritten (a mapping run)."""
    path = text_setting(config, option("--accel-map"))
    head = text_setting(config, option("--accel-map-head"))
    mode = (text_setting(config, option("--accel-select")) or "off").strip().lower()
    uses = []
    if path:
        uses.append(FileUse("--accel-map", path, reads=True, writes=mode == "off"))
    if head:
        uses.append(FileUse("--accel-map-head", head, reads=True))
    return tuple(uses)


def check_maps(options: SelectionOptions) -> None:
    """Before any worker starts: a map that is there must be one this release reads
    (one line, exit 4); a missing ``--accel-map`` is a cold cache, a missing
    ``--accel-map-head`` a mistake."""
    from contextlib import closing

    from pytest_accel.selection.mapfile import open_map, read_info

    assert options.map is not None
    paths = [("--accel-map", options.map, False), ("--accel-map-head", options.head, True)]
    for flag, path, required in paths:
        if path is None or (not required and not resolved(path).exists()):
            continue
        try:
            with closing(open_map(path)) as connection:
                read_info(connection, path)
        except InputError as exc:
            raise usage_error(f"{flag}: {exc}") from None
