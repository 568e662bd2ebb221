"""Change-aware selection: a mapping run records what each test ran and compiled
(``--accel-map``); a later run deselects the tests a change cannot affect
(``--accel-select``), keeps everything when a change cannot be attributed (the valves),
and says what it saved."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.selection.options import ALWAYS_MARKER, OPTIONS, file_uses, resolve

if TYPE_CHECKING:
    import pytest

__all__ = ["OPTIONS", "file_uses", "register"]


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
