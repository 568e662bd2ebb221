"""What this project's own test suite spends in subprocesses: a plugin that notes each
process a test starts (its command, how long until it was waited for) and a summary.

    SUBPROCESS_LOG=/tmp/sp PYTHONPATH=. python -m pytest -W error -n auto \\
        -p bench.suite_subprocesses -p no:cacheprovider
    python bench/suite_subprocesses.py /tmp/sp

Each test process (an xdist worker) appends to ``$SUBPROCESS_LOG.<pid>``: seconds, the
test (``PYTEST_CURRENT_TEST``), the command.  Processes that run at once overlap: their
seconds add up to more than the wall time they took.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_LOG = os.environ.get("SUBPROCESS_LOG")
_original_init = subprocess.Popen.__init__
_original_wait = subprocess.Popen.wait


def _init(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
    self._bench_started, self._bench_args = time.perf_counter(), args
    _original_init(self, args, *rest, **kwargs)


def _wait(self: Any, *rest: Any, **kwargs: Any) -> Any:
    status = _original_wait(self, *rest, **kwargs)
    started = getattr(self, "_bench_started", None)
    test = os.environ.get("PYTEST_CURRENT_TEST")
    if started is not None and test and _LOG:
        self._bench_started = None  # noted once
        args = self._bench_args
        command = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
        line = [f"{time.perf_counter() - started:.3f}", test.rsplit(" ", 1)[0], command]
        with open(f"{_LOG}.{os.getpid()}", "a", encoding="utf-8") as log:
            log.write("\t".join(part.replace("\t", " ").replace("\n", " ") for part in line))
            log.write("\n")
    return status


if _LOG:  # loaded as a plugin with somewhere to write
    subprocess.Popen.__init__ = _init  # type: ignore[method-assign]
    subprocess.Popen.wait = _wait  # type: ignore[method-assign]


def kind(command: str) -> str:
    words = command.split()
    if "-mpytest" in command.replace(" ", ""):
        return "pytest session"
    if "pytest_accel" in words:
        return "pytest-accel command"
    return Path(words[0]).name if words else "?"


def main(argv: list[str]) -> int:
    prefix = Path(argv[0])
    seconds: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    tests: dict[str, float] = collections.defaultdict(float)
    for log in prefix.parent.glob(prefix.name + ".*"):
        for line in log.read_text(encoding="utf-8").splitlines():
            field, test, command = line.split("\t", 2)
            seconds[kind(command)] += float(field)
            count[kind(command)] += 1
            tests[test] += float(field)
    total = sum(seconds.values())
    print(f"{sum(count.values())} subprocesses of {len(tests)} tests, {total:.1f} s")
    for name, taken in sorted(seconds.items(), key=lambda item: -item[1]):
        print(f"  {count[name]:5d} {name}: {taken:.1f} s")
    print("the tests that spend the most in them:")
    for test, taken in sorted(tests.items(), key=lambda item: -item[1])[:15]:
        print(f"  {taken:6.1f} s {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
