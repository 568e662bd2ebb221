"""The README's option and command tables, generated from the parsers.

    python scripts/readme_tables.py           # rewrite README.md between the markers
    python scripts/readme_tables.py --check   # exit 1 if README.md is out of date

tests/test_readme.py runs the check, so README and parser cannot disagree.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pytest_accel import cli
from pytest_accel.plugin import OPTION_GROUPS

README = Path(__file__).resolve().parent.parent / "README.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def options_table() -> str:
    lines = []
    for group in OPTION_GROUPS:
        lines += [
            f"**{group.title}**",
            "",
            "| option | ini key | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for spec in group.specs:
            flag = spec.flag if spec.is_flag else f"{spec.flag}={spec.metavar}"
            default = spec.default + (f" (env `{spec.env}`)" if spec.env else "")
            lines.append(f"| `{flag}` | `{spec.dest}` | {_cell(default)} | {_cell(spec.help)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def usage(name: str, parser: argparse.ArgumentParser) -> str:
    """A subcommand's synopsis, built from its actions (argparse's own wording varies
    between Python versions)."""
    options_, positionals = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            label = action.metavar or action.dest
            positionals.append(f"{label}..." if action.nargs in ("+", "*") else str(label))
            continue
        flag = action.option_strings[0]
        if action.nargs == 0:
            text = flag
        else:
            value = action.metavar or (
                "{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper()
            )
            text = f"{flag} {value}"
        options_.append(text if action.required else f"[{text}]")
    return " ".join([name, *positionals, *options_])


def commands_table() -> str:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in subparsers._choices_actions}
    lines = ["| command | does |", "| --- | --- |"]
    for name, sub in subparsers.choices.items():
        lines.append(f"| `{_cell(usage(name, sub))}` | {_cell(helps[name])} |")
    return "\n".join(lines) + "\n"


def render(readme: str) -> str:
    for name, table in (("options", options_table()), ("commands", commands_table())):
        pattern = re.compile(
            rf"(<!-- {name}:start[^>]*-->\n).*?(<!-- {name}:end -->)", flags=re.DOTALL
        )
        if not pattern.search(readme):
            raise SystemExit(f"README.md: the <!-- {name}:start --> marker is missing")
        replacement = "\\g<1>\n" + table.replace("\\", "\\\\") + "\n\\g<2>"
        readme = pattern.sub(replacement, readme)
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if current != wanted:
            sys.stderr.write(
                "README.md: tables differ from the parser; run scripts/readme_tables.py\n"
            )
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
