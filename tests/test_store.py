"""The run store (``--accel-store``, issue 58): each run's record a new object in a
directory or an S3 bucket, the newest runs of the key folded into the next run's
baseline; a store that fails never fails the tests.  S3 is a real server: moto's, on
loopback, started by these tests."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pytest_accel.cli import main
from pytest_accel.files import InputError
from pytest_accel.perf.formats.baseline import load_baseline
from pytest_accel.perf.offline import StoredBaseline, baseline_json, baseline_of_stored
from pytest_accel.store.history import compact, newest_runs, run_object
from pytest_accel.store.index import INDEX, index_bytes, parse_index
from pytest_accel.store.layout import compact_stamp, parse_name, to_prune
from pytest_accel.store.location import (
    Store,
    StoreLocation,
    open_store,
    parse_location,
    redact,
)

SUITE = """
import os, time

def test_steady():
    time.sleep(0.15 * float(os.environ.get("SLOWER", "1")))

def test_quick():
    pass
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def moto_server() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """moto's S3 server on loopback, in a process of its own (a writer killed in the
    middle of an upload, or the server stopped, is then what it is for real): the
    process and its endpoint."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield server, f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    with moto_server() as (_, endpoint), _one_botocore_loader():
        yield endpoint


@contextlib.contextmanager
def _one_botocore_loader() -> Iterator[None]:
    """The runs in this process share botocore's loader: each would parse the same S3
    service model again (about 0.08 CPU-s a run); each still opens its own session and
    client, as a run in its own process does."""
    import botocore.loaders
    import botocore.session

    loader = botocore.loaders.create_loader()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", lambda *args, **kwargs: loader)
        yield


def _s3_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def bucket(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket of the server; the process's AWS variables point at it."""
    import s3fs

    _s3_environment(monkeypatch, s3_server)
    name = f"runs-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(name)
    return name


def load_history(url: str, count: int) -> StoredBaseline:
    """The baseline a run with ``--accel-store=url`` folds (cpu/x1's newest runs)."""
    runs = newest_runs(open_store(url), "cpu/x1", count)
    return baseline_of_stored(runs.name, runs.key, runs.objects, count)


def _objects(url: str) -> list[str]:
    store = open_store(url)
    return [run.name for key in store.hardware_keys() for run in store.runs_of(key)]


def test_a_directory_store_keeps_each_run_and_judges_the_next_against_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_s=SUITE)
    store = str(pytester.path / "store")
    first = pytester.runpytest_inprocess("-q", f"--accel-store={store}")
    first.assert_outcomes(passed=2)
    # Shown under -q: it names what became of the user's store.
    first.stdout.fnmatch_lines(
        [
            f"perf: no run of cpu/x1 in the store {store} yet (this run starts it)",
            f"store: record of 2 test(s) sent to {store}/runs/cpu%2Fx1/*.json",
        ]
    )
    for _ in range(2):
        pytester.runpytest_inprocess(f"--accel-store={store}").assert_outcomes(passed=2)
    quietest = pytester.runpytest_inprocess("-qq", f"--accel-store={store}")
    assert "store:" not in quietest.stdout.str()  # -qq: pytest's own outcome alone
    names = _objects(store)
    assert len(names) == 4
    assert len(set(names)) == 4  # one new object a run
    monkeypatch.setenv("SLOWER", "4")
    slower = pytester.runpytest_inprocess(f"--accel-store={store}", "--perf-fail")
    assert slower.ret == 1
    slower.stdout.fnmatch_lines(
        [
            "REGRESSION test test_s.py::test_steady: *",
            "perf: 1 regression(s), *",
            f"perf: baseline: the newest 4 run(s) of cpu/x1 in the store {store}",
        ]
    )
    assert len(_objects(store)) == 5
    # The page of the newest three runs, side by side, each judged as it was.
    page = pytester.path / "page.html"
    assert main(["report", "--from", store, "--last", "3", "-o", str(page)]) == 0
    shown = page.read_text()
    newest_three = sorted(_objects(store))[-3:]
    assert all(Path(name).name in shown for name in newest_three)
    assert Path(sorted(_objects(store))[0]).name not in shown


@pytest.mark.processes
def test_a_store_folds_the_baseline_a_file_of_the_same_records_holds(
    pytester: pytest.Pytester,
) -> None:
    """The same runs as objects of a store (file://) and as a baseline file built from
    their records: one baseline, so one verdict on any run."""
    pytester.makepyfile(test_s=SUITE)
    store = f"file://{pytester.path / 'store'}"
    for index in range(4):
        pytester.runpytest_inprocess(
            f"--accel-store={store}", f"--perf-record=r{index}.json"
        ).assert_outcomes(passed=2)
    records = [str(pytester.path / f"r{index}.json") for index in range(4)]
    assert main(["baseline", *records, "--into", str(pytester.path / "b.json")]) == 0
    from_file = baseline_json(load_baseline(pytester.path / "b.json"))
    stored = load_history(store, 20)
    assert stored.runs == 4
    assert baseline_json(stored.baseline) == from_file
    # The last run was judged against the first three as the store held them.
    last = json.loads((pytester.path / "r3.json").read_text())["comparison"]
    assert main(["baseline", *records[:3], "--into", str(pytester.path / "b3.json")]) == 0
    compared = pytester.run(
        sys.executable, "-m", "pytest_accel", "compare", records[3], "--baseline", "b3.json"
    )
    assert compared.ret == 0
    compared.stdout.fnmatch_lines([f"perf: 0 regression(s), * {last['compared']} test(s) *"])


@pytest.mark.requires("s3fs", "moto")  # the S3 backend and its server: the dev extra
def test_runs_go_to_an_s3_bucket_and_come_back_as_the_baseline(
    pytester: pytest.Pytester, bucket: str
) -> None:
    pytester.makepyfile(test_s=SUITE)
    url = f"s3://{bucket}/my-repo"
    first = pytester.runpytest_inprocess(f"--accel-store={url}")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([f"store: record of 2 test(s) sent to {url}/runs/cpu%2Fx1/*.json"])
    for _ in range(2):
        pytester.runpytest_inprocess(f"--accel-store={url}").assert_outcomes(passed=2)
    second = pytester.runpytest_inprocess(f"--accel-store={url}", "--perf-record=r.json")
    second.stdout.fnmatch_lines(
        [
            "perf: 0 regression(s), * 2 test(s) compared *",
            f"perf: baseline: the newest 3 run(s) of cpu/x1 in the store {url}",
        ]
    )
    assert len(_objects(url)) == 4
    # The page of the newest run, from the bucket, on another machine.
    page = pytester.path / "page.html"
    assert main(["report", "--from", url, "-o", str(page)]) == 0
    assert "test_s.py::test_steady" in page.read_text()


@pytest.mark.requires("s3fs", "moto")  # the S3 backend and its server: the dev extra
def test_an_unreachable_store_keeps_the_record_and_says_how_to_send_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, bucket: str
) -> None:
    """Nothing listens at the endpoint: the tests run and the exit status is theirs;
    the record is kept on disk, and ``store push`` sends it once the store is back.
    The URL's credentials are never shown."""
    pytester.makepyfile(test_s=SUITE + "\ndef test_broken():\n    assert False\n")
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    url = f"s3://{bucket}/my-repo"
    result = pytester.runpytest_inprocess(f"--accel-store={url}?X-Amz-Signature=s3cr3t")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 1  # the failing test's, not the store's
    output = result.stdout.str() + result.stderr.str()
    assert "s3cr3t" not in output
    result.stdout.fnmatch_lines(
        [
            f"store: could not list {url}: *; this run is compared with nothing",
            f"store: could not write to {url}: *; the record of 3 test(s) is kept at *: send"
            f" it with 'pytest-accel store push * --to {url}'",
        ]
    )
    kept = next(line for line in result.stdout.lines if "is kept at" in line)
    path = kept.split("is kept at ", 1)[1].split(": send it", 1)[0]
    assert json.loads(Path(path).read_text())["run"]["exitstatus"] == 1
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # the store is back
    assert main(["store", "push", path, "--to", url]) == 0
    assert main(["store", "push", path, "--to", url]) == 0  # sent twice: there once
    assert len(_objects(url)) == 1


@pytest.mark.requires("s3fs", "moto")  # the S3 backend and its server: the dev extra
def test_a_bucket_that_refuses_writes_fails_no_test(pytester: pytest.Pytester, bucket: str) -> None:
    pytester.makepyfile(test_s=SUITE)
    url = f"s3://{bucket}-gone/my-repo"  # no such bucket: every request refused
    result = pytester.runpytest_inprocess(f"--accel-store={url}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [f"store: could not write to {url}: *; the record of 2 test(s) is kept at *"]
    )


@pytest.mark.requires("s3fs", "moto")  # the S3 backend and its server: the dev extra
@pytest.mark.processes
def test_the_server_stopped_mid_run_costs_the_upload_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server of its own, stopped by a test of the run after the baseline was read."""
    import s3fs

    with moto_server() as (server, endpoint):
        _s3_environment(monkeypatch, endpoint)
        s3fs.S3FileSystem(skip_instance_cache=True).mkdir("kept")
        monkeypatch.setenv("SERVER_PID", str(server.pid))
        monkeypatch.setenv("SERVER_PORT", endpoint.rsplit(":", 1)[1])
        pytester.makepyfile(
            test_s="""
            import os, signal, socket, time

            def test_stops_the_server():
                os.kill(int(os.environ["SERVER_PID"]), signal.SIGKILL)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # gone once nothing answers
                    try:
                        socket.create_connection(
                            ("127.0.0.1", int(os.environ["SERVER_PORT"])), timeout=1
                        ).close()
                    except OSError:
                        return
                    time.sleep(0.05)
                raise AssertionError("the server still answers")
            """
        )
        result = pytester.runpytest_inprocess("--accel-store=s3://kept/repo")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "perf: no run of cpu/x1 in the store s3://kept/repo yet (this run starts it)",
            "store: could not write to s3://kept/repo: *; the record of 1 test(s) is kept*",
        ]
    )


# Writers as the plugin writes at a session's end, one process each: forked from one
# that imported the store's backend once (no thread runs yet when it forks), so 32
# processes cost one import; each opens the store anew, waits for the others, and
# sends its record.  They share botocore's loader, filled before the fork: each would
# parse the same S3 service model again, half of the 5 CPU-s the 32 took.
WRITERS = """
import os, sys, time
from pathlib import Path
from pytest_accel.store.location import open_store

url, start, pairs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
if url.startswith("s3://"):
    import botocore.loaders, botocore.session, s3fs  # noqa: F401  (before the fork)

    loader = botocore.loaders.create_loader()
    botocore.session.create_loader = lambda *args, **kwargs: loader
    botocore.session.get_session().create_client("s3")  # a plain client: no thread
children = []
for name, path in zip(pairs[::2], pairs[1::2]):
    pid = os.fork()
    if pid == 0:
        store = open_store(url)
        data = Path(path).read_bytes()
        time.sleep(max(0.0, start - time.time()))  # all of them at once
        try:
            store.put_new(name, data)
        except BaseException:
            os._exit(1)
        os._exit(0)
    children.append(pid)
sys.exit(max(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))
"""


def _records(pytester: pytest.Pytester, count: int) -> list[Path]:
    """``count`` records of distinct runs, from one real one."""
    pytester.makepyfile(test_s=SUITE)
    pytester.runpytest_inprocess("--perf-record=r.json").assert_outcomes(passed=2)
    data = json.loads((pytester.path / "r.json").read_text())
    paths = []
    for index in range(count):
        data["run"]["id"] = f"{index:016x}"
        data["run"]["started"] = f"2026-11-20T{index // 60:02d}:{index % 60:02d}:00Z"
        path = pytester.path / f"r{index}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    "where", ["directory", pytest.param("s3", marks=pytest.mark.requires("s3fs", "moto"))]
)
@pytest.mark.processes
def test_32_writers_at_once_lose_nothing(
    pytester: pytest.Pytester, where: str, request: pytest.FixtureRequest
) -> None:
    """32 processes send a run each at the same moment: 32 objects, each a whole
    record, and the next run folds them."""
    if where == "s3":
        url = f"s3://{request.getfixturevalue('bucket')}/repo"
    else:
        url = str(pytester.path / "store")
    paths = _records(pytester, 32)
    names = [run_object(json.loads(path.read_text()), path.read_bytes()).name for path in paths]
    pairs = [part for name, path in zip(names, paths, strict=True) for part in (name, str(path))]
    start = str(time.time() + 1.0)
    writers = subprocess.run(
        [sys.executable, "-c", WRITERS, url, start, *pairs], timeout=120, check=False
    )
    assert writers.returncode == 0
    assert sorted(_objects(url)) == sorted(names)
    history = load_history(url, 40)
    assert history.runs == 32
    assert history.notes == ()


@pytest.mark.requires("s3fs", "moto")  # the S3 backend and its server: the dev extra
@pytest.mark.processes
def test_a_writer_killed_in_an_upload_leaves_nothing_half_written(
    pytester: pytest.Pytester, bucket: str
) -> None:
    """kill -9 while 32 MiB go up: the object is whole or absent, never read cut."""
    url = f"s3://{bucket}/repo"
    script = (
        "import sys, s3fs; fs = s3fs.S3FileSystem(skip_instance_cache=True);"
        " print('go', flush=True);"
        f" fs.pipe_file('{bucket}/repo/runs/cpu%2Fx1/20261129T000000Z-big.json', b'x' * 2**25)"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert writer.stdout is not None
    assert writer.stdout.readline() == b"go\n"
    time.sleep(0.2)
    writer.kill()
    writer.wait(timeout=30)
    writer.stdout.close()
    store = open_store(url)
    for run in store.runs_of("cpu/x1"):
        held = store.read([run.name])[run.name]
        assert isinstance(held, bytes)
        assert len(held) == 2**25
    history = load_history(url, 20)  # a whole object that is no record
    assert history.runs == 0
    assert all("passed over" in note for note in history.notes)


def test_a_directory_writer_leaves_no_partial_object_and_never_overwrites(
    tmp_path: Path,
) -> None:
    store = open_store(str(tmp_path))
    name = "runs/cpu%2Fx1/20261129T000000Z-abc.json"
    store.put_new(name, b"{}")
    with pytest.raises(Exception, match="exists already"):
        store.put_new(name, b"[]")
    assert (tmp_path / name).read_bytes() == b"{}"
    # What a writer killed before its link leaves is hidden, and no run.
    (tmp_path / "runs/cpu%2Fx1/.20261129T000001Z-def.json.123.part").write_bytes(b"{")
    assert [run.name for run in store.runs_of("cpu/x1")] == [name]


def test_names_sort_by_time_and_say_their_run() -> None:
    run = parse_name("runs/tpu%2Fv5e-8/20261129T021442Z-0123abcd-host3.json")
    assert run is not None
    assert (run.key, run.started, run.run_id, run.host) == (
        "tpu/v5e-8",
        "20261129T021442Z",
        "0123abcd",
        3,
    )
    assert run.name == "runs/tpu%2Fv5e-8/20261129T021442Z-0123abcd-host3.json"
    assert parse_name("runs/cpu%2Fx1/.20261129T021442Z-0123abcd.json.1.part") is None
    assert compact_stamp("2026-11-29T02:14:42Z") == "20261129T021442Z"


def test_a_url_is_shown_without_its_credentials() -> None:
    location = parse_location("s3://AKIA123:hunter2@bucket/repo?X-Amz-Signature=abc#x")
    assert location.shown == "s3://bucket/repo"
    assert "hunter2" not in redact("https://AKIA123:hunter2@host/p?sig=abc&sv=1")
    assert "abc" not in redact("https://host/p?X-Amz-Signature=abc")
    assert "abc" not in redact("Bucket: b?X-Amz-Signature%3Dabc/runs")
    assert StoreLocation("/tmp/runs", "file").shown == "/tmp/runs"


def test_a_store_url_no_backend_serves_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s=SUITE)
    result = pytester.runpytest_inprocess("--accel-store=ftp2://host/runs")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--accel-store: ftp2://host/runs: no store for ftp2://*"])


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_under_xdist_the_controller_sends_one_record_of_every_worker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_s=SUITE, test_t="def test_other():\n    pass\n")
    store = str(pytester.path / "store")
    result = pytester.runpytest_inprocess("-n", "2", f"--accel-store={store}")
    result.assert_outcomes(passed=3)
    (name,) = _objects(store)
    record = json.loads((Path(store) / name).read_text())
    assert record["run"]["workers"] == 2
    assert sorted(record["tests"]["id"]) == [
        "test_s.py::test_quick",
        "test_s.py::test_steady",
        "test_t.py::test_other",
    ]


@pytest.mark.processes
def test_an_interrupted_run_is_kept_as_one_and_never_folded_as_passing(
    pytester: pytest.Pytester,
) -> None:
    """A run cut short (SIGTERM, as a preempted VM's shutdown sends; Ctrl-C) still
    sends what it finished, marked interrupted; the next run passes over it."""
    pytester.makepyfile(
        test_s=SUITE,
        test_u="""
        import os, signal

        def test_preempted():
            os.kill(os.getpid(), signal.SIGTERM)

        def test_never_ran():
            pass
        """,
    )
    store = str(pytester.path / "store")
    cut = pytester.runpytest_subprocess(f"--accel-store={store}", "-p", "no:randomly")
    assert cut.ret == pytest.ExitCode.INTERRUPTED
    (name,) = _objects(store)
    record = json.loads((Path(store) / name).read_text())
    assert record["run"]["exitstatus"] == 2
    assert "test_u.py::test_never_ran" not in record["tests"]["id"]
    following = pytester.runpytest_subprocess(
        f"--accel-store={store}", "-p", "no:randomly", "-k", "not preempted"
    )
    following.assert_outcomes(passed=3)
    following.stdout.fnmatch_lines(
        [f"perf: {store}/{name}: not added: an interrupted run (exit status 2) adds nothing"]
    )
    folded = load_history(store, 20)
    assert folded.runs == 1  # the run after it; the interrupted one is passed over
    assert folded.notes == (
        f"{store}/{name}: not added: an interrupted run (exit status 2) adds nothing",
    )


def test_a_memory_store_keeps_runs_for_the_process(pytester: pytest.Pytester) -> None:
    """``memory://``: a store for one process (a notebook, a test of one's own CI)."""
    # Imported here: pytester's in-process runs drop the modules a run imported, and
    # with them fsspec's memory, which lives as long as its module.
    import fsspec.implementations.memory  # noqa: F401

    pytester.makepyfile(test_s=SUITE)
    url = f"memory://runs-{uuid.uuid4().hex[:8]}"
    for _ in range(3):
        pytester.runpytest_inprocess(f"--accel-store={url}").assert_outcomes(passed=2)
    result = pytester.runpytest_inprocess(f"--accel-store={url}")
    result.stdout.fnmatch_lines(
        [f"perf: baseline: the newest 3 run(s) of cpu/x1 in the store {url}"]
    )


def test_the_runner_shows_the_job_summary_and_annotations_the_pod_run_made(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run in a pod (no GitHub variables: nothing crosses back but the store) keeps
    its job summary and workflow commands beside its record; ``report --from`` on the
    runner shows them as the run would have: the same bytes."""
    pytester.makepyfile(test_s=SUITE)
    store = str(pytester.path / "store")
    for variable in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(variable, raising=False)
    for _ in range(3):
        pytester.runpytest_inprocess(f"--accel-store={store}").assert_outcomes(passed=2)
    kept = sorted((Path(store) / "runs" / "cpu%2Fx1").glob("*.summary.md"))
    assert len(kept) == 3
    assert "pytest-accel" in kept[-1].read_text()  # made where no summary file was named
    # The run under judgement, as a local run under GitHub Actions would show it.
    monkeypatch.setenv("SLOWER", "4")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "local.md"))
    local = pytester.runpytest_inprocess(f"--accel-store={store}")
    local.assert_outcomes(passed=2)
    shown = [line for line in local.stdout.lines if line.startswith("::warning ")]
    assert len(shown) == 1
    assert "test_s.py::test_steady" in shown[0]
    # On the runner: the summary file is its own, empty.
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "runner.md"))
    capsys.readouterr()
    assert main(["report", "--from", store, "-o", str(pytester.path / "page.html")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.startswith("::")] == shown
    runner = (pytester.path / "runner.md").read_bytes()
    assert b"REGRESSION" in runner or b"regress" in runner
    assert runner == (pytester.path / "local.md").read_bytes()


def test_export_writes_one_typed_line_per_test_per_run(pytester: pytest.Pytester) -> None:
    """From record files and from a store: a warehouse loads every line with one
    schema (the same fields, each of one type or null, in every line)."""
    pytester.makepyfile(
        test_s=SUITE,
        test_f="""
        import pytest

        class TestK:
            def test_fails(self):
                assert False
        """,
    )
    store = str(pytester.path / "store")
    for index in range(2):
        pytester.runpytest_inprocess(f"--accel-store={store}", f"--perf-record=r{index}.json")
    out = pytester.path / "runs.jsonl"
    assert main(["export", "r0.json", "--from", store, "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 * 3  # three tests, a record and the store's two runs
    fields = set(rows[0])
    assert all(set(row) == fields for row in rows)
    for field in fields:
        kinds = {type(row[field]).__name__ for row in rows} - {"NoneType"}
        assert len(kinds) <= 1 or kinds == {"int", "float"}, (field, kinds)
    failing = [row for row in rows if row["test"] == "test_f.py::TestK::test_fails"]
    assert {row["outcome"] for row in failing} == {"failed"}
    assert {row["class"] for row in failing} == {"test_f.py::TestK"}
    assert {row["exitstatus"] for row in rows} == {1}
    assert {row["source"] for row in rows} == {
        "r0.json",
        *(f"{store}/{name}" for name in _objects(store)),
    }
    assert {row["run_id"] for row in rows} == {
        json.loads((pytester.path / f"r{index}.json").read_text())["run"]["id"] for index in (0, 1)
    }


def test_prune_keeps_the_newest_runs_and_their_companions(pytester: pytest.Pytester) -> None:
    paths = _records(pytester, 5)
    store = str(pytester.path / "store")
    assert main(["store", "push", *map(str, paths), "--to", store]) == 0
    assert len(_objects(store)) == 5
    assert main(["store", "prune", store, "--keep-runs", "2"]) == 0
    kept = _objects(store)
    assert len(kept) == 2
    assert main(["store", "prune", store, "--keep-days", "1"]) == 0  # all from 2026-11-20
    assert len(_objects(store)) == 1  # the newest stays: a key keeps a history
    assert sorted(kept)[-1] == _objects(store)[0]


def test_to_prune_by_runs_and_by_days() -> None:
    runs = [parse_name(f"runs/k/2026112{day}T000000Z-{day:04x}.json") for day in range(5)]
    assert all(runs)
    found = [run for run in runs if run is not None]
    now = time.mktime(time.strptime("20261125T000000", "%Y%m%dT%H%M%S")) - time.timezone
    assert [r.run_id for r in to_prune(found, 3, None, now)] == ["0000", "0001"]
    assert [r.run_id for r in to_prune(found, None, 2.5, now)] == ["0000", "0001", "0002"]
    assert to_prune(found[:1], 0, 0.0, now) == []  # never the last


@pytest.mark.processes
def test_a_run_killed_without_a_word_leaves_its_finished_tests_as_an_interrupted_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """kill -9 (an OOM kill, a lost node): no session end, no record; the tests finished
    before it went up as they finished, and are read as an interrupted run."""
    pytester.makepyfile(
        test_k="""
        import os, signal, time

        def test_one():
            pass

        def test_two():
            pass

        def test_killed():
            time.sleep(1)  # it ran a while (the finished tests went up meanwhile)
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    store = str(pytester.path / "store")
    killed = pytester.runpytest_subprocess(
        f"--accel-store={store}", "--accel-store-progress=0", "-p", "no:randomly"
    )
    assert killed.ret == -9
    unfinished = open_store(store).unfinished_of("cpu/x1")
    assert len(unfinished) == 1
    (parts,) = unfinished.values()
    rows = [
        json.loads(line) for part in parts for line in (Path(store) / part).read_text().splitlines()
    ]
    assert [(row["test"], row["outcome"]) for row in rows] == [
        ("test_k.py::test_one", "passed"),
        ("test_k.py::test_two", "passed"),
    ]
    capsys.readouterr()
    assert main(["store", "list", store]) == 0
    listed = capsys.readouterr().out
    assert "cpu/x1: 0 run(s), 1 that never ended" in listed
    assert "interrupted: no record (the run was killed); 2 test(s) finished" in listed
    # Never a passing run: the next run has nothing to compare with.
    pytester.makepyfile(test_k="def test_one():\n    pass\n")
    following = pytester.runpytest_subprocess(f"--accel-store={store}")
    following.stdout.fnmatch_lines(
        ["perf: no run of cpu/x1 in the store * yet (this run starts it)"]
    )
    # The page is the newest run that ended, and says a later one never did.
    capsys.readouterr()
    assert main(["report", "--from", store, "-o", str(pytester.path / "page.html")]) == 0
    assert "a later run never ended" not in capsys.readouterr().out  # the killed one is older
    # A run that ends takes its progress with it.
    assert len(open_store(store).unfinished_of("cpu/x1")) == 1
    assert sorted(p.name for p in (Path(store) / "runs" / "cpu%2Fx1").glob("*.progress-*")) == [
        Path(part).name for part in parts
    ]
    # Killed again, after a run that ended: the page of that run says so.
    pytester.makepyfile(
        test_k="import os, signal, time\n\ndef test_one():\n    pass\n\n"
        "def test_killed():\n    time.sleep(1)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    again = pytester.runpytest_subprocess(f"--accel-store={store}", "--accel-store-progress=0")
    assert again.ret == -9
    capsys.readouterr()
    assert main(["report", "--from", store, "-o", str(pytester.path / "page.html")]) == 0
    assert "pytest-accel: a later run never ended (runs/cpu%2Fx1/" in capsys.readouterr().out


WOBBLY = """
import pathlib

def test_wobbly():
    count = pathlib.Path("count")
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    assert n > 0  # fails on its very first try only

def test_fine():
    pass
"""


@pytest.mark.requires("xdist")
@pytest.mark.processes
def test_the_flaky_history_is_the_stores_runs(pytester: pytest.Pytester) -> None:
    """No --flaky-history: the history is the store's runs (and this one); under xdist
    the workers know the store's tests (--flaky-new-runs reruns only a test the store
    has never seen)."""
    pytester.makepyfile(test_f=WOBBLY)
    store = f"--accel-store={pytester.path / 'store'}"
    first = pytester.runpytest_inprocess(store, "--flaky-reruns=1", "-p", "no:randomly")
    first.stdout.fnmatch_lines(["FLAKY test_f.py::test_wobbly (2 attempts: failed, passed)"])
    pytester.makepyfile(test_new="def test_added():\n    pass\n")
    second = pytester.runpytest_inprocess(
        store, "--flaky-reruns=1", "--flaky-new-runs=3", "-n", "2"
    )
    second.assert_outcomes(passed=3)
    # The history is the store's run and this one, as a history file of them would be.
    second.stdout.fnmatch_lines(
        [
            # The workers knew the store's tests: one new test, not three.
            "new tests: 1 ran 3 times each (--flaky-new-runs); 0 of them flaky",
            "flaky: 0 of 3 test(s) (0.00%) on cpu: 0 in this run, 0 more across the history's"
            " 2 run(s)",
        ]
    )


def _indexed_store(url: str, pytester: pytest.Pytester, runs: int) -> list[str]:
    paths = _records(pytester, runs)
    assert main(["store", "push", *map(str, paths), "--to", url]) == 0
    return sorted(_objects(url))


@pytest.mark.parametrize(
    "where", ["directory", pytest.param("s3", marks=pytest.mark.requires("s3fs", "moto"))]
)
@pytest.mark.processes
def test_the_index_serves_reads_and_a_lost_race_costs_only_a_compaction(
    pytester: pytest.Pytester,
    where: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = (
        f"s3://{request.getfixturevalue('bucket')}/repo"
        if where == "s3"
        else str(pytester.path / "store")
    )
    names = _indexed_store(url, pytester, 8)
    store = open_store(url)
    before = newest_runs(store, "cpu/x1", 6)
    assert compact(store, "cpu/x1", 6) == 6
    assert compact(store, "cpu/x1", 6) is None  # nothing new: nothing to rewrite
    asked: list[str] = []
    read = Store.read

    def counted(self: Store, wanted: Sequence[str]) -> dict[str, bytes | Exception]:
        asked.extend(wanted)
        return read(self, wanted)

    monkeypatch.setattr(Store, "read", counted)
    after = newest_runs(store, "cpu/x1", 6)
    assert after == before  # the same records, byte for byte
    assert [name for name in asked if not name.endswith(INDEX)] == []  # one object read
    # Two writers read the index at once; the first to write wins, the other's
    # conditional write finds it changed and leaves it.
    held = store.read_versioned(f"runs/cpu%2Fx1/{INDEX}")
    assert held is not None
    assert store.replace_if(f"runs/cpu%2Fx1/{INDEX}", index_bytes([]), held[1]) is True
    assert store.replace_if(f"runs/cpu%2Fx1/{INDEX}", index_bytes([]), held[1]) is False
    assert store.replace_if(f"runs/cpu%2Fx1/{INDEX}", index_bytes([]), None) is False  # exists
    # An index that holds nothing (or is damaged) only costs the fetches.
    assert newest_runs(store, "cpu/x1", 6) == before
    assert len(names) == 8


def test_a_damaged_index_is_passed_over(pytester: pytest.Pytester) -> None:
    url = str(pytester.path / "store")
    _indexed_store(url, pytester, 3)
    store = open_store(url)
    before = newest_runs(store, "cpu/x1", 3)
    (pytester.path / "store" / "runs" / "cpu%2Fx1" / INDEX).write_text("{not json")
    assert newest_runs(store, "cpu/x1", 3) == before
    with pytest.raises(InputError, match="index of another version"):
        parse_index("i.json", b'{"schema": "pytest-accel/store-index", "version": 99}')


def test_coverage_and_flaky_read_a_stores_runs(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """``coverage --from`` and ``flaky --from``: the trends and the flaky share of the
    store's runs, as of the same records given as files."""
    pytester.makepyfile(test_f=WOBBLY)
    store = str(pytester.path / "store")
    for index in range(3):
        pytester.runpytest_inprocess(
            f"--accel-store={store}", "--flaky-reruns=1", f"--perf-record=r{index}.json"
        )
    files = [f"r{index}.json" for index in range(3)]
    for command in (["coverage"], ["flaky"]):
        capsys.readouterr()
        assert main([*command, *files]) == 0
        from_files = capsys.readouterr().out
        assert main([*command, "--from", store, "--last", "3"]) == 0
        assert capsys.readouterr().out == from_files
        assert "cpu" in from_files
