"""README.md and the parsers agree: generated tables are current, every option and
marker the README names exists, and every option the parser has is in the README."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from pytest_accel import cli
from pytest_accel.hardware.markers import MARKERS
from pytest_accel.plugin import OPTION_GROUPS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
ALL_FLAGS = {spec.flag for group in OPTION_GROUPS for spec in group.specs}
# Older names an option still answers to (a rename keeps them working).
ALIASES = {alias for group in OPTION_GROUPS for spec in group.specs for alias in spec.aliases}
PLUGIN_OPTION = re.compile(r"--(?:accel|perf|flaky)[a-z-]*")


def readme_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "readme_tables", ROOT / "scripts/readme_tables.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_tables_match_the_parsers() -> None:
    tables = readme_tables()
    assert tables.render(README) == README, "run: python scripts/readme_tables.py"


def test_every_plugin_option_named_in_the_readme_exists() -> None:
    known = ALL_FLAGS | ALIASES
    named = set(PLUGIN_OPTION.findall(README))
    assert named - known == set()


def test_every_option_of_the_parser_is_in_the_readme() -> None:
    named = set(PLUGIN_OPTION.findall(README))
    assert ALL_FLAGS - named == set()


def test_the_marker_table_lists_exactly_the_registered_markers() -> None:
    section = README.split("## Markers", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = {
        re.sub(r"\(.*", "", marker)
        for cell in first_cells
        for marker in re.findall(r"`([^`]+)`", cell)
    }
    assert named == set(MARKERS)


def test_every_command_in_the_readme_exists() -> None:
    code = re.findall(r"```.*?```", README, flags=re.DOTALL) + re.findall(r"`[^`\n]+`", README)
    command = re.compile(r"(?:^(?:\$ )?|`)pytest-accel (\w+)", flags=re.MULTILINE)
    commands = {c for block in code for c in command.findall(block)}
    assert {"compare", "flaky", "detect"} <= commands
    parser = cli.build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert commands <= set(subcommands.choices)


def test_the_check_notices_a_stale_table() -> None:
    tables = readme_tables()
    stale = README.replace("| `--flaky-window=N` |", "| `--flaky-windw=N` |")
    assert tables.render(stale) != stale


@pytest.mark.parametrize("flag", ["--perf-record", "--flaky-reruns", "--accel-shard"])
def test_each_option_row_shows_its_ini_key(flag: str) -> None:
    dest = flag.removeprefix("--").replace("-", "_")
    assert re.search(rf"\| `{flag}(=[A-Z/]+)?` \| `{dest}` \|", README)


def test_the_changelog_has_a_release_entry_for_the_package_version() -> None:
    from pytest_accel import __version__

    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    assert releases, "no release entry"
    assert releases[0] == __version__
    assert "## [Unreleased]" in changelog


@pytest.mark.processes
def test_scripts_dev_says_what_it_is_doing_while_it_installs(tmp_path: Path) -> None:
    """A first install takes minutes: the script says so, step by step.  A fake
    .venv/bin/python stands in for pip, so nothing is installed."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "dev", tmp_path / "scripts" / "dev")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\necho "pytest 9, jax 0.10"\n')
    fake.chmod(0o755)
    done = subprocess.run(
        [str(tmp_path / "scripts" / "dev"), "setup"], capture_output=True, text=True, check=True
    )
    said = [line.removeprefix("scripts/dev: ") for line in done.stderr.splitlines()]
    assert said[0] == "upgrading pip"
    assert said[1].startswith("installing pytest-accel with its dev extra")
    assert said[-1] == "installed: pytest 9, jax 0.10"
    calls = (fake.parent / "calls").read_text().splitlines()
    assert calls[1] == "-m pip install --quiet -e .[dev]"
    # Installed and current: the next run says nothing about installing.
    again = subprocess.run(
        [str(tmp_path / "scripts" / "dev"), "setup"], capture_output=True, text=True, check=True
    )
    assert again.stderr == ""


def test_every_pytest_accel_command_line_in_the_readme_parses() -> None:
    import shlex

    lines = re.findall(r"^\$ pytest-accel (.+)$", README, flags=re.MULTILINE)
    assert len(lines) >= 5
    parser = cli.build_parser()
    for line in lines:
        args = parser.parse_args(shlex.split(line))  # SystemExit (a failure) if it does not
        assert args.command, line


def exit_table() -> dict[str, dict[int, str]]:
    section = README.split("<!-- exit-statuses:start -->", 1)[1].split("<!-- exit", 1)[0]
    table: dict[str, dict[int, str]] = {}
    for who, status, meaning in re.findall(r"^\| (.+?) \| (\d) \| (.+) \|$", section, re.M):
        table.setdefault(who, {})[int(status)] = meaning
    return table


def test_the_exit_status_table_lists_every_status_pytest_and_the_command_use() -> None:
    from pytest_accel.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

    table = exit_table()
    assert set(table) == {"pytest with the plugin", "`pytest-accel`"}
    # pytest 9 added 6 (--max-warnings); the release matrix runs pytest 8 too.
    assert {int(code) for code in pytest.ExitCode} <= set(table["pytest with the plugin"])
    assert set(table["pytest with the plugin"]) <= set(range(7))
    assert set(table["`pytest-accel`"]) == {EXIT_OK, EXIT_FINDINGS, EXIT_USAGE}


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["--perf-record=x.json", "--accel-report=x.json"], 4),
        (["--accel=tpu"], 4),
        (["--flaky-max-pct=abc"], 4),
        (["-k", "nothing_matches_this"], 5),
        ([], 0),
        # Issue 35's defects, each a usage error before any test now.
        (["--accel-report=r.json/"], 4),
        (["--perf-record=/dev/null"], 4),
        (["--perf-baseline=d.json", "--log-file=d.json"], 4),
        (["--perf-baseline=d.json", "--debug=d.json"], 4),
        (["--perf-baseline=d.json", "--perf-update-baseline"], 4),
        (["--accel-cost-budget=0", "--accel-price=cpu/*=1"], 4),
        (["--accel-price=cpu/*=1_000"], 4),
    ],
)
def test_the_statuses_in_the_table_are_the_ones_a_run_gives(
    pytester: pytest.Pytester, args: list[str], status: int
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    (pytester.path / "d.json").write_text('{"test_ok.py::test_ok": 0.1}')  # a durations map
    assert int(pytester.runpytest(*args).ret) == status
    assert (pytester.path / "d.json").read_text() == '{"test_ok.py::test_ok": 0.1}'


def test_a_bad_lock_timeout_is_status_4_and_the_commands_2(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_accel.cli import EXIT_USAGE, main

    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--perf-record=r.json")
    monkeypatch.setenv("PYTEST_ACCEL_LOCK_TIMEOUT", "nan")
    assert int(pytester.runpytest().ret) == 4
    assert main(["coverage", str(pytester.path / "r.json")]) == EXIT_USAGE


def test_an_interrupted_record_never_passes_a_command_s_gate(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_accel.cli import EXIT_FINDINGS, main

    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--perf-record=r.json", "--perf-baseline=b.json", "--perf-update-baseline")
    record = pytester.path / "r.json"
    data = json.loads(record.read_text())
    data["run"]["exitstatus"] = 2
    record.write_text(json.dumps(data))
    assert main(["coverage", str(record), "--min-pct", "0"]) == EXIT_FINDINGS
    baseline = str(pytester.path / "b.json")
    assert main(["compare", str(record), "--baseline", baseline, "--fail"]) == EXIT_FINDINGS
    capsys.readouterr()
