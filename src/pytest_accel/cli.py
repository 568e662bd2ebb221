"""The ``pytest-accel`` command (also ``python -m pytest_accel``).

Exit statuses: 0 fine, 1 findings with ``--fail``, 2 bad input or usage (one line on
stderr naming the file and the problem, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from pytest_accel import __version__
from pytest_accel.detection import (
    Detection,
    DetectionContext,
    cpu_detection,
    detect_builtin,
    sysroot_from_env,
)
from pytest_accel.probe import DEFAULT_TIMEOUT, ProbeError, confirm, run_jax_probe

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class CliError(Exception):
    """Bad input: printed as one line, exit 2."""


def _detect(args: argparse.Namespace) -> int:
    context = DetectionContext(sysroot_from_env(os.environ), dict(os.environ))
    detection = detect_builtin(context) or cpu_detection(context)
    probe: dict[str, object] | None = None
    if args.probe == "jax":
        try:
            result = run_jax_probe(timeout=args.probe_timeout)
            confirmed = confirm(detection.platform, result)
            probe = {"ok": True, **confirmed.to_json(), "jax": result.jax_version}
            detection = Detection(
                confirmed.platform,
                confirmed.device_count,
                confirmed.device_kind or detection.device_kind,
                f"{detection.source}, confirmed by jax",
                (*detection.evidence, *confirmed.evidence),
            )
        except ProbeError as exc:
            probe = {"ok": False, "error": str(exc)}
    if args.json:
        payload = {**detection.to_json(), "probe": probe}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(f"accel: {detection.describe()}\n")
        for line in detection.evidence:
            sys.stdout.write(f"  checked: {line}\n")
        if probe is not None and not probe["ok"]:
            sys.stdout.write(f"  probe failed: {probe['error']}\n")
    return EXIT_FINDINGS if probe is not None and not probe["ok"] else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-accel", description="Accelerator detection, timing records and reports."
    )
    parser.add_argument("--version", action="version", version=f"pytest-accel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    detect = commands.add_parser("detect", help="print what the plugin detects and why")
    detect.add_argument("--json", action="store_true", help="print JSON")
    detect.add_argument(
        "--probe", choices=("none", "jax"), default="none", help="confirm with JAX in a subprocess"
    )
    detect.add_argument("--probe-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS")
    detect.set_defaults(handler=_detect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except CliError as exc:
        sys.stderr.write(f"pytest-accel: error: {exc}\n")
        return EXIT_USAGE
    return code
