"""A real pytest config with the plugin loaded, for tests of how options are read."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def parsed(pytester: pytest.Pytester, *args: str, ini: str = "") -> pytest.Config:
    """``args`` parsed as pytest would, with ``ini`` as the whole ini file (each config
    gets its own, empty or not, so no earlier test's settings leak in)."""
    pytester.makeini(f"[pytest]\n{ini}\n")
    return pytester.parseconfig("-p", "pytest_accel", *args)


def usage_error(resolve: Callable[[pytest.Config], object], config: pytest.Config) -> str:
    """The message of the usage error ``resolve`` raises for ``config``: one line."""
    with pytest.raises(pytest.UsageError) as raised:
        resolve(config)
    message = str(raised.value)
    assert "\n" not in message
    return message
