from __future__ import annotations

from pytest_accel.cli import main

raise SystemExit(main())
