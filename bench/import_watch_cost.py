"""What timing torch.compile's own imports costs: ``torch.compile()``'s first call, which
imports Inductor (about 600 modules), with and without the compile listener's watcher
of ``torch._dynamo``'s and ``torch._inductor``'s imports.  One fresh process a reading,
with PyTorch installed:

    for i in 1 2 3 4; do for v in plain timed; do python bench/import_watch_cost.py $v; done; done
"""

from __future__ import annotations

import importlib
import sys
import time

from pytest_accel.imports import imports_timed

# By name: PyTorch is not a dependency, and not installed where this is type-checked.
torch = importlib.import_module("torch")
importlib.import_module("torch._dynamo")  # imported before, as in a test that compiles
if sys.argv[1] == "timed":
    spans: list[tuple[float, float]] = []
    imports_timed(
        ("torch._dynamo", "torch._inductor"), lambda began, ended: spans.append((began, ended))
    )
began = time.perf_counter()
torch.compile(lambda x: x.sin() * 2, dynamic=False)
print(f"{sys.argv[1]} {time.perf_counter() - began:.3f}")
