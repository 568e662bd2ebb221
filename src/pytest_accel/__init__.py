"""pytest-accel: accelerator-aware test selection, timing records and regression checks."""

from __future__ import annotations

__version__ = "0.1.0"

# `-p pytest_accel` imports this package on pytest versions that do not resolve the
# name through the entry point; this line makes both paths register the hooks once.
pytest_plugins = ["pytest_accel.plugin"]
