"""The CI recipes cannot rot: every workflow in examples/ci/ and every YAML snippet in
the docs parses, and each `pytest` / `pytest-accel` command in them is accepted by the
current option parsers (pytest's with this plugin and pytest-xdist, and the CLI's)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import cli, session
from pytest_accel.flaky import options as flaky_options
from pytest_accel.perf import options as perf_options
from pytest_accel.scaleout import options as scaleout_options

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "examples" / "ci").glob("*.yml"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")
_OPERATORS = {"&&", "||", "|", ";", "&"}


def run_scripts(node: Any) -> Iterator[str]:
    """Every ``run:`` script in a workflow, a job or a list of steps."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str):
                yield value
            else:
                yield from run_scripts(value)
    elif isinstance(node, list):
        for value in node:
            yield from run_scripts(value)


def command_lines(script: str) -> Iterator[list[str]]:
    """Simple commands of a shell script, with ``${{ }}`` expressions as ``1`` and
    redirections dropped."""
    script = _EXPRESSION.sub("1", script).replace("\\\n", " ")
    for line in script.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        tokens = list(lexer)
        index = 0
        while index < len(tokens):
            token = tokens[index]
            if token in _OPERATORS:
                if words:
                    yield words
                words = []
            elif token.startswith((">", "<")):
                index += 1  # and its target
            else:
                words.append(token)
            index += 1
        if words:
            yield words


def plugin_commands(scripts: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    pytest_runs, cli_runs = [], []
    for script in scripts:
        for words in command_lines(script):
            if words[0] == "pytest":
                pytest_runs.append(words[1:])
            elif words[:3] == ["python", "-m", "pytest"]:
                pytest_runs.append(words[3:])
            elif words[0] == "pytest-accel":
                cli_runs.append(words[1:])
            elif words[:3] == ["python", "-m", "pytest_accel"]:
                cli_runs.append(words[3:])
    return pytest_runs, cli_runs


def check_pytest_args(pytester: pytest.Pytester, args: list[str]) -> None:
    config = pytester.parseconfig(*args)  # unknown options are usage errors
    opts = session.resolve_options(config, session.known_platforms(config))
    scaleout_options.resolve(config)
    perf_options.resolve(config)
    flaky_options.resolve(config)
    assert opts is not None


def check_cli_args(args: list[str]) -> None:
    try:
        cli.build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"pytest-accel {' '.join(args)}: rejected by the CLI parser ({exc})")


def test_there_are_workflows_for_the_three_tiers_and_the_sharded_matrix() -> None:
    assert {p.name for p in WORKFLOWS} == {
        "pr-cpu.yml",
        "nightly-accel.yml",
        "label-accel.yml",
        "sharded.yml",
    }


@pytest.mark.requires("xdist")
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_command_of_a_workflow_is_accepted_by_the_parsers(
    pytester: pytest.Pytester, workflow: Path
) -> None:
    data = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    assert data.get("on", data.get(True)), f"{workflow.name}: no trigger"
    assert data["jobs"], f"{workflow.name}: no jobs"
    pytest_runs, cli_runs = plugin_commands(list(run_scripts(data)))
    assert pytest_runs or cli_runs, f"{workflow.name}: runs neither pytest nor pytest-accel"
    for args in pytest_runs:
        check_pytest_args(pytester, args)
    for args in cli_runs:
        check_cli_args(args)


def yaml_blocks(path: Path) -> Iterator[str]:
    text = path.read_text(encoding="utf-8")
    yield from re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.requires("xdist")
@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_yaml_snippets_of_the_docs_are_accepted_too(
    pytester: pytest.Pytester, doc: Path
) -> None:
    for block in yaml_blocks(doc):
        pytest_runs, cli_runs = plugin_commands(list(run_scripts(yaml.safe_load(block))))
        assert pytest_runs or cli_runs, f"{doc.name}: a YAML snippet without a command"
        for args in pytest_runs:
            check_pytest_args(pytester, args)
        for args in cli_runs:
            check_cli_args(args)


def test_the_check_rejects_an_option_that_does_not_exist(pytester: pytest.Pytester) -> None:
    (runs, _) = plugin_commands(["pytest --accel=tpu --perf-recrod=r.json"])
    with pytest.raises(pytest.UsageError):
        check_pytest_args(pytester, runs[0])
    (runs, _) = plugin_commands(["pytest --flaky-reruns=many"])
    with pytest.raises(pytest.UsageError, match="--flaky-reruns"):
        check_pytest_args(pytester, runs[0])
    (_, cli_runs) = plugin_commands(['pytest-accel merge records/*.json >> "$X"'])
    assert cli_runs == [["merge", "records/*.json"]]
    with pytest.raises(pytest.fail.Exception, match="rejected"):
        check_cli_args(cli_runs[0])  # merge needs -o


def test_commands_are_split_at_operators_and_expressions_filled_in() -> None:
    script = (
        "pip install -e . && pytest --accel-shard=${{ matrix.shard }}/4 -q | tee log\n"
        'pytest-accel compare m.json --baseline b.json \\\n  --format markdown >> "$S"'
    )
    assert list(command_lines(script)) == [
        ["pip", "install", "-e", "."],
        ["pytest", "--accel-shard=1/4", "-q"],
        ["tee", "log"],
        ["pytest-accel", "compare", "m.json", "--baseline", "b.json", "--format", "markdown"],
    ]
