"""pytest hooks: options, detection at configure time, the header and selection.

The logic lives in ``detection``, ``selection`` and ``options``; this module only wires
it into pytest.  Importing it must stay cheap (no jax, numpy, filelock or orjson).
"""

from __future__ import annotations

import importlib.util
import os
import re
from typing import TYPE_CHECKING, Any

import pytest

from pytest_accel import hookspecs, options
from pytest_accel.detection import (
    Detection,
    DetectionContext,
    cpu_detection,
    describe_evidence,
    detect_builtin,
    framework_versions,
    platform_matches,
    sysroot_from_env,
)
from pytest_accel.selection import (
    MARKERS,
    RUN,
    SELECTION_MARKERS,
    MarkerError,
    Verdict,
    evaluate_marks,
)

# Feature modules (timing, baselines, sharding, pinning, the probe) are imported where
# their option is on: importing the plugin must stay cheap for every pytest run.
if TYPE_CHECKING:
    from pytest_accel.baseline import Baseline
    from pytest_accel.pinning import Pin
    from pytest_accel.sharding import Plan

detection_key = pytest.StashKey[Detection]()
pin_key: pytest.StashKey[Pin] = pytest.StashKey()
plan_key: pytest.StashKey[Plan] = pytest.StashKey()
baseline_key: pytest.StashKey[Baseline | None] = pytest.StashKey()
options_key = pytest.StashKey[options.AccelOptions]()
verdict_key = pytest.StashKey[Verdict]()
_saved_env_key = pytest.StashKey[dict[str, str | None]]()

WORKERINPUT_DETECTION = "pytest_accel_detection"
# Platforms JAX itself can confirm; a third-party platform is its detector's word.
JAX_PLATFORMS = frozenset({"tpu", "cuda", "rocm", "gpu"})
_XLA_HOST_COUNT = re.compile(r"--xla_force_host_platform_device_count=\d+")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)
    options.add_options(parser, options.PERF_OPTIONS, group="perf")
    options.add_options(parser, options.FLAKY_OPTIONS, group="flaky")


def _set_env(early_config: pytest.Config, values: dict[str, str]) -> None:
    """Set variables for this process and its children; restored at unconfigure."""
    saved = early_config.stash.setdefault(_saved_env_key, {})
    for name, value in values.items():
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Set device variables before conftests (which may import jax or torch) are loaded."""
    value = options.early_setting(early_config, "--accel-cpu-devices")
    if value:
        count = options.parse_positive_int("--accel-cpu-devices", value)
        flags = _XLA_HOST_COUNT.sub("", os.environ.get("XLA_FLAGS", "")).strip()
        flag = f"--xla_force_host_platform_device_count={count}"
        _set_env(
            early_config,
            {"JAX_NUM_CPU_DEVICES": str(count), "XLA_FLAGS": f"{flags} {flag}".strip()},
        )
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from pytest_accel import scaleout

        pin = scaleout.pin_worker(early_config, lambda values: _set_env(early_config, values))
        if pin is not None:
            early_config.stash[pin_key] = pin


def known_platforms(config: pytest.Config) -> list[str]:
    names: list[str] = []
    for result in config.hook.pytest_accel_platforms():
        names.extend(str(n).lower() for n in result)
    return names


class CpuFallback:
    """The last detector: no accelerator answered, so the run is on CPU."""

    @pytest.hookimpl(trylast=True)
    def pytest_accel_detect(self, context: DetectionContext) -> Detection:
        return cpu_detection(context)


@pytest.hookimpl(tryfirst=True)
def pytest_accel_detect(context: DetectionContext) -> Detection | None:
    return detect_builtin(context)


def detect(config: pytest.Config, requested: str | None) -> Detection:
    context = DetectionContext(sysroot_from_env(os.environ), dict(os.environ), requested)
    result: Detection = config.hook.pytest_accel_detect(context=context)
    return result


def _missing_error(requested: str, detection: Detection) -> pytest.UsageError:
    return pytest.UsageError(
        f"--accel={requested}: no {requested} device found (detected {detection.describe()});"
        f" checked: {describe_evidence(detection.evidence)}."
        " Use --accel=auto to skip what cannot run here, or --accel-allow-missing."
    )


def _resolve_detection(config: pytest.Config, opts: options.AccelOptions) -> Detection:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and WORKERINPUT_DETECTION in workerinput:
        # xdist worker: the controller detected (and probed) once for everyone.
        detection = Detection.from_json(workerinput[WORKERINPUT_DETECTION])
        pin = config.stash.get(pin_key, None)
        if pin is None:
            return detection
        from pytest_accel import scaleout

        return scaleout.pinned_detection(detection, pin)
    if opts.emulate is not None:
        return opts.emulate
    requested = opts.requested
    if requested == "cpu":
        return cpu_detection(
            DetectionContext(sysroot_from_env(os.environ), os.environ),
            source="option --accel=cpu",
        )
    detection = detect(config, requested)
    if requested and not platform_matches(requested, detection.platform):
        if not opts.allow_missing:
            raise _missing_error(requested, detection)
        return detection
    wants_probe = opts.probe == "jax" or (
        opts.probe == "auto"
        and requested in JAX_PLATFORMS
        and importlib.util.find_spec("jax") is not None
    )
    if not wants_probe:
        return detection
    if importlib.util.find_spec("jax") is None:
        raise pytest.UsageError("--accel-probe=jax: jax is not importable (pip install jax)")
    from pytest_accel.probe import ProbeError, confirm, confirmed_detection, run_jax_probe

    try:
        result = run_jax_probe(timeout=opts.probe_timeout)
        confirmed = confirm(requested or detection.platform, result)
    except ProbeError as exc:
        if requested and opts.allow_missing:
            ctx = DetectionContext(sysroot_from_env(os.environ), os.environ)
            ctx.evidence.extend([*detection.evidence, f"jax probe: {exc}"])
            return cpu_detection(ctx, source="probe jax")
        raise pytest.UsageError(f"--accel-probe: {exc}") from None
    return confirmed_detection(detection, confirmed)


def _session_setup(config: pytest.Config) -> tuple[options.AccelOptions, Detection]:
    """Options and detection, resolved (and probed) once per session, whichever asks first.

    pytest-xdist may ask for ``-n auto`` before ``pytest_configure``.
    """
    if detection_key in config.stash:
        return config.stash[options_key], config.stash[detection_key]
    if not config.pluginmanager.has_plugin("pytest_accel.cpu_fallback"):
        config.pluginmanager.register(CpuFallback(), "pytest_accel.cpu_fallback")
    opts = config.stash[options_key] = options.resolve(config, known_platforms(config))
    detection = config.stash[detection_key] = _resolve_detection(config, opts)
    return opts, detection


def pytest_configure(config: pytest.Config) -> None:
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)
    opts, detection = _session_setup(config)
    workers = getattr(config.option, "numprocesses", None)
    if not _is_xdist_worker(config) and isinstance(workers, int) and workers > 0:
        from pytest_accel import scaleout

        scaleout.check_worker_count(workers, opts, detection)
    _register_features(config, detection)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    opts, detection = _session_setup(config)
    from pytest_accel import scaleout

    return scaleout.auto_workers(opts, detection)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _register_features(config: pytest.Config, detection: Detection) -> None:
    """Feature classes exist only when their option is on (like pytest's stepwise)."""
    perf = options.resolve_perf(config)
    flaky = options.resolve_flaky(config)
    if not (perf.enabled or flaky.enabled):
        return
    if flaky.enabled:
        from pytest_accel.flaky import register_flaky

        register_flaky(
            config,
            flaky,
            detection,
            env_key_override=perf.env_key,
            known_platforms=config.stash[options_key].known_platforms,
        )
    if not perf.enabled:
        return
    if _is_xdist_worker(config):
        from pytest_accel.results import NodeInfoSender

        # Workers only annotate reports; the controller compares and writes.
        config.pluginmanager.register(NodeInfoSender(), "pytest_accel.node_info")
        return
    from pytest_accel.recorder import PerfPlugin, load_for_session
    from pytest_accel.results import ResultsCollector
    from pytest_accel.storage import InputError, check_writable

    if perf.record:
        try:
            check_writable(perf.record)
        except InputError as exc:
            raise pytest.UsageError(f"--perf-record: {exc}") from None
    baseline = config.stash[baseline_key] = load_for_session(perf)
    shard = config.stash[options_key].shard_label
    results = ResultsCollector(config)
    config.pluginmanager.register(results, "pytest_accel.results")
    plugin = PerfPlugin(config, perf, detection, baseline, results=results, shard=shard)
    config.pluginmanager.register(plugin, "pytest_accel.perf")


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in config.stash.get(_saved_env_key, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the detection to each worker instead of re-detecting."""
    detection = node.config.stash.get(detection_key, None)
    if detection is not None:
        node.workerinput[WORKERINPUT_DETECTION] = detection.to_json()


def header_line(config: pytest.Config) -> str:
    detection = config.stash[detection_key]
    opts = config.stash[options_key]
    line = f"accel: {detection.describe()}"
    if opts.requested and not platform_matches(opts.requested, detection.platform):
        line += f" (requested {opts.requested}: missing, its tests skip)"
    versions = framework_versions()
    for name in ("jax", "torch"):
        if name in versions:
            line += f"; {name} {versions[name]}"
    return line


def pytest_report_header(config: pytest.Config) -> str:
    return header_line(config)


Marks = tuple[tuple[str, tuple[Any, ...], dict[str, Any]], ...]


def _own_selection_marks(node: pytest.Item | pytest.Collector) -> Marks:
    return tuple(
        (m.name, m.args, dict(m.kwargs)) for m in node.own_markers if m.name in SELECTION_MARKERS
    )


def _inherited_marks(node: pytest.Collector | None, cache: dict[int, Marks]) -> Marks:
    """Selection marks of a collector and its parents, closest first, once per collector.

    Equivalent to ``item.iter_markers()`` without rebuilding each item's parent chain:
    ten thousand tests share a few hundred classes and modules.
    """
    if node is None:
        return ()
    marks = cache.get(id(node))
    if marks is None:
        marks = _own_selection_marks(node) + _inherited_marks(node.parent, cache)
        cache[id(node)] = marks
    return marks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    detection = config.stash[detection_key]
    opts = config.stash[options_key]
    targets_accelerator = detection.is_accelerator or opts.requested not in (None, "cpu")
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    cache: dict[int, Marks] = {}
    for item in items:
        marks = _own_selection_marks(item) + _inherited_marks(item.parent, cache)
        try:
            verdict = (
                evaluate_marks(
                    marks, detection, opts.known_platforms, targets_accelerator=targets_accelerator
                )
                if marks
                else RUN
            )
        except MarkerError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[verdict_key] = verdict
        if opts.only and not verdict.targets_platform(detection.platform):
            deselected.append(item)
            continue
        if verdict.skip_reason is not None:
            item.add_marker(pytest.mark.skip(reason=verdict.skip_reason))
        kept.append(item)
    if opts.shard is not None:
        from pytest_accel import scaleout
        from pytest_accel.records import env_key

        skipped = {i.nodeid for i in kept if i.stash[verdict_key].skip_reason is not None}
        key = env_key(detection, options.resolve_perf(config).env_key)
        durations = scaleout.known_durations(_baseline_for_sharding(config), key)
        kept, elsewhere, shard_plan = scaleout.shard_items(kept, opts, durations, skipped)
        config.stash[plan_key] = shard_plan
        deselected += elsewhere
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def _baseline_for_sharding(config: pytest.Config) -> Baseline | None:
    """The session's baseline; an xdist worker, which does not compare, reads it here."""
    if baseline_key in config.stash:
        return config.stash[baseline_key]
    path = options.resolve_perf(config).baseline
    if path is None or not os.path.exists(path):
        return None
    from pytest_accel.baseline import load_baseline
    from pytest_accel.storage import InputError

    try:
        baseline = config.stash[baseline_key] = load_baseline(path)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None
    return baseline


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    shard_plan = config.stash.get(plan_key, None)
    if shard_plan is None:
        return None
    from pytest_accel import scaleout

    return scaleout.shard_line(config.stash[options_key], shard_plan)
