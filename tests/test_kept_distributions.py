"""The test processes read each installed distribution once (tests/kept_distributions.py):
what they keep is what a fresh read gives, and a distribution new to the path is seen."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests import kept_distributions


def described(
    dists: Iterable[importlib.metadata.Distribution],
) -> list[tuple[str, str, list[str], int, str]]:
    return sorted(
        (
            str(dist.metadata["Name"]),
            dist.version,
            sorted(f"{ep.group}:{ep.name}={ep.value}" for ep in dist.entry_points),
            len(dist.files or []),
            dist.read_text("direct_url.json") or "",
        )
        for dist in dists
    )


def test_the_kept_distributions_are_what_a_fresh_read_finds() -> None:
    assert importlib.metadata.distributions is kept_distributions.distributions  # conftest
    kept = list(importlib.metadata.distributions())
    assert all(isinstance(dist, kept_distributions.KeptDistribution) for dist in kept)
    assert described(kept) == described(kept_distributions._discover())
    again = list(importlib.metadata.distributions())
    assert [id(dist) for dist in again] == [id(dist) for dist in kept]  # read once
    plugins = importlib.metadata.entry_points(group="pytest11")
    assert "pytest_accel" in plugins.names


def test_a_distribution_new_to_the_path_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "fake_plugin-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text("[pytest11]\nfake = fake_plugin\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    found = {dist.metadata["Name"]: dist for dist in importlib.metadata.distributions()}
    assert found["fake-plugin"].version == "1.2"
    assert [ep.name for ep in found["fake-plugin"].entry_points] == ["fake"]
