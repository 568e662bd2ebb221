"""A Python file as blocks of code with checksums: what a test depends on, and what a
change changed.

A block is a function or method (``pkg/mod.py::Class.method``; a nested function is
its own block inside its parent), a class's own body (``Class`` : its attributes and
decorators, not its methods), or the module's own body (``<module>``: imports,
constants, decorators, every statement outside a function).  Its checksum is of its
syntax tree without positions: moving a function, reformatting it or editing a
comment leaves it alone; changing what runs changes it.

A test depends on the blocks whose lines it executed (coverage.py), and on the bodies
that enclose them: the class body and the module body they run in (a constant, an
import, a decorator), which run once, at import, in no test's context.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

MODULE = "<module>"
# The whole file: what a test depends on where coverage did not measure its own file
# (pytest-cov measuring only the package): any change to the file is a change.
WHOLE_FILE = "<file>"


@dataclass(frozen=True)
class Block:
    name: str  # "<module>", "Class", "func", "Class.method", "func.inner"
    start: int  # first line (a decorator's, where it has one)
    end: int  # last line
    checksum: str
    parent: str | None  # the enclosing block's name (None: the module body itself)


@dataclass(frozen=True)
class FileBlocks:
    """A file's blocks (the module body first), and each line's innermost block."""

    blocks: tuple[Block, ...]
    owners: tuple[str, ...] = ()  # per line (1-based: index 0 unused), its block's name

    def by_name(self) -> dict[str, Block]:
        return {block.name: block for block in self.blocks}

    def innermost(self, line: int) -> str:
        """The name of the block a line belongs to (the module body past the end)."""
        return self.owners[line] if 0 < line < len(self.owners) else MODULE

    def with_enclosing(self, names: Iterable[str]) -> set[str]:
        """``names`` and every block enclosing them, up to the module body."""
        by_name = self.by_name()
        found: set[str] = set()
        for name in names:
            current: str | None = name
            while current is not None and current not in found:
                found.add(current)
                block = by_name.get(current)
                current = block.parent if block is not None else None
        found.add(MODULE)
        return found


def _checksum(nodes: Iterable[ast.AST]) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for node in nodes:
        digest.update(ast.dump(node, annotate_fields=False, include_attributes=False).encode())
    return digest.hexdigest()


def parse_blocks(source: str | bytes, filename: str = "<source>") -> FileBlocks:
    """The blocks of a file's source; a file that does not parse is one module block
    whose checksum is of its text (any change to it is a change)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        text = source if isinstance(source, bytes) else source.encode("utf-8", "replace")
        digest = hashlib.blake2b(text, digest_size=12).hexdigest()
        return FileBlocks(
            (Block(MODULE, 1, 1 << 30, digest, None), Block(WHOLE_FILE, 1, 1 << 30, digest, None)),
            (),
        )
    spans: list[Block] = []

    def walk(body: list[ast.stmt], prefix: str, parent: str) -> list[ast.stmt]:
        """The blocks of ``body``'s functions and classes; the statements that stay."""
        kept: list[ast.stmt] = []
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{node.name}"
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                end = node.end_lineno or node.lineno
                if isinstance(node, ast.ClassDef):
                    own = walk(node.body, f"{name}.", name)
                    header = [*node.decorator_list, *node.bases, *node.keywords]
                    checksum = _checksum([*header, *own])
                else:  # a function: its whole tree, nested functions included
                    checksum = _checksum([node])
                    walk(node.body, f"{name}.", name)
                spans.append(Block(name, start, end, checksum, parent))
            else:
                kept.append(node)
        return kept

    module_own = walk(tree.body, "", MODULE)
    module = Block(MODULE, 1, 1 << 30, _checksum(module_own), None)
    last = max([b.end for b in spans] + [len(str(source).splitlines()), 1])
    owners = [MODULE] * (last + 1)
    # Outer blocks first: a nested block, which starts later, overwrites its lines.
    for block in sorted(spans, key=lambda b: (b.start, -b.end)):
        owners[block.start : block.end + 1] = [block.name] * (block.end - block.start + 1)
    whole = Block(WHOLE_FILE, 1, 1 << 30, _checksum([tree]), None)
    return FileBlocks((module, *sorted(spans, key=lambda b: b.start), whole), tuple(owners))
