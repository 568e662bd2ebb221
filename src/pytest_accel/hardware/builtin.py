"""The built-in detector: framework selectors first, then the system probes in order."""

from __future__ import annotations

from pytest_accel.hardware.detection import (
    ACCELERATOR_PROBE_ORDER,
    BUILTIN_PLATFORMS,
    PLATFORM_FAMILIES,
    Detection,
    DetectionContext,
    cpu_detection,
    platform_matches,
)
from pytest_accel.hardware.sysfs import PROBES
from pytest_accel.text import plain, shown

_SELECTOR_PLATFORMS = {
    "cpu": "cpu",
    "tpu": "tpu",
    "cuda": "cuda",
    "rocm": "rocm",
    "gpu": "gpu",
}


def framework_selection(ctx: DetectionContext) -> tuple[list[str] | None, str | None]:
    """Platforms JAX (``JAX_PLATFORMS``) or torch_xla (``PJRT_DEVICE``) may use, in order.

    Returns ``(None, None)`` when neither is set, else the allowed list and the setting.
    """
    for variable in ("JAX_PLATFORMS", "PJRT_DEVICE"):
        value = ctx.environ.get(variable, "").strip()
        if not value:
            continue
        names = [part.strip().lower() for part in value.split(",")]
        allowed = [_SELECTOR_PLATFORMS[p] for p in names if p in _SELECTOR_PLATFORMS]
        setting = f"{variable}={plain(value)}"
        ctx.note(f"env {setting}")
        unknown = [p for p in names if p not in _SELECTOR_PLATFORMS]
        if unknown:
            ctx.ignore(
                f"{variable} names {', '.join(map(shown, unknown))}, not a platform the built-in"
                f" detectors know ({', '.join(_SELECTOR_PLATFORMS)})"
            )
        return allowed, setting
    return None, None


def detect_builtin(ctx: DetectionContext) -> Detection | None:
    """Selectors, then masks and system probes; None when no built-in platform applies.

    Returning None lets third-party detectors and then the CPU fallback answer.
    """
    if ctx.requested and ctx.requested not in (*BUILTIN_PLATFORMS, *PLATFORM_FAMILIES):
        return None  # a third-party platform was asked for: leave it to its detector
    allowed, setting = framework_selection(ctx)
    if allowed is not None and allowed and allowed[0] == "cpu":
        return cpu_detection(ctx, source=f"env {setting}")
    order = list(ACCELERATOR_PROBE_ORDER)
    if ctx.requested and ctx.requested != "cpu":
        wanted = [p for p in order if platform_matches(ctx.requested, p)]
        order = wanted + [p for p in order if p not in wanted]
    if allowed:
        order = [p for p in order if any(platform_matches(a, p) for a in allowed)]
    for platform in order:
        found = PROBES[platform](ctx)
        if found:
            if setting:
                return Detection(
                    found.platform,
                    found.device_count,
                    found.device_kind,
                    f"{found.source} ({setting})",
                    found.evidence,
                )
            return found
    return None
