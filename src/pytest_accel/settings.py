"""How options are declared, read and validated; each feature declares its own.

Every option has an ini key of the same name (dashes as underscores, without the
leading ``--``).  Precedence: command line, then environment variable (where one is
documented), then ini, then the default.  A feature resolves its options once per
session into a frozen dataclass; a bad value is a ``pytest.UsageError`` that quotes it
and lists the valid choices.  Parsers take the flag to name, so that the command line
tool can report a flag as its user typed it.

The command line tool shares the declarations and parsers, and imports no pytest (a
tenth of a second on every command): pytest is imported here only to raise its error.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_accel.text import capped, shown

if TYPE_CHECKING:
    import pytest


@dataclass(frozen=True)
class OptionSpec:
    flag: str
    help: str
    metavar: str | None = None
    is_flag: bool = False
    env: str | None = None
    default: str = "unset"  # as the README's option table shows it
    repeatable: bool = False  # given several times (ini: one value a line)
    # Older names of the option (and of its ini setting), still read: a rename keeps them.
    aliases: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class OptionGroup:
    name: str  # pytest's option group
    title: str  # the README's heading for it
    description: str
    specs: tuple[OptionSpec, ...]


def add_group(parser: pytest.Parser, group: OptionGroup) -> None:
    section = parser.getgroup(group.name, group.description)
    for spec in group.specs:
        # argparse %-formats help strings (``%(default)s``): a literal % must be doubled.
        help_text = spec.help.replace("%", "%%")
        if spec.is_flag:
            section.addoption(spec.flag, action="store_true", default=None, help=help_text)
            parser.addini(spec.dest, spec.help, type="bool", default=False)
        elif spec.repeatable:
            section.addoption(
                spec.flag, action="append", default=None, metavar=spec.metavar, help=help_text
            )
            parser.addini(spec.dest, spec.help, type="linelist", default=[])
        else:
            section.addoption(
                spec.flag,
                *spec.aliases,
                dest=spec.dest,
                default=None,
                metavar=spec.metavar,
                help=help_text,
            )
            parser.addini(spec.dest, spec.help, default=None)
            for alias in spec.aliases:
                parser.addini(_dest_of(alias), f"the older name of {spec.dest}", default=None)


def _dest_of(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


# The hardware key is a fact of the session (session.py), an option of the hardware
# feature (hardware.options): declared here, where both read it.
# What ``--accel-key-facets`` may add to the hardware key: framework and runtime versions
# (``hardware.detection.framework_versions``).
KEY_FACETS = ("jax", "jaxlib", "libtpu", "torch", "torch_xla", "cuda", "rocm")
HARDWARE_KEY_FACETS_OPTION = OptionSpec(
    "--accel-key-facets",
    "Add these versions to the hardware key, comma-separated (jax, jaxlib, libtpu, torch,"
    " torch_xla, cuda, rocm): tpu/v5e/x4/jax-0.8.1, so a run is judged against runs of"
    " the same versions; 'pytest-accel compare --accel-key' compares two.",
    metavar="NAMES",
)
# The run store (the store feature's; the flaky feature reads it too: with a store, its
# history is the store's runs).
STORE_OPTION = OptionSpec(
    "--accel-store",
    "Keep this run's record in the store at URL (a directory, file://, s3://, gs://,"
    " az://, memory://) and compare with its newest --perf-window runs of this"
    " hardware key; an unreachable store never fails the tests.",
    metavar="URL",
)
HOST_OPTION = OptionSpec(
    "--accel-host",
    "This host's index in a multi-host run (a TPU slice runs one pytest per host), from 0"
    " (default: TPU_WORKER_ID or CLOUD_TPU_TASK_ID; none on a host of its own): in the"
    " record and the store's object name.",
    metavar="N",
)
HOSTS_OPTION = OptionSpec(
    "--accel-hosts",
    "How many hosts the multi-host run has (default: TPU_WORKER_HOSTNAMES counted): a"
    " host that never reported is named.",
    metavar="N",
)
RUN_NAME_OPTION = OptionSpec(
    "--accel-run-name",
    "The name every host of a multi-host run gives (default: GITHUB_RUN_ID-"
    "GITHUB_RUN_ATTEMPT): their records are joined by it.",
    metavar="NAME",
)
HARDWARE_KEY_OPTION = OptionSpec(
    "--accel-key",
    "Name the hardware key the run's timings, costs and flaky history are kept under"
    " (default: platform/device_kind/xN), e.g. a runner label. Its 0.2 name,"
    " --perf-env-key (ini perf_env_key), still works.",
    metavar="KEY",
    default="platform/kind/xN",
    aliases=("--perf-env-key",),
)


def spec_in(specs: Sequence[OptionSpec], flag: str) -> OptionSpec:
    return next(s for s in specs if s.flag == flag)


def given(config: pytest.Config, dest: str) -> Any:
    """An option's command-line value (None: not given).  Before pytest has parsed every
    argument (``pytest_load_initial_conftests``: before pytest opens its own output
    files), from the arguments it knows so far."""
    value = getattr(config.option, dest, None)  # its default until then
    if value is None:
        value = getattr(getattr(config, "known_args_namespace", None), dest, None)
    return value


def raw_setting(
    config: pytest.Config, spec: OptionSpec, environ: Mapping[str, str] | None = None
) -> str | bool | None:
    """The option's value by precedence: command line, env, ini."""
    value = given(config, spec.dest)
    if value is not None:
        return value  # type: ignore[no-any-return]
    environ = os.environ if environ is None else environ
    if spec.env and environ.get(spec.env):
        return environ[spec.env]
    ini = config.getini(spec.dest)
    for alias in spec.aliases:
        if ini in (None, ""):
            ini = config.getini(_dest_of(alias))
    if spec.is_flag:
        return bool(ini)
    return str(ini) if ini not in (None, "") else None


def list_setting(config: pytest.Config, spec: OptionSpec) -> list[str]:
    """A repeatable option's values: the command line's, else the ini's lines."""
    values = given(config, spec.dest)
    if values:
        return [str(value) for value in values]
    return [str(line) for line in config.getini(spec.dest) or []]


def text_setting(config: pytest.Config, spec: OptionSpec) -> str | None:
    """A valued option's text by precedence, None when unset or empty."""
    value = raw_setting(config, spec)
    return None if value in (None, "") else str(value)


def early_setting(early_config: pytest.Config, spec: OptionSpec) -> str | None:
    """An option's value before options are parsed into ``config.option``."""
    value = getattr(early_config.known_args_namespace, spec.dest, None)
    if value is None and spec.env:
        value = os.environ.get(spec.env) or None
    if value is None:
        value = early_config.getini(spec.dest) or None
    return None if value is None else str(value)


def usage_error(message: str) -> pytest.UsageError:
    """pytest's error for a bad option, which a pytest run prints as one line."""
    import pytest

    return pytest.UsageError(capped(message))


def usage_errors() -> tuple[type[Exception], ...]:
    """What to catch as a bad option: ``pytest.UsageError`` once pytest is imported (no
    usage error can have been raised before; the command line tool may never import it)."""
    pytest_module = sys.modules.get("pytest")
    return () if pytest_module is None else (pytest_module.UsageError,)


def choices_error(flag: str, value: str, choices: Collection[str]) -> pytest.UsageError:
    return usage_error(f"{flag}: invalid choice {value!r} (choose from {', '.join(choices)})")


def parse_choice(flag: str, value: str | None, choices: Sequence[str], default: str) -> str:
    choice = (value or default).strip().lower()
    if choice not in choices:
        raise choices_error(flag, choice, choices)
    return choice


MAX_COUNT = 1_000_000  # more devices, workers, shards or rows than any run has
_COUNT = re.compile(r"[0-9]{1,7}")  # ASCII digits only: int() also takes "²" and "١٢"
_NUMBER = re.compile(r"([0-9]{1,9}(\.[0-9]{0,9})?|\.[0-9]{1,9})([eE][+-]?[0-9]{1,2})?")
MAX_NUMBER = 1e9


def count_value(text: str, minimum: int = 0, maximum: int = MAX_COUNT) -> int | None:
    """``text`` as a count: ASCII digits, within ``minimum..maximum``; else None."""
    stripped = text.strip()
    if not _COUNT.fullmatch(stripped):
        return None
    value = int(stripped)
    return value if minimum <= value <= maximum else None


def number_value(text: str) -> float | None:
    """``text`` as a non-negative decimal number of ASCII digits (``0.05``, ``5e-2``)
    up to ``MAX_NUMBER``; no sign, inf or nan.  Else None."""
    stripped = text.strip()
    if not _NUMBER.fullmatch(stripped):
        return None
    value = float(stripped)
    return value if value <= MAX_NUMBER else None


def parse_count(flag: str, value: str, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    count = count_value(value, minimum, maximum)
    if count is None:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
            minimum, f"an integer from {minimum}"
        )
        raise usage_error(f"{flag}: {shown(value)} is not {kind} up to {maximum} (e.g. {flag}=2)")
    return count


def parse_positive_int(flag: str, value: str) -> int:
    return parse_count(flag, value, 1)


def parse_non_negative_int(flag: str, value: str) -> int:
    return parse_count(flag, value, 0)


def parse_non_negative_float(flag: str, value: str) -> float:
    number = number_value(value)
    if number is None:
        raise usage_error(f"{flag}: {shown(value)} is not a non-negative number")
    return number


# A size's unit: binary where it says so (KiB, MiB, ...) and where it is a bare letter (as
# ``docker --memory=2g`` reads it), decimal where it says bytes (kB, MB, GB).
_SIZE = re.compile(r"(?i)([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*([kmgt]?)(i?)(b?)")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def size_value(text: str) -> int | None:
    """``text`` as a number of bytes (``2GiB``, ``2g``, ``512MB``, ``1048576``); None
    where it is not a size."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        return None
    number, unit, binary, in_bytes = found.groups()
    power = _POWERS[unit.lower()]
    if binary and not power:
        return None  # "2i", "2ib": no unit to be binary
    base = 1000 if power and in_bytes and not binary else 1024
    return int(float(number) * base**power)


def parse_size(flag: str, value: str) -> int:
    count = size_value(value)
    if count is None or count <= 0:
        raise usage_error(
            f"{flag}: {shown(value)} is not a size (bytes, or with a unit: 512MiB, 2GiB, 2G)"
        )
    return count


def parse_positive_float(flag: str, value: str) -> float:
    number = number_value(value)
    if number is None or number <= 0:
        raise usage_error(f"{flag}: {shown(value)} is not a positive number")
    return number
