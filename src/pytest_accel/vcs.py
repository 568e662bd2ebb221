"""Which commit and branch a run is of: the CI's variables, else git, else none.  Read
by the timing records and by the dependency map (its commit is what a selection
diffs against)."""

from __future__ import annotations

from collections.abc import Mapping

_CI_VARIABLES = (
    ("GITHUB_SHA", ("GITHUB_HEAD_REF", "GITHUB_REF_NAME")),
    ("CI_COMMIT_SHA", ("CI_COMMIT_REF_NAME",)),  # GitLab
    ("BUILDKITE_COMMIT", ("BUILDKITE_BRANCH",)),
    ("CIRCLE_SHA1", ("CIRCLE_BRANCH",)),
    ("GIT_COMMIT", ("GIT_BRANCH",)),  # Jenkins
)


def vcs_info(environ: Mapping[str, str], cwd: str | None = None) -> tuple[str | None, str | None]:
    """Commit and branch from CI variables, else from git, else (None, None)."""
    for commit_var, branch_vars in _CI_VARIABLES:
        commit = environ.get(commit_var)
        if commit:
            branch = next((environ[v] for v in branch_vars if environ.get(v)), None)
            return commit, branch
    return _git_head(cwd)


def _git_head(cwd: str | None) -> tuple[str | None, str | None]:
    """The commit and branch of ``cwd``'s checkout, from one ``git`` process (a detached
    HEAD has no branch)."""
    lines = (_git(["rev-parse", "HEAD", "--abbrev-ref", "HEAD"], cwd, timeout=5) or "").split()
    if len(lines) != 2:
        return None, None
    commit, branch = lines
    return commit, None if branch == "HEAD" else branch


def ancestors(ref: str, cwd: str | None = None, depth: int = 1000) -> list[str] | None:
    """``ref`` and the commits before it, nearest first (``git rev-list``), at most
    ``depth``; None where git cannot say (no repository, an unknown ref)."""
    out = _git(["rev-list", f"--max-count={depth}", ref, "--"], cwd, timeout=30)
    return None if out is None else out.split()


def _git(args: list[str], cwd: str | None, *, timeout: float) -> str | None:
    """``git``'s output, or None where it failed or is not there."""
    import subprocess  # only without CI variables; `compare` never asks

    try:
        completed = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout if completed.returncode == 0 else None
