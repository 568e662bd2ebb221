"""pytest hooks that wire the features in; nothing here decides anything.

Each feature declares its options (``OPTIONS``) and registers its own hook classes in
``pytest_configure`` when its options switch it on (``register``), as pytest's
``stepwise`` does.  The facts every feature shares (the ``--accel`` options, detection,
the hardware key) are resolved once, by ``hardware.setup``.  Importing this module must
stay cheap: no jax, numpy, filelock or orjson, and no feature's hook module.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from pytest_accel import _imported_without_rewriting

# Again here, before the features' modules: pytest may have marked the package since it
# was imported (``-p pytest_accel`` after a plugin that imported it).
_imported_without_rewriting()

from pytest_accel import (  # noqa: E402
    cost,
    coverage,
    flaky,
    hardware,
    hookspecs,
    perf,
    report,
    reports,
    scaleout,
    selection,
    store,
)
from pytest_accel.file_uses import FileUse, refuse_shared_files  # noqa: E402
from pytest_accel.files import InputError, names_a_directory  # noqa: E402
from pytest_accel.locking import check_lock_timeout  # noqa: E402
from pytest_accel.session_end import SessionEnd  # noqa: E402
from pytest_accel.settings import OptionGroup, add_group, given, usage_error  # noqa: E402

OPTION_GROUPS: tuple[OptionGroup, ...] = (
    hardware.OPTIONS,
    scaleout.OPTIONS,
    perf.OPTIONS,
    flaky.OPTIONS,
    cost.OPTIONS,
    coverage.OPTIONS,
    selection.OPTIONS,
    report.OPTIONS,
    store.OPTIONS,
)


FEATURE_PLUGIN_PREFIX = "pytest_accel:"


# Features that answer another's question (``hookspecs``) whatever their options: the
# asker may ask before they register their own hooks.
ANSWERING_FEATURES = (report, cost, coverage, flaky, store, selection)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    hardware.register_detectors(pluginmanager)
    for feature in ANSWERING_FEATURES:
        pluginmanager.register(feature, feature.__name__)


def pytest_addoption(parser: pytest.Parser) -> None:
    for group in OPTION_GROUPS:
        add_group(parser, group)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before pytest opens its own output files (``--debug`` truncates its file once the
    arguments are parsed, ``--log-file`` at configure): one file, one use.  Device
    variables are set before conftests (which may import jax or torch) load."""
    refuse_one_file_for_two_uses(early_config)
    hardware.set_devices(early_config)
    scaleout.take_devices(early_config)
    selection.start_early(early_config)


def pytest_configure(config: pytest.Config) -> None:
    try:
        check_lock_timeout()
    except InputError as exc:
        raise usage_error(str(exc)) from None
    # First: among the session ends pytest calls last, the one registered first is last.
    config.pluginmanager.register(SessionEnd(), f"{FEATURE_PLUGIN_PREFIX}session_end")
    hardware.setup(config)
    hardware.register(config)
    scaleout.register(config)
    store.register(config)  # before perf: its baseline is the store's runs
    perf.register(config)
    flaky.register(config)
    cost.register(config)
    coverage.register(config)
    selection.register(config)
    report.register(config)  # its session end is a wrapper: it runs after theirs


# pytest's own options that write a file, where the installed pytest has them (its
# ``--resultlog`` went in pytest 6): (flag, dest, ini key or None).
PYTEST_OUTPUTS = (
    ("--junitxml", "xmlpath", None),
    ("--report-log", "report_log", None),
    ("--log-file", "log_file", "log_file"),
    ("--debug", "debug", None),
    ("--resultlog", "resultlog", None),
)
# Files GitHub Actions has each step append to.
GITHUB_FILES = ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT")


def refuse_one_file_for_two_uses(config: pytest.Config) -> None:
    """Two options naming one file, one of them writing it, stop the run before any test
    (exit 4): ``--accel-report=b.json`` would replace the baseline ``b.json`` with HTML,
    ``--log-file=b.json`` empty it.  pytest's own outputs and the files GitHub Actions
    appends to count too; an output that ends like a directory (``r.json/``) is one."""
    uses = [
        *perf.file_uses(config),
        *flaky.file_uses(config),
        *cost.file_uses(config),
        *report.file_uses(config),
        *selection.file_uses(config),
    ]
    for flag, dest, ini in PYTEST_OUTPUTS:
        path = given(config, dest)
        if not path and ini is not None:
            path = _ini(config, ini)
        if path:
            uses.append(FileUse(flag, str(path), writes=True))
    for variable in GITHUB_FILES:
        path = os.environ.get(variable)
        if path:
            uses.append(FileUse(variable, path, writes=True))
    try:
        refuse_shared_files(uses)
    except InputError as exc:
        raise usage_error(str(exc)) from None
    for use in uses:
        if use.writes and names_a_directory(use.path):
            raise usage_error(
                f"{use.name}: {use.path}: ends like a directory ('/', '.' or '..');"
                " give a file path"
            )


def _ini(config: pytest.Config, name: str) -> str | None:
    try:
        value = config.getini(name)
    except ValueError:  # not an ini key of this pytest
        return None
    return str(value) if value else None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None]:
    """After every feature's session-end work and pytest's own last line: the job
    summary, written once under one budget, and why a plugin option set the exit status."""
    result = yield
    reports.write_job_summary(session)
    reports.write_exit_reasons(session.config)
    return result


def pytest_unconfigure(config: pytest.Config) -> None:
    """Features go with their session (registered as ``pytest_accel:*``, as junitxml's
    plugin is unregistered at unconfigure); the process gets its variables and its
    SIGTERM handler back at the config's cleanup (``process_state``)."""
    for name, registered in config.pluginmanager.list_name_plugin():
        if name.startswith(FEATURE_PLUGIN_PREFIX) and registered is not None:
            config.pluginmanager.unregister(registered)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    from pytest_accel.scaleout.plugin import auto_workers

    return auto_workers(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    hardware.configure_node(node)
