"""The CI recipes cannot rot and cannot be abused: every workflow in examples/ci/ and
every YAML snippet in the docs parses, each `pytest` / `pytest-accel` command in them is
accepted by the current option parsers (pytest's with this plugin and pytest-xdist, and
the CLI's), zizmor finds nothing of medium severity or above, and the policy of
docs/ci.md holds: no fork's code on an accelerator runner unreviewed, least privilege,
actions pinned to commits, no credentials left in `.git`, a venv for every install,
and pull-request jobs that only restore caches."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_accel import cli
from pytest_accel.flaky import options as flaky_options
from pytest_accel.hardware import options as accel_options
from pytest_accel.perf import options as perf_options
from pytest_accel.scaleout import options as scaleout_options

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "examples" / "ci").glob("*.yml"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")
# An environment variable the workflow sets, e.g. "$SHARD" from a matrix value.
_VARIABLE = re.compile(r"\$\{?[A-Z_]+\}?")
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
    script = _VARIABLE.sub("1", script)
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
    """The arguments of every pytest and pytest-accel command (a venv's too)."""
    pytest_runs, cli_runs = [], []
    for script in scripts:
        for words in command_lines(script):
            program = words[0].rsplit("/", 1)[-1]
            if program == "pytest":
                pytest_runs.append(words[1:])
            elif program.startswith("python") and words[1:3] == ["-m", "pytest"]:
                pytest_runs.append(words[3:])
            elif program == "pytest-accel":
                cli_runs.append(words[1:])
            elif program.startswith("python") and words[1:3] == ["-m", "pytest_accel"]:
                cli_runs.append(words[3:])
    return pytest_runs, cli_runs


def check_pytest_args(pytester: pytest.Pytester, args: list[str]) -> None:
    config = pytester.parseconfig(*args)  # unknown options are usage errors
    opts = accel_options.resolve_options(config, accel_options.known_platforms(config))
    scaleout_options.resolve(config)
    perf_options.resolve(config)
    flaky_options.resolve(config)
    assert opts is not None


def check_cli_args(args: list[str]) -> None:
    try:
        cli.build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"pytest-accel {' '.join(args)}: rejected by the CLI parser ({exc})")


def test_there_are_workflows_for_the_three_tiers_the_sharded_matrix_and_the_stores() -> None:
    assert {p.name for p in WORKFLOWS} == {
        "pr-cpu.yml",
        "nightly-accel.yml",
        "pr-accel.yml",
        "sharded.yml",
        "gke-job.yml",  # a Kubernetes Job: the record crosses back through a bucket
        "container-accel.yml",  # docker run --rm: the history in a store on the host
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


def shell_blocks(path: Path) -> Iterator[str]:
    """The commands of a doc's ``sh`` blocks (a leading ``$ `` prompt dropped)."""
    text = path.read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        yield "\n".join(line.removeprefix("$ ") for line in block.splitlines())


@pytest.mark.requires("xdist")
@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_shell_commands_of_the_docs_are_accepted(pytester: pytest.Pytester, doc: Path) -> None:
    pytest_runs, cli_runs = plugin_commands(list(shell_blocks(doc)))
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
    (_, cli_runs) = plugin_commands(['.venv/bin/pytest-accel merge records/*.json >> "$X"'])
    assert cli_runs == [["merge", "records/*.json"]]
    with pytest.raises(pytest.fail.Exception, match="rejected"):
        check_cli_args(cli_runs[0])  # merge needs -o


def test_commands_are_split_at_operators_and_expressions_filled_in() -> None:
    script = (
        "pip install -e . && pytest --accel-shard=${{ matrix.shard }}/4 -q | tee log\n"
        'pytest-accel compare m.json --baseline b.json \\\n  --format markdown >> "$S"\n'
        '"$RUNNER_TEMP/venv/bin/pytest" --accel-shard="$SHARD/4"'
    )
    assert list(command_lines(script)) == [
        ["pip", "install", "-e", "."],
        ["pytest", "--accel-shard=1/4", "-q"],
        ["tee", "log"],
        ["pytest-accel", "compare", "m.json", "--baseline", "b.json", "--format", "markdown"],
        ["1/venv/bin/pytest", "--accel-shard=1/4"],
    ]


# --- the policy of docs/ci.md ----------------------------------------------------------

_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def workflows_and_snippets() -> list[tuple[str, dict[Any, Any]]]:
    """Every complete workflow: the files of examples/ci/ and the docs' snippets."""
    found = [(p.name, yaml.safe_load(p.read_text(encoding="utf-8"))) for p in WORKFLOWS]
    for doc in DOCS:
        for index, block in enumerate(yaml_blocks(doc)):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and "jobs" in data:
                found.append((f"{doc.name}[{index}]", data))
    return found


def triggers(workflow: dict[Any, Any]) -> set[str]:
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on}
    return set(on) if isinstance(on, (dict, list)) else set()


def steps(workflow: dict[Any, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


@pytest.mark.parametrize(("name", "workflow"), workflows_and_snippets(), ids=lambda v: str(v)[:30])
def test_no_workflow_runs_a_pull_requests_code_on_an_accelerator_runner(
    name: str, workflow: dict[Any, Any]
) -> None:
    forkable = triggers(workflow) & {"pull_request", "pull_request_target", "workflow_run"}
    for job_name, job in workflow["jobs"].items():
        runs_on = job.get("runs-on", "")
        labels = runs_on if isinstance(runs_on, list) else [runs_on]
        if "self-hosted" in labels:
            assert not forkable, f"{name}: job {job_name} runs a pull request on {labels}"


@pytest.mark.parametrize(("name", "workflow"), workflows_and_snippets(), ids=lambda v: str(v)[:30])
def test_every_workflow_has_least_privilege_pinned_actions_and_no_kept_credentials(
    name: str, workflow: dict[Any, Any]
) -> None:
    assert workflow.get("permissions") == {}, f"{name}: no `permissions: {{}}` at the top"
    for job_name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{name}: job {job_name} does not state its permissions"
    for job_name, _, step in steps(workflow):
        uses = step.get("uses")
        if uses:
            assert _PINNED.match(uses), f"{name}: {job_name} uses {uses}, not a commit SHA"
        if uses and uses.startswith("actions/checkout@"):
            with_ = step.get("with", {})
            assert with_.get("persist-credentials") is False, f"{name}: {job_name} keeps the token"


@pytest.mark.parametrize(("name", "workflow"), workflows_and_snippets(), ids=lambda v: str(v)[:30])
def test_installs_go_into_a_venv_and_pull_requests_only_restore_caches(
    name: str, workflow: dict[Any, Any]
) -> None:
    pull_request = bool(triggers(workflow) & {"pull_request", "pull_request_target"})
    for job_name, _, step in steps(workflow):
        for words in command_lines(step.get("run", "")):
            if words[0].rsplit("/", 1)[-1] in ("pip", "pip3"):
                assert "venv/" in words[0], f"{name}: {job_name} installs outside a venv"
        if str(step.get("uses", "")).startswith("actions/cache/save@") and pull_request:
            guard = str(step.get("if", ""))
            assert "github.event_name == 'push'" in guard, f"{name}: a pull request saves a cache"
        assert not str(step.get("uses", "")).startswith("actions/cache@"), (
            f"{name}: actions/cache saves on every event; use cache/restore and cache/save"
        )


def test_the_pinned_shas_carry_their_tag_in_a_comment() -> None:
    for path in WORKFLOWS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40}\s+# v\d+(\.\d+)*$", line), f"{path.name}: {line}"


def zizmor_binary() -> str:
    here = Path(sys.executable).with_name("zizmor")
    found = str(here) if here.exists() else shutil.which("zizmor")
    if found is None:
        pytest.skip("zizmor is not installed (it is in the dev extra)")
    return found


@pytest.mark.processes
def test_zizmor_finds_nothing_of_medium_severity_or_above(tmp_path: Path) -> None:
    paths = [str(p) for p in WORKFLOWS]
    for name, workflow in workflows_and_snippets():
        if not name.endswith(".yml"):  # a docs snippet: audited as a file of its own
            snippet = tmp_path / f"{name.replace('[', '-').replace(']', '')}.yml"
            snippet.write_text(yaml.safe_dump(workflow), encoding="utf-8")
            paths.append(str(snippet))
    completed = subprocess.run(
        [zizmor_binary(), "--offline", "--format", "json", "--min-severity", "medium", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(completed.stdout or "[]")
    assert findings == [], "\n".join(f"{f['ident']}: {f['desc']}" for f in findings)


@pytest.mark.requires("xdist")
def test_the_kubernetes_jobs_pytest_command_is_accepted_too(pytester: pytest.Pytester) -> None:
    """The pod's command, which no workflow step spells out (examples/ci/k8s/)."""
    for path in sorted((ROOT / "examples" / "ci" / "k8s").glob("*.yaml")):
        job = yaml.safe_load(path.read_text(encoding="utf-8"))
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["pytest"], path.name
        check_pytest_args(pytester, container["args"])
