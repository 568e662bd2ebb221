"""Change-aware selection: a mapping run records what each test ran and compiled
(``--accel-map``); a later run deselects the tests a change cannot affect
(``--accel-select``), keeps everything when a change cannot be attributed (the valves),
and says what it saved."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_accel.selection.options import ALWAYS_MARKER, OPTIONS, file_uses, option, resolve

if TYPE_CHECKING:
    import pytest

__all__ = [
    "OPTIONS",
    "file_uses",
    "pytest_accel_changed_code",
    "pytest_accel_map_to_fetch",
    "register",
    "start_early",
]


def start_early(early_config: pytest.Config) -> None:
    """A mapping run measures from before the initial conftests load."""
    from pytest_accel.settings import early_setting

    if early_setting(early_config, option("--accel-map")):
        from pytest_accel.selection.mapping import start_early as start

        start(early_config)


def pytest_accel_map_to_fetch(config: pytest.Config) -> str | None:
    """A selecting run's map, where no file is there yet (a store may hold one)."""
    from pytest_accel.files import resolved

    options = resolve(config)
    if options.selecting and options.map is not None and not resolved(options.map).exists():
        return options.map
    return None


def pytest_accel_changed_code(
    config: pytest.Config, since: str, until: str | None, tests: Sequence[str]
) -> dict[str, tuple[str, ...]] | None:
    """The changed code each test runs, by the run's map (``selection.suspects``)."""
    options = resolve(config)
    if options.map is None:
        return None
    from pathlib import Path

    from pytest_accel.selection.suspects import changed_code

    return changed_code(Path(str(config.rootpath)), options.map, since, until, tests)


def register(config: pytest.Config) -> None:
    # Whatever the options: a suite marks its tests once, and runs with --strict-markers.
    config.addinivalue_line(
        "markers",
        f"{ALWAYS_MARKER}: change-aware selection (--accel-select) always runs this test.",
    )
    options = resolve(config)
    if options.mapping and not config.option.collectonly:  # nothing runs: nothing to map
        from pytest_accel.selection.mapping import register_mapping

        register_mapping(config, options)
    elif options.selecting:
        from pytest_accel.selection.plugin import register_selection

        register_selection(config, options)
