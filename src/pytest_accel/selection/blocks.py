"""A Python file as blocks of code with checksums: what a test depends on, and what a
change changed.

A block is a function or method (``pkg/mod.py::Class.method``; a nested function is
its own block inside its parent), a class (``Class``: its bases, decorators, attributes
and the headers of its methods, so adding, removing or overriding a method changes
it), or the module's own body (``<module>``: statements outside functions and
classes).  Names that repeat in one scope get their own blocks in source order
(``value``, ``value#2``: a property's getter and setter, ``@f.register`` implementations
named ``_``, ``typing.overload`` stubs, conditional redefinitions): a test depends on
the definition it ran, never on a namesake.

``<import>`` is everything the file runs when it is imported: its statements, its
classes' bodies (method headers included), and the decorators, defaults and names of
its decorated functions; a module's docstrings are left out.  Every test whose files
import the module, directly or not, depends on it: a constant in another module, a
subclass's class attribute, a registration.  ``<file>`` is the whole file, for a test
whose own file coverage did not measure.

Each checksum is of the syntax tree without positions: moving a function, reformatting
it or editing a comment leaves it alone; changing what runs changes it.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

MODULE = "<module>"
IMPORT = "<import>"
# The whole file: what a test depends on where coverage did not measure its own file
# (pytest-cov measuring only the package): any change to the file is a change.
WHOLE_FILE = "<file>"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Block:
    name: str  # "<module>", "Class", "func", "Class.method", "func.inner", "func#2"
    start: int  # first line (a decorator's, where it has one)
    end: int  # last line
    checksum: str
    parent: str | None  # the enclosing block's name (None: the module body itself)
    body: int = 0  # a function's first body line (lines before it run at import); 0 else
    line: int = 0  # a function's ``def`` line


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

    def at_import(self, line: int, by_name: dict[str, Block] | None = None) -> tuple[str, ...]:
        """The blocks a line run while the file was imported (or a test file collected)
        belongs to: the function whose body it is in (a function called at import),
        else ``<import>`` (a statement, a class body, a decorator or a ``def`` line).
        A one-line function's line is both."""
        blocks = by_name if by_name is not None else self.by_name()
        current: str | None = self.innermost(line)
        while current is not None:
            block = blocks.get(current)
            if block is None or block.name == MODULE:
                break
            if block.body and line >= block.body:
                one_line = block.body == block.line  # ``def f(): return 1``
                return (block.name, IMPORT) if one_line else (block.name,)
            current = block.parent
        return (IMPORT,)


def _checksum(nodes: Iterable[ast.AST]) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for node in nodes:
        digest.update(ast.dump(node, annotate_fields=False, include_attributes=False).encode())
    return digest.hexdigest()


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return body[1:]
    return body


def _lazy_annotations(tree: ast.Module) -> bool:
    """``from __future__ import annotations``: a function's annotations never run."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )


def _header(node: ast.FunctionDef | ast.AsyncFunctionDef, lazy: bool) -> ast.AST:
    """What a ``def`` runs where it stands: its name, decorators and defaults (and its
    annotations, where they are evaluated), not its body."""
    header = copy.copy(node)
    header.body = []
    if lazy:
        arguments = copy.deepcopy(node.args)
        for arg in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            arguments.vararg,
            arguments.kwarg,
        ]:
            if arg is not None:
                arg.annotation = None
        header.args = arguments
        header.returns = None
    return header


def _at_import(body: list[ast.stmt], lazy: bool, *, in_class: bool) -> list[ast.AST]:
    """The statements of ``body`` as they run at import: classes with their method
    headers; a function by its header where it is a method or decorated (a plain
    module-level function only binds its name: its callers depend on its block)."""
    kept: list[ast.AST] = []
    for node in _without_docstring(body):
        if isinstance(node, _DEFS):
            if in_class or node.decorator_list:
                kept.append(_header(node, lazy))
        elif isinstance(node, ast.ClassDef):
            shell = copy.copy(node)
            shell.body = _at_import(node.body, lazy, in_class=True)  # type: ignore[assignment]
            kept.append(shell)
        else:
            kept.append(node)
    return kept


def parse_blocks(source: str | bytes, filename: str = "<source>") -> FileBlocks:
    """The blocks of a file's source; a file that does not parse is one module block
    whose checksum is of its text (any change to it is a change)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        text = source if isinstance(source, bytes) else source.encode("utf-8", "replace")
        digest = hashlib.blake2b(text, digest_size=12).hexdigest()
        return FileBlocks(
            tuple(Block(name, 1, 1 << 30, digest, None) for name in (MODULE, IMPORT, WHOLE_FILE)),
            (),
        )
    lazy = _lazy_annotations(tree)
    spans: list[Block] = []
    seen: dict[str, int] = {}

    def unique(name: str) -> str:
        count = seen[name] = seen.get(name, 0) + 1
        return name if count == 1 else f"{name}#{count}"

    def walk(body: list[ast.stmt], prefix: str, parent: str) -> list[ast.stmt]:
        """The blocks of ``body``'s functions and classes; the statements that stay."""
        kept: list[ast.stmt] = []
        for node in body:
            if isinstance(node, (*_DEFS, ast.ClassDef)):
                name = unique(f"{prefix}{node.name}")
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                end = node.end_lineno or node.lineno
                if isinstance(node, ast.ClassDef):
                    own = walk(node.body, f"{name}.", name)
                    header = [*node.decorator_list, *node.bases, *node.keywords]
                    methods = [_header(n, lazy) for n in node.body if isinstance(n, _DEFS)]
                    checksum = _checksum([*header, *own, *methods])
                    spans.append(Block(name, start, end, checksum, parent))
                else:  # a function: its whole tree, nested functions included
                    checksum = _checksum([node])
                    walk(node.body, f"{name}.", name)
                    first = node.body[0]
                    body_line = min([first.lineno, *_decorator_lines(first)])
                    spans.append(Block(name, start, end, checksum, parent, body_line, node.lineno))
            else:
                kept.append(node)
        return kept

    module_own = walk(tree.body, "", MODULE)
    module = Block(MODULE, 1, 1 << 30, _checksum(module_own), None)
    at_import = Block(
        IMPORT, 1, 1 << 30, _checksum(_at_import(tree.body, lazy, in_class=False)), None
    )
    last = max([b.end for b in spans] + [len(str(source).splitlines()), 1])
    owners = [MODULE] * (last + 1)
    # Outer blocks first: a nested block, which starts later, overwrites its lines.
    for block in sorted(spans, key=lambda b: (b.start, -b.end)):
        owners[block.start : block.end + 1] = [block.name] * (block.end - block.start + 1)
    whole = Block(WHOLE_FILE, 1, 1 << 30, _checksum([tree]), None)
    return FileBlocks(
        (module, *sorted(spans, key=lambda b: b.start), at_import, whole), tuple(owners)
    )


def _decorator_lines(node: ast.stmt) -> list[int]:
    return [d.lineno for d in getattr(node, "decorator_list", ())]
