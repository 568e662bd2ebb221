"""pytest hooks: options, detection at configure time, the header and selection.

The logic lives in ``detection``, ``selection`` and ``options``; this module only wires
it into pytest.  Importing it must stay cheap (no jax, numpy, filelock or orjson).
"""

from __future__ import annotations

import importlib.util
import os
import re
import statistics
from typing import Any

import pytest

from pytest_accel import hookspecs, options
from pytest_accel.baseline import load_baseline
from pytest_accel.detection import (
    Detection,
    DetectionContext,
    cpu_detection,
    describe_evidence,
    detect_builtin,
    platform_matches,
    sysroot_from_env,
)
from pytest_accel.pinning import PINNED_PLATFORMS, Pin, PinError, plan_pin, shareable
from pytest_accel.probe import ProbeError, confirm, run_jax_probe
from pytest_accel.recorder import NodeInfoSender, PerfPlugin, collect_nodes, load_for_session
from pytest_accel.records import env_key, framework_versions
from pytest_accel.selection import (
    MARKERS,
    RUN,
    SELECTION_MARKERS,
    MarkerError,
    Verdict,
    evaluate_marks,
)
from pytest_accel.sharding import Plan, make_units, plan, weights_for
from pytest_accel.storage import InputError, check_writable

detection_key = pytest.StashKey[Detection]()
pin_key = pytest.StashKey[Pin]()
plan_key = pytest.StashKey[Plan]()
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


def _early_setting(early_config: pytest.Config, flag: str) -> str | None:
    """An option's value before options are parsed into ``config.option``."""
    spec = options.spec_for(flag)
    value = getattr(early_config.known_args_namespace, spec.dest, None)
    if value is None and spec.env:
        value = os.environ.get(spec.env) or None
    if value is None:
        value = early_config.getini(spec.dest) or None
    return None if value is None else str(value)


def _set_env(early_config: pytest.Config, values: dict[str, str]) -> None:
    """Set variables for this process and its children; restored at unconfigure."""
    saved = early_config.stash.setdefault(_saved_env_key, {})
    for name, value in values.items():
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Set device variables before conftests (which may import jax or torch) are loaded."""
    value = _early_setting(early_config, "--accel-cpu-devices")
    if value:
        count = options.parse_positive_int("--accel-cpu-devices", value)
        flags = _XLA_HOST_COUNT.sub("", os.environ.get("XLA_FLAGS", "")).strip()
        flag = f"--xla_force_host_platform_device_count={count}"
        _set_env(
            early_config,
            {"JAX_NUM_CPU_DEVICES": str(count), "XLA_FLAGS": f"{flags} {flag}".strip()},
        )
    _pin_xdist_worker(early_config)


def _pin_xdist_worker(early_config: pytest.Config) -> None:
    """In an xdist worker, take this worker's slice of the devices (--accel-pin=auto).

    xdist names the worker and the worker count in the environment before the worker's
    configuration is built; ``workerinput`` arrives only after conftests are imported.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker or not workers.isdigit():
        return
    if (_early_setting(early_config, "--accel-pin") or "auto").lower() != "auto":
        return
    accel = (_early_setting(early_config, "--accel") or "auto").lower()
    if accel == "cpu" or _early_setting(early_config, "--accel-emulate"):
        return
    context = DetectionContext(
        sysroot_from_env(os.environ), dict(os.environ), None if accel == "auto" else accel
    )
    found = detect_builtin(context)
    if found is None or found.platform not in PINNED_PLATFORMS:
        return
    try:
        pin = plan_pin(found, os.environ, worker, int(workers))
    except PinError as exc:
        raise pytest.UsageError(f"--accel-pin: {exc}") from None
    _set_env(early_config, pin.env)
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
        return Detection(
            detection.platform,
            pin.device_count,
            detection.device_kind,
            f"{detection.source}; {pin.describe()}",
            detection.evidence,
            pinned=True,
        )
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
    try:
        result = run_jax_probe(timeout=opts.probe_timeout)
        confirmed = confirm(requested or detection.platform, result)
    except ProbeError as exc:
        if requested and opts.allow_missing:
            ctx = DetectionContext(sysroot_from_env(os.environ), os.environ)
            ctx.evidence.extend([*detection.evidence, f"jax probe: {exc}"])
            return cpu_detection(ctx, source="probe jax")
        raise pytest.UsageError(f"--accel-probe: {exc}") from None
    return Detection(
        confirmed.platform,
        confirmed.device_count,
        confirmed.device_kind or detection.device_kind,
        f"{detection.source}, confirmed by jax",
        (*detection.evidence, *confirmed.evidence),
    )


def pytest_configure(config: pytest.Config) -> None:
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)
    if not config.pluginmanager.has_plugin("pytest_accel.cpu_fallback"):
        config.pluginmanager.register(CpuFallback(), "pytest_accel.cpu_fallback")
    opts = options.resolve(config, known_platforms(config))
    config.stash[options_key] = opts
    detection = config.stash[detection_key] = _resolve_detection(config, opts)
    if not _is_xdist_worker(config):
        _check_pinning(config, opts, detection)
    _register_features(config, detection)


def _pinnable(opts: options.AccelOptions, detection: Detection) -> bool:
    return (
        opts.pin == "auto"
        and opts.emulate is None
        and detection.platform in PINNED_PLATFORMS
        and not detection.pinned
    )


def _check_pinning(config: pytest.Config, opts: options.AccelOptions, detection: Detection) -> None:
    """Refuse more xdist workers than devices before any worker starts."""
    workers = getattr(config.option, "numprocesses", None)
    if not isinstance(workers, int) or workers < 1 or not _pinnable(opts, detection):
        return
    devices = shareable(detection, os.environ)
    if workers > len(devices):
        raise pytest.UsageError(
            f"--accel-pin: -n {workers} workers cannot each hold one of {len(devices)}"
            f" {detection.platform} device(s); use -n {len(devices)} (or -n auto),"
            " or --accel-pin=off to share them"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on an accelerator runner: one worker per device (set)."""
    opts = config.stash.get(options_key, None)
    if opts is None:  # xdist asks before pytest_configure: detect now (cheap, no probe)
        opts = options.resolve(config, known_platforms(config))
    detection = config.stash.get(detection_key, None) or _resolve_detection(config, opts)
    if not _pinnable(opts, detection):
        return None
    return len(shareable(detection, os.environ)) or None


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _register_features(config: pytest.Config, detection: Detection) -> None:
    """Feature classes exist only when their option is on (like pytest's stepwise)."""
    perf = options.resolve_perf(config)
    if not perf.enabled:
        return
    if _is_xdist_worker(config):
        # Workers only annotate reports; the controller compares and writes.
        config.pluginmanager.register(NodeInfoSender(), "pytest_accel.node_info")
        return
    if perf.record:
        try:
            check_writable(perf.record)
        except InputError as exc:
            raise pytest.UsageError(f"--perf-record: {exc}") from None
    baseline = load_for_session(perf)
    shard = config.stash[options_key].shard_label
    plugin = PerfPlugin(config, perf, detection, baseline, shard)
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
        kept, elsewhere = _shard(config, detection, opts, kept)
        deselected += elsewhere
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def _shard(
    config: pytest.Config,
    detection: Detection,
    opts: options.AccelOptions,
    items: list[pytest.Item],
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """Keep this shard's tests; the same plan is computed identically on every shard."""
    assert opts.shard is not None
    index, count = opts.shard
    nodeids = [item.nodeid for item in items]
    nodes = collect_nodes(items)
    groups = {
        nodeid: nodes.parents[nodeid][0 if opts.shard_by == "class" else 1] for nodeid in nodeids
    }
    skipped = [i.nodeid for i in items if i.stash[verdict_key].skip_reason is not None]
    weights = weights_for(nodeids, _known_durations(config, detection), zero=skipped)
    shard_plan = plan(make_units(nodeids, groups, weights, opts.shard_by), count)
    config.stash[plan_key] = shard_plan
    mine = set(shard_plan.tests(index - 1))
    return [i for i in items if i.nodeid in mine], [i for i in items if i.nodeid not in mine]


def _known_durations(config: pytest.Config, detection: Detection) -> dict[str, float]:
    """Median test durations under this run's hardware key, from --perf-baseline."""
    perf = options.resolve_perf(config)
    if perf.baseline is None or not os.path.exists(perf.baseline):
        return {}
    try:
        baseline = load_baseline(perf.baseline)
    except InputError as exc:
        raise pytest.UsageError(f"--perf-baseline: {exc}") from None
    env = baseline.for_key(env_key(detection, perf.env_key))
    if env is None:
        return {}
    return {test: statistics.median(samples) for test, samples in env.tests.items() if samples}


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    shard_plan = config.stash.get(plan_key, None)
    opts = config.stash[options_key]
    if shard_plan is None or opts.shard is None:
        return None
    loads = shard_plan.loads()
    index = opts.shard[0] - 1
    return (
        f"accel-shard {opts.shard_label} by {opts.shard_by}: {len(shard_plan.tests(index))}"
        f" test(s), estimated {loads[index]:.1f}s; all shards:"
        f" {', '.join(f'{load:.1f}s' for load in loads)} (largest {shard_plan.imbalance():.3f}x"
        " the ideal)"
    )
