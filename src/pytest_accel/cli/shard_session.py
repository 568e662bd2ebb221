"""The pytest session ``pytest-accel shard`` runs: the suite collected as
``pytest --accel-shard`` collects it (markers, ``-k``/``-m``, skips, the same durations
file through ``--perf-baseline``), and the plan its sharding hook made, kept."""

from __future__ import annotations

import pytest

from pytest_accel.cli.common import CliError
from pytest_accel.scaleout.sharding import Plan

SHARDING_PLUGIN = "pytest_accel:sharding"


class _Capture:
    """Keeps the sharding hook's plan once collection is done; runs nothing."""

    def __init__(self) -> None:
        self.plan: Plan | None = None
        self.collected = 0

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        sharding = session.config.pluginmanager.get_plugin(SHARDING_PLUGIN)
        self.plan = getattr(sharding, "plan", None)
        self.collected = len(session.items)


def plan_as_pytest(
    durations: str, splits: int, by: str, key: str | None, pytest_args: list[str]
) -> Plan:
    """The plan every ``--accel-shard K/splits`` run with ``pytest_args`` here follows."""
    capture = _Capture()
    args = [
        "-p",
        "pytest_accel",
        "-p",
        "no:terminal",
        "-p",
        "no:cacheprovider",
        "--assert=plain",
        "--collect-only",
        f"--perf-baseline={durations}",
        f"--accel-shard=1/{splits}",
        f"--accel-shard-by={by}",
        *([f"--accel-key={key}"] if key else []),
        *pytest_args,
    ]
    code = pytest.main(args, plugins=[capture])
    if capture.plan is None:
        raise CliError(
            f"pytest stopped before planning the shards (exit status {int(code)}); run"
            f" `pytest --collect-only {' '.join(pytest_args)}` to see why"
        )
    if not sum(len(shard) for shard in capture.plan.shards):
        raise CliError(
            "pytest collected no test to shard here; run this where the suite runs, with"
            " its arguments after --"
        )
    return capture.plan
