"""The installed distributions, read once per test process.

Every pytest session reads every installed distribution's metadata twice before its
first test: pluggy loads the ``pytest11`` entry points, and pytest marks the files of
the distributions that declare one for assertion rewriting.  Each reads and parses
each distribution's ``entry_points.txt``, and the second its ``RECORD`` too, afresh: in
this project's environment (about 70 distributions) 7 ms a session, the largest share
of an in-process pytester run after pytest's own plugins.  Nothing installs or removes
a distribution while the suite runs, so the test processes keep what they read: each
distribution's texts and the metadata, entry points and files parsed from them.

Only ``importlib.metadata.distributions`` (what pluggy, pytest and the plugin's
selection call) is kept; ``distribution(name)`` and ``version(name)`` read afresh.  A
distribution new to the path (a test's own fake one) is read when first seen.  Fresh
processes (``runpytest_subprocess``, the xdist workers a test starts) read as a user's
run does.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Iterator
from typing import Any

_discover = importlib.metadata.distributions


class KeptDistribution(importlib.metadata.Distribution):
    """A distribution whose texts, metadata, entry points and files are read once."""

    def __init__(self, dist: importlib.metadata.Distribution) -> None:
        self._dist = dist
        self._texts: dict[str, str | None] = {}

    def read_text(self, filename: str) -> str | None:
        if filename not in self._texts:
            self._texts[filename] = self._dist.read_text(filename)
        return self._texts[filename]

    def locate_file(self, path: Any) -> Any:
        return self._dist.locate_file(path)

    @functools.cached_property
    def metadata(self) -> Any:
        return self._dist.metadata

    @functools.cached_property
    def entry_points(self) -> importlib.metadata.EntryPoints:
        return self._dist.entry_points

    @functools.cached_property
    def files(self) -> list[importlib.metadata.PackagePath] | None:
        return self._dist.files

    @property
    def _normalized_name(self) -> str:  # what ``entry_points()`` tells duplicates by
        return str(getattr(self._dist, "_normalized_name", self.name))


_kept: dict[object, KeptDistribution] = {}


def distributions(**kwargs: Any) -> Iterator[importlib.metadata.Distribution]:
    """``importlib.metadata.distributions``, each one found on a path read once."""
    for dist in _discover(**kwargs):
        where = getattr(dist, "_path", None)  # a PathDistribution's dist-info directory
        if where is None:
            yield dist
            continue
        kept = _kept.get(where)
        if kept is None:
            kept = _kept[where] = KeptDistribution(dist)
        yield kept


def keep() -> None:
    """From now on, this process reads each installed distribution once."""
    importlib.metadata.distributions = distributions
