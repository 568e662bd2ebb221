"""Shared fixtures for pytest-accel's own tests."""

from __future__ import annotations

# In-process pytester runs drop modules first imported during the run; numpy's C core
# cannot be imported a second time in one process, so import it before any such run.
import numpy  # noqa: F401

pytest_plugins = ["tests.fakesys"]
