"""Counts and numbers from options and environment variables: ASCII digits only, with a
cap; a bad option is a usage error naming it, a bad environment value is ignored with
a note (in the evidence and the header), never a crash."""

from __future__ import annotations

import pytest

from pytest_accel.cli import main
from pytest_accel.hardware.builtin import detect_builtin
from pytest_accel.hardware.detection import DetectionContext, cpu_detection, read_mask
from pytest_accel.settings import count_value, number_value, parse_count
from tests.fakesys import FakeSys

NOT_ASCII_DIGITS = ["²", "\u0661\u0662", "\u0663", "8x", "-3", "0", "9" * 5000]


@pytest.mark.parametrize(
    ("text", "count"),
    [("8", 8), (" 12 ", 12), ("0", 0), ("1000000", 1_000_000), ("1000001", None)]
    + [
        (text, None)
        for text in ("²", "\u0661\u0662", "\u0663", "8x", "-3", "+3", "3.0", "", "9" * 5000)
    ],
)
def test_a_count_is_ascii_digits_within_the_cap(text: str, count: int | None) -> None:
    assert count_value(text) == count


@pytest.mark.parametrize(
    ("text", "number"),
    [("0.05", 0.05), ("5e-2", 0.05), (".5", 0.5), ("1.", 1.0), ("1e5", 1e5)]
    + [(text, None) for text in ("nan", "inf", "-1", "\u0661", "1e300", "0x10", "1_000")],
)
def test_a_number_is_plain_ascii_decimal_within_the_cap(text: str, number: float | None) -> None:
    assert number_value(text) == number


def test_a_bad_count_is_a_usage_error_that_names_the_flag_and_cuts_a_long_value() -> None:
    with pytest.raises(pytest.UsageError) as info:
        parse_count("--perf-top", "9" * 5000)
    message = str(info.value)
    assert message.startswith("--perf-top: '99999")
    assert len(message) < 200
    assert "is not a positive integer up to 1000000" in message


@pytest.mark.parametrize(
    "args",
    [
        ["--accel-cpu-devices=²"],
        ["--perf-top=²", "--perf-record=r.json"],
        ["--accel-emulate=tpu:²"],
        ["--accel-shard=1/²"],
        ["--accel-shard=1/" + "9" * 5000],
        ["--perf-window=" + "9" * 5000, "--perf-record=r.json"],
        ["--flaky-reruns=\u0663"],
        ["--perf-threshold=\u0661.\u0665", "--perf-record=r.json"],
        ["--accel-probe-timeout=nan"],
    ],
)
def test_options_with_non_ascii_digits_or_thousands_of_digits_are_usage_errors(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    flag = args[0].split("=", 1)[0]
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert line.startswith(f"ERROR: {flag}: ")
    assert len(line) < 300
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("value", NOT_ASCII_DIGITS)
def test_a_bad_jax_num_cpu_devices_is_ignored_with_a_note_in_the_header(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fakesys: FakeSys, value: str
) -> None:
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", value)
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    header = next(line for line in result.stdout.lines if line.startswith("accel:"))
    assert header.startswith("accel: cpu x1 via default")
    assert "; ignored JAX_NUM_CPU_DEVICES=" in header
    assert "(not a positive count)" in header
    assert len(header) < 300  # a 5000-digit value is cut


@pytest.mark.parametrize(("count", "expected"), [("²", 1), ("4", 4), ("9" * 5000, 1)])
def test_a_bad_xla_flags_count_is_ignored_and_a_good_one_still_counts(
    fakesys: FakeSys, count: str, expected: int
) -> None:
    flags = f"--xla_force_host_platform_device_count={count}"
    detection = cpu_detection(DetectionContext(fakesys.root, {"XLA_FLAGS": flags}))
    assert detection.device_count == expected
    assert bool(detection.ignored) == (expected == 1)


@pytest.mark.parametrize(
    ("variable", "add_devices"),
    [
        ("CUDA_VISIBLE_DEVICES", lambda f: f.add_nvidia(8)),
        ("TPU_VISIBLE_CHIPS", lambda f: f.add_tpu(4)),
        ("ROCR_VISIBLE_DEVICES", lambda f: [f.add_kfd_node(104, "gfx90a") for _ in range(2)]),
    ],
)
def test_a_mask_of_non_ascii_digits_hides_the_devices_and_says_so(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    fakesys: FakeSys,
    variable: str,
    add_devices: object,
) -> None:
    add_devices(fakesys)  # type: ignore[operator]
    monkeypatch.setenv(variable, "²")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    header = next(line for line in result.stdout.lines if line.startswith("accel:"))
    assert header.startswith("accel: cpu x1")
    assert f"ignored {variable}='²' leaves 0 of" in header


def test_pytest_accel_detect_survives_every_bad_count(
    fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fakesys.add_nvidia(2)
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "²")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "\u0663")
    assert main(["detect"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("accel: cpu x1 via default")
    assert "ignored: CUDA_VISIBLE_DEVICES='\u0663' leaves 0 of 2 visible" in out
    assert "ignored: JAX_NUM_CPU_DEVICES='²'" in out


@pytest.mark.parametrize(
    ("value", "physical", "entries", "stop"),
    [
        ("0,1", 8, ("0", "1"), None),
        ("abc", 8, (), "'abc' is not a device index"),
        ("1,abc,2", 8, ("1",), "'abc' is not a device index"),
        ("4,5,6,7", 8, ("4", "5", "6", "7"), None),
        ("0,0", 8, ("0",), "'0' is repeated"),
        ("3,9", 4, ("3",), "'9' is past the last device"),
        ("GPU-8f2b7a5e-1c3d,1", 8, ("GPU-8f2b7a5e-1c3d", "1"), None),
        ("MIG-4f1a,GPU-77", 8, ("MIG-4f1a", "GPU-77"), None),
        ("-1", 8, (), None),
        ("0,-1,1", 8, ("0",), None),
        ("NoDevFiles", 8, (), None),
        ("", 8, (), None),
        ("²", 8, (), "'²' is not a device index"),
        (" 2 , 3 ", 8, ("2", "3"), None),
    ],
)
def test_masks_are_read_as_the_runtimes_read_them(
    value: str, physical: int, entries: tuple[str, ...], stop: str | None
) -> None:
    mask = read_mask(value, physical)
    assert mask.entries == entries
    assert mask.stop == stop


def test_tpu_visible_chips_takes_no_uuids() -> None:
    assert read_mask("GPU-77,0", 4, uuids=False).entries == ()


@pytest.mark.parametrize(("mask", "count"), [("abc", None), ("1,abc,2", 1), ("0,2,4", 3)])
def test_cuda_masks_count_up_to_the_first_invalid_entry(
    fakesys: FakeSys, mask: str, count: int | None
) -> None:
    fakesys.add_nvidia(8)
    context = DetectionContext(fakesys.root, {"CUDA_VISIBLE_DEVICES": mask})
    found = detect_builtin(context)
    if count is None:
        assert found is None  # no GPU visible: the CPU fallback answers
    else:
        assert found is not None
        assert (found.platform, found.device_count) == ("cuda", count)


def test_unknown_jax_platforms_are_named_and_the_rest_still_applies(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fakesys: FakeSys
) -> None:
    fakesys.add_tpu(4)
    monkeypatch.setenv("JAX_PLATFORMS", "bogus,tpu")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    header = next(line for line in result.stdout.lines if line.startswith("accel:"))
    assert header.startswith("accel: tpu x4")
    assert "ignored JAX_PLATFORMS names 'bogus', not a platform the built-in detectors know" in (
        header
    )


def test_a_missing_sysroot_is_a_usage_error_in_pytest_and_the_cli(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = pytester.path / "no-such-root"
    monkeypatch.setenv("PYTEST_ACCEL_SYSROOT", str(missing))
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: PYTEST_ACCEL_SYSROOT='{missing}' is not a directory*"])
    assert main(["detect"]) == 2
    assert "PYTEST_ACCEL_SYSROOT=" in capsys.readouterr().err
