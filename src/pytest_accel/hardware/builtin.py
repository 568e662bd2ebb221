"""The built-in detector: framework selectors first, then the system probes in order."""

from __future__ import annotations

from pytest_accel.hardware.detection import Detection, DetectionContext, cpu_detection
from pytest_accel.hardware.platforms import (
    builtin_names,
    families,
    jax_names,
    platform_matches,
    probe_order,
)
from pytest_accel.text import plain, shown


def framework_selection(ctx: DetectionContext) -> tuple[list[str] | None, str | None]:
    """Platforms JAX (``JAX_PLATFORMS``) or torch_xla (``PJRT_DEVICE``) may use, in order.

    Returns ``(None, None)`` when neither is set, else the allowed list and the setting.
    """
    for variable in ("JAX_PLATFORMS", "PJRT_DEVICE"):
        value = ctx.environ.get(variable, "").strip()
        if not value:
            continue
        names = [part.strip().lower() for part in value.split(",")]
        selectors = jax_names()
        allowed = [selectors[p] for p in names if p in selectors]
        setting = f"{variable}={plain(value)}"
        ctx.note(f"env {setting}")
        unknown = [p for p in names if p not in selectors]
        if unknown:
            ctx.ignore(
                f"{variable} names {', '.join(map(shown, unknown))}, not a platform the built-in"
                f" detectors know ({', '.join(selectors)})"
            )
        return allowed, setting
    return None, None


def detect_builtin(ctx: DetectionContext) -> Detection | None:
    """Selectors, then masks and system probes; None when no built-in platform applies.

    Returning None lets third-party detectors and then the CPU fallback answer.
    """
    if ctx.requested and ctx.requested not in (*builtin_names(), *families()):
        return None  # a third-party platform was asked for: leave it to its detector
    allowed, setting = framework_selection(ctx)
    if allowed is not None and allowed and allowed[0] == "cpu":
        return cpu_detection(ctx, source=f"env {setting}")
    probes = {row.name: row.probe for row in probe_order() if row.probe is not None}
    order = list(probes)
    if ctx.requested and ctx.requested != "cpu":
        wanted = [p for p in order if platform_matches(ctx.requested, p)]
        order = wanted + [p for p in order if p not in wanted]
    if allowed:
        order = [p for p in order if any(platform_matches(a, p) for a in allowed)]
    for platform in order:
        found = probes[platform](ctx)
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
