"""What changed since a map: the blocks of the project's code whose checksum differs
(or that are gone), and the valves, the changes no map can attribute to tests, each of
which keeps every test.

The Python source is compared by content, block by block (``blocks``), whatever git
says: a file's hash, then, where it differs, its blocks' checksums.  Git lists the
other files that changed (the work tree against the map's commit, and against
``--accel-changed-since``, untracked files included), which the valves read:

- ``conftest``: a ``conftest.py`` changed (fixtures and hooks of many tests);
- ``packaging``: how the project is built or configured changed (``pyproject.toml``,
  ``setup.py``, ``setup.cfg``, ``tox.ini``, ``pytest.ini``, ``pytest.toml``,
  ``.pytest.toml``, ``.pytest.ini``, ``.coveragerc``);
- ``data``: a file that is not Python changed in a tree of mapped code (a top-level
  directory holding some: ``src/``, ``tests/``), and no mapped test read it (a file a
  test read is that test's dependency, by hash); documentation, images and the like
  (``DEFAULT_IGNORED``, ``--accel-select-ignore``) are no change;
- ``dependency``: an installed distribution's version (or Python's) changed since the
  map (jax, jaxlib, libtpu, torch, CUDA and ROCm libraries are named first): what a
  requirement or lock file changes, once installed;
- ``age``: the map is older than ``--accel-map-max-age``;
- ``git``: what changed cannot be listed (no git, not a repository, or the map's
  commit unknown here: a shallow clone).  ``--accel-changed-since`` adds to the map's
  commit and cannot stand in for it: a configuration or data file changed between the
  map and the reference would go unseen.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from pytest_accel.selection.blocks import parse_blocks


@dataclass(frozen=True)
class Valve:
    """A change the map cannot attribute to tests: every test is kept."""

    name: str  # "conftest", "packaging", "data", "dependency", "age", "git"
    detail: str  # what fired it, in words

    def describe(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class ChangeSet:
    changed_blocks: frozenset[int]  # the map's block ids whose code differs now
    changed_files: tuple[str, ...]  # mapped Python files that differ
    valves: tuple[Valve, ...]


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return None


def changed_blocks(
    root: Path, files: Mapping[str, tuple[str, list[tuple[int, str, str]]]]
) -> tuple[set[int], list[str]]:
    """The block ids of ``files`` (the map's) whose code is not what a test ran: the
    file differs and the block's checksum does, or the block (or file) is gone.  A file
    with one version of each block and its hash unchanged is not parsed."""
    changed: set[int] = set()
    changed_paths: list[str] = []
    for path, (recorded, blocks) in files.items():
        names = [name for _, name, _ in blocks]
        current_hash = file_hash(root / path)
        if current_hash == recorded and len(set(names)) == len(names):
            continue
        if current_hash is None:  # removed: every test that ran it must run
            changed.update(block_id for block_id, _, _ in blocks)
            changed_paths.append(path)
            continue
        try:
            source = (root / path).read_bytes()
        except OSError:
            source = b""
        now = {block.name: block.checksum for block in parse_blocks(source, path).blocks}
        stale = [block_id for block_id, name, checksum in blocks if now.get(name) != checksum]
        if stale:
            changed.update(stale)
            changed_paths.append(path)
    return changed, changed_paths


# Files whose change can move any test: how the project is built and configured
# (pytest's and coverage's settings, entry points, package data).  Requirement and
# lock files are not among them: what they change is what is installed, which the
# dependency valve compares (a bump of a linter in requirements-dev.txt changes no test).
PACKAGING = re.compile(
    r"(^|/)(pyproject\.toml|setup\.py|setup\.cfg|tox\.ini|\.?pytest\.ini|\.?pytest\.toml"
    r"|\.coveragerc)$"
)
# Files no test reads: a change to them fires no valve (``--accel-select-ignore`` adds).
DEFAULT_IGNORED = (
    "*.md",
    "*.rst",
    "*.adoc",
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.svg",
    "*.ico",
    "*.pdf",
    "docs/*",
    "doc/*",
    ".github/*",
    ".gitignore",
    ".gitattributes",
    ".pre-commit-config.yaml",
    "LICENSE*",
    "COPYING*",
    "AUTHORS*",
    "CHANGELOG*",
    "CHANGES*",
    "NEWS*",
    "CONTRIBUTING*",
    "CITATION*",
    # What is installed, not read: the dependency valve compares the installed versions.
    "requirements*.txt",
    "*.lock",
    # Tools that are not the tests: editors, linters, docs hosting, coverage services.
    "Makefile",
    ".editorconfig",
    ".flake8",
    "mypy.ini",
    ".readthedocs.y*ml",
    "codecov.y*ml",
    ".codecov.y*ml",
)


def own_files(paths: Iterable[str]) -> set[str]:
    """Files a run of ours writes for ``paths`` (relative to the rootdir): each, its
    lock (``locking``) and SQLite's companions; a change to them is no change."""
    found = set()
    for name in paths:
        posix = PurePosixPath(name)
        found.add(posix.as_posix())
        found.add((posix.parent / f".{posix.name}.lock").as_posix())
        found.update(f"{posix.as_posix()}{suffix}" for suffix in ("-wal", "-shm", "-journal"))
    return found


def file_valves(
    changed: Iterable[str],
    mapped_files: Iterable[str],
    ignored: Iterable[str] = (),
    *,
    read: Iterable[str] = (),
    ignore: Sequence[str] = DEFAULT_IGNORED,
) -> list[Valve]:
    """The valves the changed files (relative to the rootdir) fire.  ``mapped_files``:
    the map's Python files, whose top-level directories are the trees a data file
    counts in; ``ignored``: files of ours (``own_files``); ``read``: files a mapped test
    read (its own dependency, not a valve's); ``ignore``: globs of files no test reads."""
    trees = {_tree(name) for name in mapped_files}
    skip = set(ignored) | set(read)
    conftests, packaging, data = [], [], []
    for name in sorted(set(changed) - skip):
        posix = PurePosixPath(name)
        if posix.name == "conftest.py":
            conftests.append(name)
        elif PACKAGING.search(name):
            packaging.append(name)
        elif (
            posix.suffix not in (".py", ".pyi")
            and _tree(name) in trees
            and not any(fnmatch(name, g) or fnmatch(posix.name, g) for g in ignore)
        ):
            data.append(name)
    valves = []
    for kind, found, what in (
        ("conftest", conftests, "conftest.py changed"),
        ("packaging", packaging, "the build or configuration changed"),
        ("data", data, "a file that is not Python, which no mapped test read, changed"),
    ):
        if found:
            valves.append(Valve(kind, f"{what}: {_some(found)}"))
    return valves


def _tree(name: str) -> str:
    """A file's top-level directory ("" at the rootdir)."""
    return name.split("/", 1)[0] if "/" in name else ""


def new_python_files(
    changed: Iterable[str], mapped_files: Iterable[str], root: Path
) -> dict[str, list[str]]:
    """Python files changed or new that the map never measured, in a package (or a
    directory) of mapped code: each with the mapped files beside it, up its package,
    whose tests must run (a module found by ``pkgutil`` or ``importlib`` discovery)."""
    mapped = set(mapped_files)
    by_folder: dict[str, list[str]] = {}
    for name in mapped:
        by_folder.setdefault(str(PurePosixPath(name).parent), []).append(name)
    found: dict[str, list[str]] = {}
    for name in sorted(set(changed) - mapped):
        posix = PurePosixPath(name)
        if posix.suffix != ".py" or posix.name == "conftest.py":
            continue
        neighbours: list[str] = []
        folder = posix.parent
        while True:
            neighbours += by_folder.get(str(folder), [])
            if str(folder) == "." or not (root / folder / "__init__.py").is_file():
                break  # the top of the package
            folder = folder.parent
        if neighbours:
            found[name] = sorted(neighbours)
    return found


def _some(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


# Distributions that decide what runs on a device: named first where they changed.
DEVICE_STACK = re.compile(
    r"^(jax|jaxlib|jax[-_].*|libtpu.*|torch.*|nvidia[-_].*|.*cuda.*|.*rocm.*)$"
)


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions(root: Path | None = None) -> dict[str, str]:
    """Every installed distribution's version by normalised name, and Python's.  The
    project itself, installed in editable mode from ``root`` (its version moves with
    every commit: versioneer, setuptools-scm), is its code, not a dependency."""
    import platform
    from importlib import metadata

    found: dict[str, str] = {"python": platform.python_version()}
    for dist in metadata.distributions():
        fields = dist.metadata  # parsed anew on each access, as is ``dist.version``
        name = fields["Name"] if fields else None
        if name and not (root is not None and _installed_from(dist, root)):
            version = str(fields["Version"])
            source = _editable_source(dist)
            if source is not None:  # its code moves without its version
                version = f"{version} (editable, {source_digest(source)})"
            found.setdefault(normalized(str(name)), version)
    return found


def _editable_source(dist: Any) -> Path | None:
    """The directory an editable install (PEP 660, ``pip install -e ../sibling``)
    runs from, or None: a distribution that is not one."""
    try:
        text = dist.read_text("direct_url.json")
        found = json.loads(text) if text else {}
        url, editable = found["url"], found.get("dir_info", {}).get("editable")
    except (ValueError, KeyError, TypeError, AttributeError, OSError):
        return None
    if editable is not True or not isinstance(url, str) or not url.startswith("file://"):
        return None
    source = Path(unquote(urlparse(url).path))
    return source if source.is_dir() else None


# Trees of an editable install's directory that hold no code it runs; so does any
# virtual environment in it, whatever its name (``pyvenv.cfg`` marks one).
_NOT_SOURCE = {".git", ".hg", "__pycache__", ".venv", "venv", ".tox", ".nox", "node_modules"}
_EXTENSIONS = (".so", ".pyd", ".dylib")


def source_digest(directory: Path) -> str:
    """A digest of the code under ``directory``: each Python file's content, and each
    compiled extension's path and size (rebuilt, it is another file; hashing hundreds of
    megabytes of them would cost more than it tells)."""
    digest = hashlib.blake2b(digest_size=6)
    for folder, subfolders, names in os.walk(directory):
        if folder != str(directory) and "pyvenv.cfg" in names:
            subfolders.clear()
            continue
        subfolders[:] = sorted(d for d in subfolders if d not in _NOT_SOURCE)
        for name in sorted(names):
            path = os.path.join(folder, name)
            if name.endswith(".py"):
                content = file_hash(Path(path))
            elif name.endswith(_EXTENSIONS):
                try:
                    content = str(os.path.getsize(path))
                except OSError:
                    continue
            else:
                continue
            digest.update(f"{os.path.relpath(path, directory)}\0{content}\0".encode())
    return digest.hexdigest()


def _installed_from(dist: Any, root: Path) -> bool:
    """Whether ``dist`` is the project at ``root``: installed from a directory that holds
    ``root`` or is in it (``pip install -e .``: PEP 610's ``direct_url.json``), or its
    metadata lies in the project's own tree (the ``pkg.egg-info`` setuptools leaves
    there, found wherever the rootdir is on ``sys.path``), not in an environment's
    ``site-packages`` under it."""
    try:
        located = Path(str(dist.locate_file(""))).resolve()
    except (OSError, TypeError, ValueError, NotImplementedError):
        located = None
    if (
        located is not None
        and (located == root or root in located.parents)
        and not {"site-packages", "dist-packages"} & set(located.parts)
    ):
        return True
    try:
        text = dist.read_text("direct_url.json")
        url = json.loads(text)["url"] if text else ""
    except (ValueError, KeyError, TypeError, OSError):
        return False
    if not isinstance(url, str) or not url.startswith("file://"):
        return False
    source = Path(unquote(urlparse(url).path)).resolve()
    return source == root or source in root.parents or root in source.parents


def dependency_valve(then: Mapping[str, str], now: Mapping[str, str]) -> Valve | None:
    """A distribution added, removed or at another version since the map."""
    names = sorted(set(then) | set(now))
    moved = [n for n in names if then.get(n) != now.get(n)]
    if not moved:
        return None
    moved.sort(key=lambda n: (not DEVICE_STACK.match(n), n))
    shown = [f"{n} {then.get(n, 'absent')} -> {now.get(n, 'absent')}" for n in moved]
    return Valve("dependency", f"installed versions changed since the map: {_some(shown)}")


def map_age_days(updated: str, now: datetime) -> float | None:
    """How many days before ``now`` the map was updated (None: its time is unreadable)."""
    try:
        moment = datetime.strptime(updated, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return round((now - moment).total_seconds() / 86400, 3)


def age_valve(updated: str, now: datetime, max_days: float) -> Valve | None:
    """``max_days`` 0: always (a run that wants every test and says why)."""
    days = map_age_days(updated, now)
    if days is None:
        return Valve("age", f"the map's time {updated!r} cannot be read")
    if days > max_days or max_days == 0:
        return Valve("age", f"the map is {days:.1f} days old (--accel-map-max-age {max_days:g})")
    return None


@dataclass(frozen=True)
class ChangedFiles:
    """What git lists as changed: ``files`` (relative to the rootdir), or None and
    ``why`` where it cannot say; ``unknown``: the references it does not know here."""

    files: list[str] | None
    why: str | None = None
    unknown: tuple[str, ...] = ()


def git_changed_files(root: Path, refs: Sequence[str]) -> ChangedFiles:
    """The files (relative to ``root``) that differ between the work tree and each of
    ``refs`` that git knows here, untracked ones included; no files when git cannot say
    (no git, not a repository, none of the refs known)."""
    try:
        top = run_git(root, "rev-parse", "--show-toplevel")
    except GitError as exc:
        return ChangedFiles(None, str(exc))
    known, unknown = [], []
    for ref in refs:
        try:
            run_git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
            known.append(ref)
        except GitError:
            unknown.append(ref)
    if not known:
        why = f"git knows none of {', '.join(refs) or 'the references'} here"
        return ChangedFiles(None, why, tuple(unknown))
    names: set[str] = set()
    # -z: paths as they are (no quoting of a non-ASCII or odd name), NUL-separated.
    for ref in known:
        listed = run_git(root, "diff", "--name-only", "-z", "--no-renames", ref, "--")
        names.update(filter(None, listed.split("\0")))
    untracked = run_git(root, "ls-files", "-z", "--others", "--exclude-standard", "--full-name")
    names.update(filter(None, untracked.split("\0")))
    toplevel = Path(top.strip())
    found = []
    for name in names:
        absolute = toplevel / name
        try:
            found.append(absolute.relative_to(root).as_posix())
        except ValueError:
            continue  # outside the rootdir: not this suite's
    return ChangedFiles(sorted(found), unknown=tuple(unknown))


class GitError(Exception):
    pass


def run_git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",  # a path that is not UTF-8 stays one path
            timeout=60,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git cannot run: {exc}") from None
    if done.returncode:
        message = (done.stderr.strip().splitlines() or ["not a git repository"])[-1]
        raise GitError(f"git {args[0]}: {message}")
    return done.stdout
