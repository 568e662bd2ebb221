"""What every command shares: exit statuses, the error that is one line, argument
types, the regression-rule options, and help that ends with an example."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_accel.perf.analysis.rule import Rule
from pytest_accel.perf.model import TIMES
from pytest_accel.perf.options import RULE_FLAGS, rule_from, rule_settings
from pytest_accel.perf.options import option as perf_option
from pytest_accel.settings import count_value

if TYPE_CHECKING:
    from pytest_accel.perf.offline import Given

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class CliError(Exception):
    """Bad input: printed as one line, exit 2."""


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions to the terminal, and keeps examples as they are written."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        # argparse measures a subcommand at its group's indent, not its own deeper one:
        # a name of nine letters would wrap onto a line of its own.
        if action.help is not argparse.SUPPRESS:
            for sub in self._iter_indented_subactions(action):
                width = len(self._format_action_invocation(sub)) + self._current_indent
                self._action_max_length = max(self._action_max_length, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_command(
    commands: Any, name: str, summary: str, description: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    """A subcommand whose help says what it does and ends with examples."""
    lines = "\n".join(f"  {example}" for example in examples)
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example{'s' if len(examples) > 1 else ''}:\n{lines}",
        formatter_class=HelpFormatter,
    )
    return parser


def positive_int(text: str) -> int:
    value = count_value(text, minimum=1)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def percentage(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage between 0 and 100")
    return value


def cli_flag(plugin_flag: str) -> str:
    """``--perf-threshold`` as this tool spells it: ``--threshold``."""
    return "--" + plugin_flag.removeprefix("--perf-")


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """The regression rule's options, as the plugin's --perf-* ones with their help."""
    group = parser.add_argument_group("the regression rule (as the plugin's --perf-* options)")
    for flag in RULE_FLAGS:
        spec = perf_option(flag)
        extra: dict[str, Any] = {}
        if flag == "--perf-normalize":
            extra["choices"] = ("on", "off")
        elif flag == "--perf-time":
            extra["choices"] = TIMES
        group.add_argument(
            cli_flag(flag), default=None, metavar=spec.metavar, help=spec.help, **extra
        )


def rule_of(args: argparse.Namespace) -> Rule:
    values = {flag: getattr(args, cli_flag(flag)[2:].replace("-", "_")) for flag in RULE_FLAGS}
    return rule_from(values, cli_flag)


def given_of(args: argparse.Namespace) -> Given:
    """The rule options (and ``--new-slow``) given on the command line, alone: applied on
    top of what a record's run was judged by."""
    from pytest_accel.perf.offline import Given

    values = {flag: getattr(args, cli_flag(flag)[2:].replace("-", "_")) for flag in RULE_FLAGS}
    flags = [f"{cli_flag(flag)} {value}" for flag, value in values.items() if value is not None]
    new_slow = getattr(args, "new_slow", None)
    if new_slow is not None:
        flags.append(f"--new-slow {new_slow:g}")
    return Given(rule_settings(values, cli_flag), new_slow, tuple(flags))


def add_store_options(
    parser: argparse.ArgumentParser,
    *,
    store: str = "a run store's runs",
    key: str = "one hardware key's runs (default: every key's)",
    last: int = 20,
    newest: str = "the newest N runs of each key",
) -> None:
    """``--from URL [--key KEY] [--last N]``: a run store's runs as records, beside (or
    in the place of) record files; each command words them for what it does."""
    parser.add_argument("--from", dest="store", metavar="URL", help=store)
    parser.add_argument("--key", metavar="KEY", help=f"with --from: {key}")
    parser.add_argument(
        "--last",
        type=positive_int,
        default=last,
        metavar="N",
        help=f"with --from: {newest} (default {last})",
    )


def stored_records(args: argparse.Namespace) -> list[tuple[str, bytes]]:
    """The newest ``--last`` runs of each key (or ``--key``'s) of the store ``--from``
    names, each its object's URL and bytes; none without ``--from``."""
    if not getattr(args, "store", None):
        return []
    from pytest_accel.store.history import newest_runs
    from pytest_accel.store.location import StoreError, open_store

    try:
        store = open_store(args.store)
        keys = [args.key] if args.key else store.hardware_keys()
        found: list[tuple[str, bytes]] = []
        for key in keys:
            found += newest_runs(store, key, args.last).objects
    except StoreError as exc:
        raise CliError(str(exc)) from None
    return found
