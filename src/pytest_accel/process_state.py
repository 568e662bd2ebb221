"""The process as the session found it: environment variables a feature sets for the
test processes (JAX's CPU devices, an xdist worker's devices), and SIGTERM, which ends
a run as Ctrl-C does.  Both are put back by the config's cleanup, so in-process runs
(``pytester``, ``pytest.main``) start clean: pytest runs it for every config it made,
also one it parsed and never configured (``pytest --version --version``, a
conftest that fails to import, pytester's ``parseconfig``), where no
``pytest_unconfigure`` is called."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping
from typing import Any

import pytest

_saved_env_key = pytest.StashKey[dict[str, str | None]]()


def set_env(early_config: pytest.Config, values: Mapping[str, str]) -> None:
    """Set variables for this process and its children, until the config's cleanup."""
    if _saved_env_key not in early_config.stash:
        early_config.stash[_saved_env_key] = {}
        early_config.add_cleanup(lambda: _restore_env(early_config))
    saved = early_config.stash[_saved_env_key]
    for name, value in values.items():
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value


def _restore_env(config: pytest.Config) -> None:
    for name, value in config.stash[_saved_env_key].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    del config.stash[_saved_env_key]


_saved_sigterm_key = pytest.StashKey[Any]()


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (a CI runner cancelling the job) ends the run as Ctrl-C does: what ran is
    recorded, nothing is added to the baseline or the history.  Only where nobody else
    handles SIGTERM, and only in the main thread (where Python runs signal handlers)."""
    if _saved_sigterm_key in config.stash:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = config.stash[_saved_sigterm_key] = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    config.add_cleanup(restore)
