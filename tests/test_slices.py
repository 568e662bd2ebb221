"""Multi-host runs (issue 58): a TPU slice runs one pytest per host. Each host writes
its own record (``run.host``, ``run.slice``); ``merge --hosts``, the store's fold and
``report --from`` join them by the run's name: a test failed if it failed on any host,
its time is the slowest host's, and a host that never reported is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_accel.cli import main
from pytest_accel.perf.offline import baseline_of_stored
from pytest_accel.store.history import newest_runs
from pytest_accel.store.location import open_store

HOSTS = """
import os, time

HOST = int(os.environ["TPU_WORKER_ID"])

def test_steady():
    time.sleep(0.12 * (2 if HOST == 1 else 1))  # host 1 is the slow one

def test_flaky_on_one_host():
    assert HOST != int(os.environ.get("BROKEN_HOST", "-1"))
"""


def _host_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    host: int,
    *args: str,
    hosts: int = 2,
    name: str = "run-1",
) -> pytest.RunResult:
    monkeypatch.setenv("TPU_WORKER_ID", str(host))
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", ",".join(f"t1v-{h}" for h in range(hosts)))
    return pytester.runpytest_inprocess(f"--accel-run-name={name}", *args)


def test_each_host_records_itself_and_merge_joins_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_h=HOSTS)
    monkeypatch.setenv("BROKEN_HOST", "0")
    for host in (0, 1):
        _host_run(pytester, monkeypatch, host, f"--perf-record=h{host}.json")
    record = json.loads((pytester.path / "h1.json").read_text())
    assert record["run"]["host"] == 1
    assert record["run"]["slice"] == {"name": "run-1", "hosts": 2}
    assert main(["merge", "--hosts", "-o", "joined.json", "h0.json", "h1.json"]) == 0
    joined = json.loads((pytester.path / "joined.json").read_text())
    tests = joined["tests"]
    outcome = dict(zip(tests["id"], _values(tests["outcome"]), strict=True))
    assert outcome["test_h.py::test_flaky_on_one_host"] == "failed"  # failed on host 0
    call = dict(zip(tests["id"], tests["call"], strict=True))
    assert call["test_h.py::test_steady"] >= 0.24  # host 1's, the slowest
    assert joined["run"]["hosts"] == [
        {"host": 0, "path": "h0.json"},
        {"host": 1, "path": "h1.json"},
    ]
    assert "missing_hosts" not in joined["run"]


def _values(column: object) -> list[object]:
    if isinstance(column, dict):
        return [
            v for v, n in zip(column["values"], column["counts"], strict=True) for _ in range(n)
        ]
    assert isinstance(column, list)
    return column


def test_a_host_that_never_reported_is_named_and_the_run_is_incomplete(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_h=HOSTS)
    for host in (0, 2):  # host 1 of 3 lost its node
        _host_run(pytester, monkeypatch, host, f"--perf-record=h{host}.json", hosts=3)
    assert main(["merge", "--hosts", "-o", "joined.json", "h0.json", "h2.json"]) == 0
    assert "host(s) 1 of 3 never reported: an infrastructure failure" in capsys.readouterr().err
    joined = json.loads((pytester.path / "joined.json").read_text())
    assert joined["run"]["missing_hosts"] == [1]
    assert joined["run"]["exitstatus"] == 2  # incomplete: no baseline folds it
    # A gate on the joined run does not pass on it.
    capsys.readouterr()
    assert main(["coverage", "joined.json", "--min-pct", "1"]) == 1


def test_a_store_joins_a_slices_hosts_before_folding_and_reporting(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_h=HOSTS)
    store = str(pytester.path / "store")
    for run in range(3):
        for host in (0, 1):
            _host_run(pytester, monkeypatch, host, f"--accel-store={store}", name=f"run-{run}")
    stored = newest_runs(open_store(store), "cpu/x1", 20)
    assert len(stored.objects) == 6
    assert sorted(Path(where).name.rsplit("-", 1)[1] for where, _ in stored.objects) == [
        "host0.json",
        "host0.json",
        "host0.json",
        "host1.json",
        "host1.json",
        "host1.json",
    ]
    folded = baseline_of_stored(stored.name, "cpu/x1", stored.objects, 20)
    assert folded.runs == 3  # three runs of two hosts each
    # The slow host's time is the run's: host 0 alone, twice as fast, is an improvement
    # no host made: judged against the joined runs, host 1 is no regression.
    result = _host_run(pytester, monkeypatch, 1, f"--accel-store={store}", name="run-3")
    result.stdout.fnmatch_lines(["perf: 0 regression(s), *"])
    capsys.readouterr()
    assert main(["report", "--from", store, "-o", str(pytester.path / "page.html")]) == 0
    said = capsys.readouterr().out
    assert "pytest-accel: run run-3: host(s) 0 of 2 never reported" in said
