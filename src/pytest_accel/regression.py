"""Where 0.1 defined ``PerfRegressionWarning``, kept so that warning filters written for
0.1 (``-W ignore::pytest_accel.regression.PerfRegressionWarning``, ``filterwarnings``)
keep working.  New filters name ``pytest_accel.PerfRegressionWarning``."""

from __future__ import annotations

from pytest_accel.perf.model.findings import PerfRegressionWarning

__all__ = ["PerfRegressionWarning"]
