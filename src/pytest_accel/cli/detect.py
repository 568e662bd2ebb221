"""``pytest-accel detect``: what a pytest run in this directory would detect, and why."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_accel.cli.common import EXIT_FINDINGS, EXIT_OK, CliError, add_command
from pytest_accel.hardware.options import PROBE_TIMEOUT
from pytest_accel.text import one_line


def add(commands: Any) -> None:
    detect = add_command(
        commands,
        "detect",
        "what a pytest run here would detect, and why",
        "Detect the hardware as a pytest run in this directory would: the same rootdir and"
        " ini file (their --accel, --accel-cpu-devices and --accel-emulate settings, and"
        " PYTEST_ADDOPTS), the same conftest.py detectors, the same header line. Nothing is"
        " collected or run.",
        [
            "pytest-accel detect",
            "pytest-accel detect --json --probe jax",
            "pytest-accel detect -- --accel-cpu-devices=8",
        ],
    )
    detect.add_argument("--json", action="store_true", help="print JSON instead of text")
    detect.add_argument(
        "--probe",
        choices=("none", "jax"),
        default="none",
        help="none (default), or jax: confirm the platform and device count by running JAX"
        " in a subprocess",
    )
    detect.add_argument(
        "--probe-timeout",
        type=float,
        default=PROBE_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on the JAX probe after SECONDS (default {PROBE_TIMEOUT:g})",
    )
    detect.add_argument(
        "pytest_args",
        nargs="*",
        metavar="PYTEST_ARG",
        help="pytest options to detect with, after -- (as on a pytest command line)",
    )
    detect.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Only this command runs pytest (and maybe JAX): the others import neither.
    from pytest_accel.cli.detect_session import detect_as_pytest
    from pytest_accel.hardware.detection import DetectionError
    from pytest_accel.hardware.probe import ProbeError, probe_and_confirm

    try:
        detection, header, where = detect_as_pytest(args.pytest_args)
    except DetectionError as exc:  # a bad --accel-emulate or device variable: one line
        raise CliError(str(exc)) from None
    probe: dict[str, object] | None = None
    if args.probe == "jax":
        try:
            confirmed = probe_and_confirm(detection.platform, detection, args.probe_timeout)
            probe = {"ok": True, **confirmed.to_json()}
            detection = confirmed
        except ProbeError as exc:
            probe = {"ok": False, "error": str(exc)}
    if args.json:
        payload = {**detection.to_json(), "header": header, "where": where, "probe": probe}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(header + "\n")  # one line, whatever was read
        sys.stdout.write(one_line(f"  {where}") + "\n")
        for line in detection.evidence:
            sys.stdout.write(one_line(f"  checked: {line}") + "\n")
        if probe is not None and not probe["ok"]:
            sys.stdout.write(one_line(f"  probe failed: {probe['error']}") + "\n")
    return EXIT_FINDINGS if probe is not None and not probe["ok"] else EXIT_OK
