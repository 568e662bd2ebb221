"""The run store's cost beside the same work on local files, side by side in one run
(ratios; walls on a shared machine are noisy, the ratios less so):

1. A run's end: its record of ``--tests`` tests sent to a store (a directory, and
   moto's S3 server on loopback) against ``write_atomic`` to a local file, the way
   ``--perf-record`` writes it.
2. A read: the newest ``--runs`` runs of ``--run-tests`` tests each, fetched from the
   store and folded into a baseline (``newest_runs`` + ``baseline_of_stored``, what a
   run with ``--accel-store`` does while it configures), against folding the same
   records from local files in memory (``baseline_of_records`` after reading them).

    python bench/store_cost.py --tests 10000 --runs 1000 --run-tests 1000 --repeat 3

Each store is read cold (every run fetched), then again once its index holds the runs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import synthetic
from pytest_accel.files import read_json, write_atomic
from pytest_accel.perf.formats.record import check_record
from pytest_accel.perf.offline import baseline_of_records, baseline_of_stored
from pytest_accel.store.history import compact, newest_runs, run_object
from pytest_accel.store.location import Store, open_store


def _server() -> subprocess.Popen[bytes]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return server


def _median(action: Callable[[], object], repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def _record(tests: int, index: int) -> bytes:
    calls = {f"t{i // 100}.py::test_{i}": 0.01 + (i % 97) * 1e-4 for i in range(tests)}
    data = synthetic.record(calls, started=synthetic.STARTED + index * 60)
    data["run"]["id"] = f"{index:016x}"
    return orjson.dumps(data)


def end_of_run(stores: dict[str, str], root: Path, tests: int, repeat: int) -> None:
    data = _record(tests, 0)
    print(f"1. a run's end: a record of {tests} tests ({len(data) / 2**20:.1f} MiB)")
    print("| written to | median wall (s) | / local file |")
    print("| --- | ---: | ---: |")
    local = _median(lambda: write_atomic(root / "r.json", [data]), repeat)
    print(f"| a local file (--perf-record) | {local:.3f} | 1.00 |")
    runs = iter(range(10**9))
    for label, url in stores.items():
        store = open_store(url)

        def send(store: Store = store) -> None:
            record = orjson.loads(data)
            record["run"]["id"] = f"{next(runs):016x}"  # a new run each time
            body = orjson.dumps(record)
            store.put_new(run_object(record, body).name, body)

        wall = _median(send, repeat)
        print(f"| {label} | {wall:.3f} | {wall / local:.2f} |")


def read_back(stores: dict[str, str], root: Path, runs: int, tests: int, repeat: int) -> None:
    print(f"2. a read: the newest {runs} runs of {tests} tests, folded")
    files = []
    for index in range(runs):
        body = _record(tests, index)
        path = root / "records" / f"r{index:05d}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(body)
        files.append(str(path))
        record = orjson.loads(body)
        for url in stores.values():
            open_store(url).put_new(run_object(record, body).name, body)

    def from_files() -> None:
        records = [(path, check_record(path, read_json(path))) for path in files]
        baseline_of_records(records, "b.json", runs)

    local = _median(from_files, repeat)
    print("| read from | median wall (s) | / local files |")
    print("| --- | ---: | ---: |")
    print(f"| local files (read, checked, folded) | {local:.2f} | 1.00 |")
    for label, url in stores.items():

        def from_store(url: str = url) -> None:
            stored = newest_runs(open_store(url), "cpu/x1", runs)
            folded = baseline_of_stored(stored.name, stored.key, stored.objects, runs)
            assert folded.runs == runs, folded.notes[:3]

        wall = _median(from_store, repeat)
        print(f"| {label}, cold (listed, fetched, folded) | {wall:.2f} | {wall / local:.2f} |")
        held = compact(open_store(url), "cpu/x1", runs)
        assert held == runs, held
        wall = _median(from_store, repeat)
        print(f"| {label}, with its index | {wall:.2f} | {wall / local:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--run-tests", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = _server()
    try:
        import s3fs

        s3fs.S3FileSystem(skip_instance_cache=True).mkdir("bench")
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            stores = {"directory": str(root / "store"), "S3 (moto, loopback)": "s3://bench/repo"}
            end_of_run(stores, root, args.tests, args.repeat)
            print()
            stores = {label: f"{url}-read" for label, url in stores.items()}  # empty ones
            read_back(stores, root, args.runs, args.run_tests, args.repeat)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
