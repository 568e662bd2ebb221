"""Each test traces afresh in a mapping run, and the programs it compiles with JAX,
fingerprinted.

Nothing here imports jax: the moment the suite has it (``imports.after_import``),
JAX's caches are cleared before each test, so that the test traces every function it
calls through ``jit`` (coverage.py sees the Python it runs: a function an earlier test
traced in the same process is this test's too, and a map never depends on the order or
the layout: serial, xdist and shards map alike) and compiles every program it uses.
With fingerprints on, JAX is also asked to write each module it lowers to a private
directory (``jax_dump_ir_to``: StableHLO text, one file a compilation); after the test,
the files it produced are read, fingerprinted and deleted.

A fingerprint is the module's text without its source locations (``loc(...)`` and the
``#loc`` lines): moving code, or calling it from elsewhere, leaves it alone; changing
what is computed, the shapes or the dtypes changes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import tempfile
from typing import Any

from pytest_accel.imports import AfterImport, after_import
from pytest_accel.selection.mapfile import Program

_LOC_LINE = re.compile(r"^#loc[0-9]* = .*$", re.M)
# loc(...) with one level of nested parentheses: loc("f"(#loc2)), loc(#loc3), loc(unknown)
_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_NAME = re.compile(r"^jax_ir[0-9]+_(.+?)(?:_compile)?\.mlir$")


def fingerprint(text: str) -> str:
    """A lowered module's text, its source locations left out, hashed."""
    bare = _LOC.sub("", _LOC_LINE.sub("", text))
    lines = [line.rstrip() for line in bare.splitlines() if line.strip()]
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=16).hexdigest()


class ProgramRecorder:
    """Where tests run: the programs each compiles, once the suite has jax."""

    def __init__(self, *, fingerprint: bool = True) -> None:
        self.fingerprint = fingerprint
        self.jax: Any = None
        self.directory: str | None = None
        self.previous: Any = None  # jax_dump_ir_to before ours, put back at the end
        self.watch: AfterImport | None = None
        self.problem: str | None = None  # why programs are not fingerprinted, if not
        self.platform = "cpu"

    def start(self) -> None:
        if "jax" in sys.modules:
            self._ready()
        else:
            self.watch = after_import("jax", self._ready)

    def _ready(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        try:
            import jax

            if not self.fingerprint:
                self.jax = jax
                return
            self.previous = jax.config.values.get("jax_dump_ir_to")
            self.directory = tempfile.mkdtemp(prefix="pytest-accel-programs-")
            jax.config.update("jax_dump_ir_to", self.directory)  # type: ignore[no-untyped-call]
            self.jax = jax
        except Exception as exc:  # a jax without IR dumps, a stub: say so once
            self.problem = f"programs not fingerprinted: {type(exc).__name__}: {exc}"
            self._remove()

    def before_test(self) -> None:
        """Every program the test uses is compiled in it, whatever ran before."""
        if self.jax is not None:
            with contextlib.suppress(Exception):
                self.jax.clear_caches()

    def after_test(self) -> set[Program]:
        """The programs compiled since ``before_test``, fingerprinted."""
        directory = self.directory
        if self.jax is None or directory is None:  # not fingerprinting
            return set()
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return set()
        if names:
            with contextlib.suppress(Exception):
                self.platform = str(self.jax.default_backend())
        found = set()
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
                os.unlink(path)
            except OSError:
                continue
            match = _NAME.match(name)
            label = match.group(1) if match else name
            found.add(Program(fingerprint(text), self.platform, label))
        return found

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.jax is not None and self.fingerprint:
            with contextlib.suppress(Exception):
                self.jax.config.update("jax_dump_ir_to", self.previous or "")
        self.jax = None
        self._remove()

    def _remove(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
