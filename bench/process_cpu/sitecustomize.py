"""Loaded by every Python process of a run whose ``PYTHONPATH`` starts with this
directory (``site`` imports ``sitecustomize``): at exit, where ``PROCESS_CPU_LOG``
names a directory, the process writes one line to a file of its own there: its CPU
(user + system), whether it imported JAX or torch, whether it ran pytest or was an
xdist worker, the test that started it (``PYTEST_CURRENT_TEST`` as it inherited it),
its process and parent ids, and its command.  ``python bench/process_cpu.py DIR`` sums them up."""

from __future__ import annotations

import atexit
import os
import sys

_LOG = os.environ.get("PROCESS_CPU_LOG")
_TEST = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def _write() -> None:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    modules = sys.modules
    fields = [
        f"{usage.ru_utime + usage.ru_stime:.3f}",
        "jax" if "jax" in modules else "-",
        "torch" if "torch" in modules else "-",
        "pytest" if "_pytest.main" in modules else "-",
        # execnet starts a worker as ``python -c``; xdist names it in the environment.
        "worker" if sys.argv == ["-c"] and os.environ.get("PYTEST_XDIST_WORKER") else "-",
        _TEST,
        str(os.getpid()),
        str(os.getppid()),
        " ".join(sys.argv)[:200],
    ]
    line = "\t".join(field.replace("\t", " ").replace("\n", " ") for field in fields)
    with open(os.path.join(str(_LOG), str(os.getpid())), "a", encoding="utf-8") as log:
        log.write(line + "\n")


if _LOG:
    atexit.register(_write)
