"""pytest-accel: accelerator-aware test selection, timing records and regression checks.

The public names for plugins and ``conftest.py`` files: ``Detection`` and
``DetectionContext`` (the ``pytest_accel_detect`` hook), and the warning classes for
``-W`` and ``filterwarnings`` (``PerfRegressionWarning``, ``FlakyQuarantineWarning``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"  # the one place: the wheel and the CLI read it

# `-p pytest_accel` imports this package on pytest versions that do not resolve the
# name through the entry point; this line makes both paths register the hooks once.
pytest_plugins = ["pytest_accel.plugin"]


def _imported_without_rewriting() -> None:
    """Leave the package's modules to Python's own import, not pytest's assertion
    rewriting: pytest imports every module of a plugin that an entry point or ``-p``
    names through its rewriting hook, which reads and hashes each module's source and
    unmarshals its cached code from the open file, about 117 M instructions for a
    recording run's modules (docs/benchmarks.md). Rewriting serves a plugin's asserts
    a user reads (fixtures, helpers); this package has none. Where pytest's hook is not
    the one known (private names: pytest 8.0 to 9), every module is left to it."""
    for finder in sys.meta_path:
        if type(finder).__name__ != "AssertionRewritingHook":
            continue
        marked = getattr(finder, "_must_rewrite", None)
        cache = getattr(finder, "_marked_for_rewrite_cache", None)
        if isinstance(marked, set) and isinstance(cache, dict):
            marked.discard(__name__)
            cache.clear()  # rebuilt from the marks on the next import


_imported_without_rewriting()

if TYPE_CHECKING:
    from pytest_accel.flaky.plugin import FlakyQuarantineWarning
    from pytest_accel.hardware.detection import Detection, DetectionContext
    from pytest_accel.perf.model.findings import PerfRegressionWarning

_PUBLIC = {
    "Detection": "pytest_accel.hardware.detection",
    "DetectionContext": "pytest_accel.hardware.detection",
    "PerfRegressionWarning": "pytest_accel.perf.model.findings",
    "FlakyQuarantineWarning": "pytest_accel.flaky.plugin",
}
__all__ = ["Detection", "DetectionContext", "FlakyQuarantineWarning", "PerfRegressionWarning"]


def __getattr__(name: str) -> Any:
    """Public names load their module on first use: importing the plugin stays cheap."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_accel' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
