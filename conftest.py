"""Shared fixtures for pytest-accel's own tests."""

from __future__ import annotations

pytest_plugins = ["tests.fakesys"]
