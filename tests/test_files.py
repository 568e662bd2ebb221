"""The shared I/O every file format goes through, unit by unit: atomic writes that keep
links and permissions and leave nothing behind, the checks a writable path gets before
a run, strict reading, and the field checks whose messages name the file and field.
(Each format's files, malformed on purpose, are in test_input_files.py.)"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from array import array
from pathlib import Path
from typing import Any

import pytest

from pytest_accel.fields import (
    check_header,
    check_version,
    expect_int,
    expect_object,
    expect_seconds,
    expect_text,
    finite_number,
    parse_utc_timestamp,
    utc_timestamp,
)
from pytest_accel.files import (
    SLICE,
    STALE_TEMP_SECONDS,
    TEMP_SUFFIX,
    InputError,
    check_writable,
    dumps,
    dumps_in_pieces,
    gc_paused,
    microseconds_json,
    parse_json,
    read_bytes,
    read_json,
    remove_stale_temp_files,
    resolved,
    write_atomic,
    write_json_atomic,
)
from pytest_accel.locking import exclusive_lock, file_identity, update_locked


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ACCEL_CACHE_DIR", str(tmp_path / "cache"))


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIX))


def test_a_write_replaces_the_file_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "record.json"
    write_atomic(target, [b'{"a": ', b"1}"])
    assert json.loads(target.read_text()) == {"a": 1}
    write_json_atomic(target, {"b": 2})
    assert json.loads(target.read_text()) == {"b": 2}
    assert leftovers(target.parent) == []


def test_a_failed_write_keeps_the_old_file_and_removes_its_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")

    def chunks() -> object:
        yield b"new, half"
        raise RuntimeError("the encoder failed")

    with pytest.raises(RuntimeError):
        write_atomic(target, chunks())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_write_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "base.json").write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(shared / "base.json")
    write_json_atomic(link, {"runs": 1})
    assert link.is_symlink()
    assert json.loads((shared / "base.json").read_text()) == {"runs": 1}


def test_a_dangling_link_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")
    write_json_atomic(link, {})
    assert link.is_symlink()
    assert (tmp_path / "target.json").exists()


def test_a_link_loop_is_an_input_error_naming_the_path(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(InputError) as raised:
        resolved(loop)
    assert str(raised.value).startswith(f"{loop}: cannot be resolved")


def test_a_rewrite_keeps_the_files_permissions(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("{}")
    target.chmod(0o640)
    write_json_atomic(target, {"x": 1})
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_new_file_gets_the_umasks_permissions_not_a_temp_files(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "new.json", {})
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644


def test_only_old_temp_files_of_ours_are_cleaned_up(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    old = tmp_path / f".record.json.abc{TEMP_SUFFIX}"
    fresh = tmp_path / f".record.json.def{TEMP_SUFFIX}"
    other = tmp_path / f".other.json.ghi{TEMP_SUFFIX}"
    for path in (old, fresh, other):
        path.write_text("")
    past = time.time() - STALE_TEMP_SECONDS - 10
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    remove_stale_temp_files(target)
    assert leftovers(tmp_path) == sorted([fresh.name, other.name])


@pytest.mark.processes
def test_a_temp_file_of_a_dead_writer_on_this_host_goes_at_once_a_live_ones_stays(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from pytest_accel.files import _writer_tag

    host = _writer_tag().split("-")[0]
    target = tmp_path / "record.json"
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as live:
        finished = subprocess.Popen([sys.executable, "-c", "pass"])
        finished.wait()
        gone = tmp_path / f".record.json.{host}-{finished.pid}.x1{TEMP_SUFFIX}"
        running = tmp_path / f".record.json.{host}-{live.pid}.x2{TEMP_SUFFIX}"
        elsewhere = tmp_path / f".record.json.00000000-{finished.pid}.x3{TEMP_SUFFIX}"
        for path in (gone, running, elsewhere):
            path.write_text("")
        remove_stale_temp_files(target)
        live.kill()
    # Another host's writer cannot be asked: its file waits for the hour.
    assert leftovers(tmp_path) == sorted([running.name, elsewhere.name])


def test_compact_and_indented_json_both_end_with_a_newline() -> None:
    assert dumps({"a": [1, 2]}) == b'{"a":[1,2]}\n'
    assert dumps({"a": 1}, indent=True) == b'{\n  "a": 1\n}\n'


def test_a_writable_path_is_proved_before_the_run(tmp_path: Path) -> None:
    assert check_writable(tmp_path / "new" / "dir" / "record.json").parent.is_dir()
    with pytest.raises(InputError, match="is a directory; give a file path"):
        check_writable(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="is not a directory"):
        check_writable(blocker / "record.json")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("{}")
    target.chmod(0o444)
    with pytest.raises(InputError, match="cannot be written"):
        check_writable(target)


def test_reading_refuses_what_is_not_a_regular_file_or_too_large(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_bytes(tmp_path / "missing.json")
    with pytest.raises(InputError) as raised:
        read_bytes(tmp_path)
    assert "directory" in str(raised.value)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 100)
    with pytest.raises(InputError, match="is 100 bytes, over the 10-byte limit"):
        read_bytes(big, limit=10)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        read_bytes(fifo)


def test_reading_json_names_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": NaN}')
    with pytest.raises(InputError) as raised:
        read_json(bad)
    assert str(raised.value).startswith(f"{bad}: is not valid JSON")
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, null]}')
    assert read_json(good) == {"a": [1, None]}


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_locked_update_creates_changes_and_writes_once(tmp_path: Path) -> None:
    path = tmp_path / "history.json"

    def load(name: str) -> dict[str, int]:
        data: dict[str, int] = json.loads(Path(name).read_text())
        return data

    def add_one(data: dict[str, int]) -> None:
        data["runs"] = data.get("runs", 0) + 1

    for _ in range(3):
        result = update_locked(path, load, dict, add_one, lambda d: d)
    assert result == {"runs": 3}
    assert json.loads(path.read_text()) == {"runs": 3}


def test_a_locked_update_reuses_what_was_read_before_only_while_the_file_is_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.json"
    write_json_atomic(path, {"runs": 1})
    loads: list[str] = []

    def load(name: str) -> dict[str, int]:
        loads.append(name)
        data: dict[str, int] = json.loads(Path(name).read_text())
        return data

    def add_one(data: dict[str, int]) -> None:
        data["runs"] += 1

    read_before = (file_identity(path), {"runs": 1})
    assert update_locked(path, load, dict, add_one, lambda d: d, read_before=read_before) == {
        "runs": 2
    }
    assert loads == []  # the file was as read: not parsed again
    # Another job replaced it since (a new inode): what it wrote is read, not lost.
    write_json_atomic(path, {"runs": 7})
    assert update_locked(path, load, dict, add_one, lambda d: d, read_before=read_before) == {
        "runs": 8
    }
    assert len(loads) == 1
    assert json.loads(path.read_text()) == {"runs": 8}


def test_a_file_identity_changes_when_the_file_is_replaced_and_is_none_when_absent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.json"
    assert file_identity(path) is None
    write_json_atomic(path, {"a": 1})
    first = file_identity(path)
    assert first is not None
    assert first == file_identity(path)
    write_json_atomic(path, {"a": 1})
    assert file_identity(path) != first


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, True),
        (0.5, True),
        (True, False),
        (float("nan"), False),
        (float("inf"), False),
        ("1", False),
    ],
)
def test_a_finite_number_is_an_int_or_float_not_a_bool(value: object, expected: bool) -> None:
    assert finite_number(value) is expected


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_document_written_in_pieces_is_the_compact_document(depth: int) -> None:
    document: dict[str, Any] = {
        "schema": "x",
        "tests": {"id": ["t.py::a", "t.py::\u00e9"], "call": [0.5, None], "attempts": {}},
        "classes": {},
        "quote": 'a "b"',
    }
    pieces = list(dumps_in_pieces(document, depth))
    assert b"".join(pieces) == dumps(document)
    assert len(pieces) > 2  # not one piece for the whole document
    if depth > 1:  # the columns are pieces: one of them may be made as it is written
        lazily = {**document, "tests": {**document["tests"], "call": lambda: [0.5, None]}}
        assert b"".join(dumps_in_pieces(lazily, depth)) == dumps(document)


@pytest.mark.parametrize("seed", range(4))
def test_seconds_encoded_in_c_read_back_as_each_rounded_to_the_microsecond(seed: int) -> None:
    """``microseconds_json`` writes a column with ``%.6f``: every number reads back as
    ``round(v, 6)``, a zero as ``0.0``, in a document written in pieces; infinity and
    NaN go the encoder's way (orjson writes them as null)."""
    import random

    rng = random.Random(seed)
    seconds = [rng.choice([0.0, 1e-7, 5e-7, 0.1, 2.5]) for _ in range(50)]
    seconds += [rng.random() * 10 ** rng.randint(-7, 4) for _ in range(5000)]
    seconds += [-0.0, -1e-7, 1e15, 0.0000005, 0.0000015, 123.4567895]
    encoded = microseconds_json(array("d", seconds))
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == [round(value, 6) for value in seconds]
    assert encoded.startswith(b"[0.0,") == (round(seconds[0], 6) == 0.0)
    assert encoded.find(b",0.000000,") == -1  # zeros written short
    document = {"tests": {"id": ["t.py::a"], "call": encoded}, "n": 1}
    assert json.loads(b"".join(dumps_in_pieces(document))) == {
        "tests": {"id": ["t.py::a"], "call": json.loads(encoded)},
        "n": 1,
    }
    for odd in (math.inf, math.nan):
        assert not isinstance(microseconds_json([0.5, odd]), bytes)
        written = b"".join(dumps_in_pieces({"call": microseconds_json([0.5, odd])}))
        assert json.loads(written) == {"call": [0.5, None]}


@pytest.mark.parametrize(
    "column",
    [
        [0.0] * (2 * SLICE + 3),  # a column no test had: every slice zero
        [0.0] * SLICE + [1e-7, 2.5e-6] + [0.0] * (SLICE - 2) + [-0.0, 0.0, 3.0],
        [1e-4] * SLICE + [0.0] * SLICE,  # a zero slice after one of numbers
        [0.0] * (SLICE - 1) + [123.4567895],  # one number in a slice of zeros
    ],
    ids=["all-zero", "zero-and-not", "numbers-then-zeros", "one-number"],
)
def test_a_column_of_zero_slices_reads_back_as_one_formatted_number_by_number(
    column: list[float],
) -> None:
    """A slice of zeros is written without formatting its numbers, any other slice in
    one format: the bytes of ``%.6f`` of each number with zeros written short, across
    slices."""
    by_number = "".join(f",{value:.6f}" for value in column).replace(",0.000000", ",0.0")
    assert microseconds_json(column) == f"[{by_number[1:]}]".encode()


@pytest.mark.parametrize("entries", [0, 1, SLICE, SLICE + 1, 3 * SLICE + 5])
def test_a_large_column_is_written_a_slice_at_a_time_as_the_same_bytes(
    entries: int, tmp_path: Path
) -> None:
    """A list or an object of more than ``SLICE`` entries, at any level a document is
    written in pieces, is encoded ``SLICE`` entries at a time (a 100,000-test history
    was 25 MB of fragments at once): the same bytes, and the file reads back alike."""
    envs = {"cpu/x1": {"tests": {f't.py::t{i}[\u00e9"]': "PF"[i % 2] * 3 for i in range(entries)}}}
    document: dict[str, Any] = {
        "ids": [f"t.py::t{i}" for i in range(entries)],
        "calls": tuple(None if i % 5 == 0 else i / 3 for i in range(entries)),
        "envs": envs,
        "empty": {},
    }
    for depth in (1, 2, 3):
        pieces = list(dumps_in_pieces(document, depth))
        assert b"".join(pieces) == dumps(document)
        if entries > SLICE and depth == 3:  # the history's tests are three levels down
            # The largest piece: about one slice of the largest column, never all of it.
            largest = len(dumps(envs["cpu/x1"]["tests"]))
            assert max(map(len, pieces)) <= 1.1 * largest * SLICE / entries
    write_json_atomic(tmp_path / "h.json", document)
    assert read_json(tmp_path / "h.json") == json.loads(dumps(document))


def test_field_checks_name_the_file_and_the_field() -> None:
    with pytest.raises(InputError) as raised:
        expect_object("r.json", "run", [1])
    assert str(raised.value) == "r.json: run: expected an object, got list"
    with pytest.raises(InputError, match=r"r.json: tests.call\[3\]: expected a number of seconds"):
        expect_seconds("r.json", "tests.call[3]", True)
    with pytest.raises(InputError, match="is negative"):
        expect_seconds("r.json", "x", -1)
    with pytest.raises(InputError, match="implausibly large"):
        expect_seconds("r.json", "x", 1e9)
    assert expect_seconds("r.json", "x", 2) == 2.0
    assert expect_text("r.json", "x", None, optional=True) is None
    with pytest.raises(InputError, match="expected a string, got 5"):
        expect_text("r.json", "x", 5)
    with pytest.raises(InputError, match="expected an integer, got True"):
        expect_int("r.json", "x", True)
    with pytest.raises(InputError, match="0 is below 1"):
        expect_int("r.json", "x", 0, minimum=1)


def test_a_four_hundred_digit_integer_is_implausible_not_an_overflow() -> None:
    assert finite_number(10**400)
    with pytest.raises(InputError) as raised:
        expect_seconds("r.json", "x", 10**400)
    assert str(raised.value).endswith("... seconds is implausibly large")
    assert len(str(raised.value)) < 120


def test_a_long_bad_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(InputError) as raised:
        expect_text("r.json", "x", ["y" * 500])
    assert len(str(raised.value)) < 120


def test_versions_from_one_to_the_supported_one_are_read() -> None:
    assert check_version("f.json", {"version": 2}, supported=2) == 2
    with pytest.raises(InputError, match="version 3 is newer than this pytest-accel reads"):
        check_version("f.json", {"version": 3}, supported=2)
    with pytest.raises(InputError, match="is not a valid version"):
        check_version("f.json", {"version": 0}, supported=2)
    with pytest.raises(InputError, match="expected an integer, got '2'"):
        check_version("f.json", {"version": "2"}, supported=2)


def test_the_header_check_reads_the_same_for_every_format() -> None:
    with pytest.raises(InputError) as raised:
        check_header("b.json", {"schema": "x", "version": 1}, schema="s", supported=1, what="a B")
    assert str(raised.value) == "b.json: is not a B (schema 'x', expected 's')"
    with pytest.raises(InputError, match="expected a JSON object, got list"):
        check_header("b.json", [], schema="s", supported=1, what="a B")
    data = {"version": 1}
    assert check_header("q.json", data, schema="s", supported=1, what="a Q", schema_required=False)


def test_timestamps_round_trip_in_utc() -> None:
    stamp = utc_timestamp(1795305600.0)
    assert stamp == "2026-11-22T00:00:00Z"
    assert parse_utc_timestamp("f.json", "run.started", stamp) == 1795305600.0
    expected = "run.started: '22/11/2026' is not YYYY-MM-DDTHH:MM:SSZ"
    with pytest.raises(InputError, match=re.escape(expected)):
        parse_utc_timestamp("f.json", "run.started", "22/11/2026")


def test_an_exclusive_lock_is_held_by_one_holder_at_a_time(tmp_path: Path) -> None:
    target = tmp_path / "history.json"
    acquired = threading.Event()

    def second_holder() -> None:
        with exclusive_lock(target):
            acquired.set()

    with exclusive_lock(target):
        waiting = threading.Thread(target=second_holder)
        waiting.start()
        assert not acquired.wait(0.3)  # the second waits while the first holds it
    waiting.join(10)
    assert acquired.is_set()  # and gets it once the first lets go


@pytest.mark.processes
def test_a_lock_held_by_a_process_that_died_is_free(tmp_path: Path) -> None:
    target = tmp_path / "history.json"
    code = (
        "import os, sys; from pytest_accel.locking import exclusive_lock\n"
        "with exclusive_lock(sys.argv[1]):\n    os._exit(3)\n"
    )
    died = subprocess.run([sys.executable, "-c", code, str(target)], check=False)
    assert died.returncode == 3
    with exclusive_lock(target):  # no stale lock: the kernel released it
        pass


@pytest.fixture(params=["orjson", "json"])
def json_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """JSON through orjson (the command line tool) or the standard library (a pytest
    run, where orjson is not imported)."""
    if request.param == "json":
        monkeypatch.delitem(sys.modules, "orjson", raising=False)
    else:
        import orjson  # noqa: F401
    engine: str = request.param
    return engine


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"[NaN]",
        b"[Infinity]",
        b"[-Infinity]",
        b"[1" + b"0" * 400 + b"]",  # beyond any float
        b'["\xff"]',  # not UTF-8
        b"[" * 5000 + b"]" * 5000,
        b"[1] [2]",
    ],
)
def test_what_is_not_strict_json_is_refused_by_either_reader(json_engine: str, raw: bytes) -> None:
    with pytest.raises(InputError, match=r"^f\.json: is not valid JSON \(.+\)$"):
        parse_json("f.json", raw)
    assert ("orjson" in sys.modules) is (json_engine == "orjson")


def test_strict_json_reads_the_same_with_either_reader(json_engine: str) -> None:
    raw = b'{"a": [1, 2.5, null, true, "\xc3\xa9"], "u64": 18446744073709551615, "i64": '
    raw += b'-9223372036854775808, "over": 18446744073709551616, "under": -9223372036854775809}'
    assert parse_json("f.json", raw) == {
        "a": [1, 2.5, None, True, "é"],
        "u64": 2**64 - 1,
        "i64": -(2**63),
        "over": float(2**64),  # beyond 64 bits: a float, as orjson reads it
        "under": float(-(2**63) - 1),
    }


def test_json_is_written_byte_for_byte_alike_by_either_writer(json_engine: str) -> None:
    data = {"a": [1, 2.5, None], "é": {"x": [], "y": {}}, "b": True, "s": 'q"\\'}
    assert dumps(data) == b'{"a":[1,2.5,null],"\xc3\xa9":{"x":[],"y":{}},"b":true,"s":"q\\"\\\\"}\n'
    assert dumps(data, indent=True) == (
        b'{\n  "a": [\n    1,\n    2.5,\n    null\n  ],\n  "\xc3\xa9": {\n    "x": [],\n'
        b'    "y": {}\n  },\n  "b": true,\n  "s": "q\\"\\\\"\n}\n'
    )


def test_a_nan_is_written_as_null_by_either_writer(json_engine: str) -> None:
    assert dumps({"x": float("nan"), "y": [float("inf")]}) == b'{"x":null,"y":[null]}\n'
