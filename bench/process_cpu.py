"""Where a pytest run's CPU goes, process by process: the run's own processes (the
first pytest and its xdist workers) and the processes its tests started, by kind.

    rm -rf /tmp/pc && mkdir /tmp/pc
    PROCESS_CPU_LOG=/tmp/pc PYTHONPATH=$PWD/bench/process_cpu python -m pytest -W error -n auto \\
        -p no:cacheprovider
    python bench/process_cpu.py /tmp/pc

Each process logs itself at exit (``bench/process_cpu/sitecustomize.py``); a process
killed by a signal logs nothing.  ``PYTHONPATH`` reaches every child, as a user's does;
it must be absolute, as the tests run their children in directories of their own.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path


def kind(fields: list[str], own: bool) -> str:
    _, jax, torch, pytest, worker, _, _, _, _ = fields
    if worker == "worker":
        name = "xdist worker"
    else:
        name = "pytest session" if pytest == "pytest" else "other Python"
    name += " of the run" if own else " a test started"
    if jax == "jax":
        name += ", with JAX"
    return name + (", with torch" if torch == "torch" else "")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    logged = [
        fields
        for log in Path(argv[0]).iterdir()
        for line in log.read_text(encoding="utf-8").splitlines()
        if len(fields := line.split("\t")) == 9
    ]
    pids = {fields[6] for fields in logged}
    roots = {fields[6] for fields in logged if fields[7] not in pids}  # the first pytest
    cpu: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for fields in logged:
        name = kind(fields, own=fields[6] in roots or fields[7] in roots)
        cpu[name] += float(fields[0])
        count[name] += 1
    print(f"{sum(count.values())} processes, {sum(cpu.values()):.1f} CPU-s\n")
    print("| processes | how many | CPU-s |")
    print("| --- | ---: | ---: |")
    for name, seconds in sorted(cpu.items(), key=lambda item: -item[1]):
        print(f"| {name} | {count[name]} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
