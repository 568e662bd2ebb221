"""Many real processes at once, for the price of one interpreter's start.

A test of concurrent writers needs whole processes (each with its own pid, locks and
session end), not threads; starting each as ``python -m pytest`` costs 0.4-0.5
CPU-seconds in imports before it does anything, most of what such a test spends.  Here
one fresh interpreter imports pytest, its plugins and this one once, then forks a child
per run: each child is a whole pytest session (``pytest.main``, 0.15 CPU-seconds for
twenty tests) or command (``cli.main``) of its own, with its own working directory,
environment and stderr, as a user's would be.  What the children share from before the
fork is what the suite's thousand in-process pytester sessions share in one process.

Tests that judge what a run imports start fresh interpreters instead
(tests/test_loading.py, tests/test_cli_imports.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Before the fork: one session that collects an empty directory imports pytest's
# plugins and every installed one as a run does (those marked for assertion rewriting
# through its hook, so a child's session finds them rewritten, as its own would have),
# then what a session's end and the commands import later.
_RUNNER = """
import contextlib, io, json, os, sys, tempfile, traceback
spec = json.loads(sys.argv[1])
import pytest
with tempfile.TemporaryDirectory() as empty, contextlib.redirect_stdout(io.StringIO()):
    ini = os.path.join(empty, "pytest.ini")
    open(ini, "w").close()
    pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", "-c", ini, empty])
import numpy, pytest_accel.cli
def status(pid):
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
children = []
for run in spec["runs"]:
    pid = os.fork()
    if pid:
        children.append(status(pid) if spec["one_after_another"] else pid)
        continue
    code = 70
    try:
        err = os.open(run["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(err, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.chdir(run["cwd"])
        os.environ.update(run["env"])
        if run["kind"] == "pytest":
            code = int(pytest.main(run["args"]))
        else:
            code = pytest_accel.cli.main(run["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
codes = children if spec["one_after_another"] else [status(pid) for pid in children]
print(json.dumps(codes))
"""


@dataclass(frozen=True)
class Run:
    """One child: ``pytest`` with ``args`` or the ``pytest-accel`` command."""

    kind: str  # "pytest" or "cli"
    args: Sequence[str]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Finished:
    code: int
    stderr: str


def run_forked(
    runs: Sequence[Run],
    scratch: Path,
    timeout: float = 300,
    *,
    one_after_another: bool = False,
    environ: Mapping[str, str] | None = None,
) -> list[Finished]:
    """Every run in a child process of its own, all started together (or each once the
    one before it ended); their exit statuses and stderr, in order.  The children start
    from ``environ`` (this process's environment by default) and their own ``env``."""
    scratch.mkdir(parents=True, exist_ok=True)
    spec = {
        "one_after_another": one_after_another,
        "runs": [
            {
                "kind": run.kind,
                "args": list(run.args),
                "cwd": str(run.cwd),
                "env": dict(run.env),
                "stderr": str(scratch / f"stderr-{index}.txt"),
            }
            for index, run in enumerate(runs)
        ],
    }
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if environ is None else dict(environ),
    )
    assert done.returncode == 0, done.stderr
    codes = json.loads(done.stdout.splitlines()[-1])
    return [
        Finished(code, (scratch / f"stderr-{index}.txt").read_text(errors="replace"))
        for index, code in enumerate(codes)
    ]
