"""The package's imports between features and shared modules, as a Mermaid chart.

    python scripts/import_graph.py            # print the chart docs/architecture.md holds
    python scripts/import_graph.py --check    # exit 1 if the doc's chart is out of date

Each feature package (``hardware``, ``perf``, ...) and each shared module is one box; an
arrow means some module of the first imports the second when it runs (at the top or
inside a function; imports for type checkers only are left out).  Read from the source
with ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "pytest_accel"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- import graph: begin -->", "<!-- import graph: end -->"


def unit_of(module: str) -> str | None:
    """``pytest_accel.perf.formats.record`` -> ``perf``; ``pytest_accel.files`` -> ``files``."""
    parts = module.split(".")
    if parts[0] != "pytest_accel" or len(parts) < 2:
        return None
    head = parts[1]
    return head if (PACKAGE / head).is_dir() or (PACKAGE / f"{head}.py").exists() else None


def edges() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        source = unit_of(".".join(relative.parts))
        if source is None or source in ("__init__", "__main__"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                target = unit_of(name)
                if target and target != source and target not in ("__init__", "__main__"):
                    found.add((source, target))
    return found


def chart() -> str:
    lines = ["```mermaid", "flowchart TD"]
    lines += [f"    {a} --> {b}" for a, b in sorted(edges())]
    lines.append("```")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare with the doc's chart")
    args = parser.parse_args()
    text = chart()
    if not args.check:
        print(text)
        return 0
    doc = DOC.read_text(encoding="utf-8")
    current = doc.split(BEGIN, 1)[1].split(END, 1)[0].strip() if BEGIN in doc else ""
    if current != text:
        print(f"{DOC}: the import graph is out of date; paste the output of {__file__}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
