"""Markers and what they require, evaluated against a Detection.

Pure functions over marks (like pytest's ``skipping.py``): collection asks
``evaluate_marks`` once per test and gets a frozen Verdict back.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pytest_accel.hardware.detection import Detection, module_installed
from pytest_accel.hardware.platforms import platform_matches, shorthand_markers

# Each platform's shorthand marker (``tpu``, ``tpu_ci``, ``gpu``, ...) comes from its row
# in the platform table (``platforms.PLATFORMS``); the rest are the plugin's own.
_PLATFORM_SHORTHANDS = {name: platform for name, (platform, _) in shorthand_markers().items()}
MARKERS: dict[str, str] = {
    "accel": (
        "accel(*platforms, min_devices=1, kind=None): run only when the detected platform is"
        " one of platforms ('gpu' matches cuda and rocm), at least min_devices devices are"
        " visible and kind (case-insensitive glob, e.g. 'TPU v5*') matches the device kind."
    ),
    **{name: text for name, (_, text) in shorthand_markers().items()},
    "multi_gpu": "multi_gpu(n=2): run only with at least n GPUs; accel('gpu', min_devices=n).",
    "multi_device": (
        "multi_device(n=2): run only with at least n devices of any platform, CPU included"
        " (JAX host devices; see --accel-cpu-devices)."
    ),
    "cpu_only": "cpu_only: run only when the run does not target an accelerator.",
    "entry": "entry: entry-point / smoke tests, for -m selection.",
    "ray": "ray: tests that need Ray; skipped with a reason when ray is not importable.",
    "slow": "slow: slow tests, for -m selection.",
    "perf": (
        "perf(threshold=None, min_delta=None, ignore=False): per-test override of the"
        " performance regression rule."
    ),
}

REQUIREMENT_MARKERS = frozenset({*_PLATFORM_SHORTHANDS, "accel", "multi_gpu", "multi_device"})
SELECTION_MARKERS = frozenset({*REQUIREMENT_MARKERS, "cpu_only", "ray"})
# What each marker accepts: how many positional arguments (None: any) and which keywords.
# (perf's own arguments are checked by the timing feature.)
SIGNATURES: dict[str, tuple[int | None, tuple[str, ...]]] = {
    "accel": (None, ("min_devices", "kind")),
    **dict.fromkeys(_PLATFORM_SHORTHANDS, (0, ("min_devices", "kind"))),
    "multi_gpu": (1, ("n",)),
    "multi_device": (1, ("n",)),
    **dict.fromkeys(("cpu_only", "ray", "entry", "slow"), (0, ())),
}
CHECKED_MARKERS = frozenset(SIGNATURES)


class MarkerError(ValueError):
    """A marker was used with arguments it does not accept."""


@dataclass(frozen=True)
class Requirement:
    """One marker's demand: a platform set (None = any), a device count and a kind glob."""

    platforms: frozenset[str] | None
    min_devices: int = 1
    kind: str | None = None
    marker: str = "accel"

    def describe(self) -> str:
        where = "/".join(sorted(self.platforms)) if self.platforms else "any platform"
        text = f"{where} x{self.min_devices}" if self.platforms else (f"{self.min_devices} devices")
        if self.kind:
            text += f" of kind {self.kind!r}"
        return text

    def unmet_by(self, detection: Detection) -> bool:
        if self.platforms is not None and not any(
            platform_matches(p, detection.platform) for p in self.platforms
        ):
            return True
        if detection.device_count < self.min_devices:
            return True
        return bool(
            self.kind
            and not fnmatch.fnmatch((detection.device_kind or "").lower(), self.kind.lower())
        )


@dataclass(frozen=True)
class Verdict:
    """Collection's decision for one test."""

    skip_reason: str | None = None
    # Platforms the test targets through its markers; empty = a plain test.
    targets: frozenset[str] = frozenset()
    cpu_only: bool = False
    requirements: tuple[Requirement, ...] = ()

    def targets_platform(self, platform: str) -> bool:
        if platform == "cpu":
            return self.cpu_only
        return any(platform_matches(t, platform) for t in self.targets)


RUN = Verdict()


def edit_distance(a: str, b: str, most: int = 2) -> int:
    """Levenshtein distance, or ``most + 1`` once it is known to be larger."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            )
        previous = current
    return min(previous[-1], most + 1)


def closest(word: str, choices: Iterable[str], most: int = 2) -> str | None:
    """The choice within ``most`` edits of ``word``, the nearest first."""
    ranked = sorted((edit_distance(word, c, most), c) for c in choices)
    return ranked[0][1] if ranked and ranked[0][0] <= most else None


def check_arguments(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A marker's arguments against what it takes: an unknown keyword is named with the
    closest valid one, so a typo never passes silently."""
    positional, keywords = SIGNATURES[name]
    takes = ", ".join(f"{k}=" for k in keywords) or "no arguments"
    unknown = []
    for keyword in sorted(set(kwargs) - set(keywords)):
        guess = closest(keyword, keywords)
        unknown.append(f"{keyword!r}" + (f" (did you mean {guess}=?)" if guess else ""))
    if unknown:  # every one named at once, not one per attempt
        plural = "s" if len(unknown) > 1 else ""
        raise MarkerError(
            f"@pytest.mark.{name}: unknown keyword{plural} {', '.join(unknown)}; it takes {takes}"
        )
    if positional is not None and len(args) > positional:
        what = (
            f"at most {positional} positional argument(s)"
            if positional
            else "no positional arguments"
        )
        raise MarkerError(f"@pytest.mark.{name} takes {what}, got {args!r}; it takes {takes}")


def _positive_int(marker: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MarkerError(
            f"@pytest.mark.{marker}: {name} must be a positive integer, got {value!r}"
        )
    return value


def _kind(marker: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MarkerError(f"@pytest.mark.{marker}: kind must be a string glob, got {value!r}")
    return value


def requirement_from_mark(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], known_platforms: Collection[str]
) -> Requirement | None:
    """The requirement one mark expresses, or None for markers that require nothing."""
    if name in SIGNATURES:
        check_arguments(name, args, kwargs)
    if name in _PLATFORM_SHORTHANDS:
        return Requirement(
            frozenset({_PLATFORM_SHORTHANDS[name]}),
            _positive_int(name, "min_devices", kwargs.get("min_devices", 1)),
            _kind(name, kwargs.get("kind")),
            name,
        )
    if name == "accel":
        platforms = frozenset(str(a).lower() for a in args)
        unknown = sorted(platforms - set(known_platforms))
        if unknown:
            raise MarkerError(
                f"@pytest.mark.accel: unknown platform {unknown[0]!r}"
                f" (choose from {', '.join(sorted(known_platforms))})"
            )
        return Requirement(
            platforms or None,
            _positive_int(name, "min_devices", kwargs.get("min_devices", 1)),
            _kind(name, kwargs.get("kind")),
            name,
        )
    if name in ("multi_gpu", "multi_device"):
        n = _positive_int(name, "n", args[0] if args else kwargs.get("n", 2))
        return Requirement(frozenset({"gpu"}) if name == "multi_gpu" else None, n, None, name)
    return None


@cache
def module_available(module: str) -> bool:
    return module_installed(module)


MarkSource = Iterable[tuple[str, tuple[Any, ...], dict[str, Any]]]


def evaluate_marks(
    marks: MarkSource,
    detection: Detection,
    known_platforms: Collection[str],
    *,
    targets_accelerator: bool | None = None,
    is_available: Callable[[str], bool] = module_available,
) -> Verdict:
    """Decide whether a test with these ``(name, args, kwargs)`` marks runs here.

    ``targets_accelerator`` says whether the run targets an accelerator (for ``cpu_only``);
    it defaults to what was detected, but an explicit ``--accel=tpu`` whose TPU is missing
    still targets one.
    """
    if targets_accelerator is None:
        targets_accelerator = detection.is_accelerator
    requirements: list[Requirement] = []
    cpu_only = False
    needs_ray = False
    for name, args, kwargs in marks:
        if name in ("cpu_only", "ray", "entry", "slow"):
            check_arguments(name, args, kwargs)
            cpu_only = cpu_only or name == "cpu_only"
            needs_ray = needs_ray or name == "ray"
        else:
            requirement = requirement_from_mark(name, args, kwargs, known_platforms)
            if requirement is not None:
                requirements.append(requirement)
    targets = frozenset(p for r in requirements for p in (r.platforms or ()))
    reason = None
    for requirement in requirements:
        if requirement.unmet_by(detection):
            reason = f"requires {requirement.describe()} (detected: {detection.describe()})"
            if detection.pinned and detection.device_count < requirement.min_devices:
                reason += (
                    "; this xdist worker holds only its share of the devices: run it in an"
                    " unpinned pass (-n 0, or --accel-pin=off)"
                )
            elif (
                detection.platform == "cpu"
                and detection.device_count < requirement.min_devices
                and (requirement.platforms is None or "cpu" in requirement.platforms)
            ):
                reason += f"; --accel-cpu-devices={requirement.min_devices} runs it here"
            break
    if reason is None and cpu_only and targets_accelerator:
        reason = f"cpu_only: this run targets an accelerator (detected: {detection.describe()})"
    if reason is None and needs_ray and not is_available("ray"):
        reason = "requires ray (not importable here: pip install ray)"
    if reason is None and not requirements and not cpu_only:
        return RUN
    return Verdict(reason, targets, cpu_only, tuple(requirements))
