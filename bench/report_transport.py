"""What a call report's measured figures add to its trip from an xdist worker to the
controller: the report as pytest-xdist sends it (``_report_to_json``, execnet's
serializer) and back, with and without ``pytest_accel_measures`` holding a CPU wait.

    python bench/report_transport.py
"""

from __future__ import annotations

import functools
import timeit

import pytest
from _pytest.reports import _report_kwargs_from_json, _report_to_json
from execnet.gateway_base import dumps_internal, loads_internal

ROUNDS = 20_000


def report(measured: bool) -> pytest.TestReport:
    made = pytest.TestReport(
        "t.py::test_a",
        ("t.py", 0, "test_a"),
        {"test_a": 1, "t.py": 1},
        "passed",
        None,
        "call",
        [],
        0.01,
        1.0,
        1.01,
    )
    if measured:
        made.pytest_accel_measures = {"cpu_wait": 0.001234}  # type: ignore[attr-defined]
    return made


def _send(sent: pytest.TestReport) -> bytes:
    return bytes(dumps_internal(_report_to_json(sent)))


def _receive(blob: bytes) -> pytest.TestReport:
    return pytest.TestReport(**_report_kwargs_from_json(loads_internal(blob)))


def main() -> None:
    for name, sent in (("plain", report(False)), ("with its CPU wait", report(True))):
        blob = dumps_internal(_report_to_json(sent))
        out = timeit.timeit(functools.partial(_send, sent), number=ROUNDS)
        back = timeit.timeit(functools.partial(_receive, blob), number=ROUNDS)
        print(
            f"{name}: sent {1e6 * out / ROUNDS:.2f} us, received {1e6 * back / ROUNDS:.2f} us,"
            f" {len(blob)} bytes"
        )


if __name__ == "__main__":
    main()
