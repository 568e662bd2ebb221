"""One history wherever the tests ran: each run's record kept as a new, immutable
object in a store (a directory, ``file://``, ``s3://``, ``gs://``, ``az://``,
``memory://``) through fsspec, and the newest runs of the session's hardware key folded
into its baseline (``--accel-store``).  Pods, ``--rm`` containers and preempted VMs
keep their history there; ``pytest-accel store`` and ``report --from`` read it back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_accel.settings import (
    STORE_OPTION,
    OptionGroup,
    OptionSpec,
    parse_non_negative_float,
    text_setting,
)

if TYPE_CHECKING:
    import pytest

__all__ = [
    "OPTIONS",
    "progress_every",
    "pytest_accel_wants_timings",
    "register",
    "store_url",
]

OPTIONS = OptionGroup(
    "accel-store",
    "Store",
    "the run store (pytest-accel)",
    (
        STORE_OPTION,
        OptionSpec(
            "--accel-store-progress",
            "Send the tests finished so far to the store at most every SECONDS (default 5;"
            " 0: after each test): what a run killed with no session end leaves there.",
            metavar="SECONDS",
            default="5",
        ),
    ),
)


def store_url(config: pytest.Config) -> str | None:
    return text_setting(config, OPTIONS.specs[0])


def progress_every(config: pytest.Config) -> float:
    given = text_setting(config, OPTIONS.specs[1])
    return parse_non_negative_float("--accel-store-progress", given) if given else 5.0


def pytest_accel_wants_timings(config: pytest.Config) -> bool:
    """With --accel-store, the run's record goes to the store."""
    return bool(store_url(config))


def register(config: pytest.Config) -> None:
    """With --accel-store: fold the store's runs now, send this run's at the end."""
    url = store_url(config)
    if url and not config.option.collectonly:
        from pytest_accel.store.plugin import register_feature

        register_feature(config, url, progress_every(config))
