from __future__ import annotations

from pytest_accel.cli import console_main

console_main()
