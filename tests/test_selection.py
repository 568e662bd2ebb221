from __future__ import annotations

import pytest

from pytest_accel.hardware.detection import Detection
from pytest_accel.hardware.markers import MarkerError, evaluate_marks
from tests.fakesys import FakeSys, skip_reasons

KNOWN = ["cpu", "cuda", "gpu", "rocm", "tpu"]

MARKED_SUITE = """
import pytest

def test_plain(): pass

@pytest.mark.tpu_ci
def test_tpu_ci(): pass

@pytest.mark.tpu
def test_tpu(): pass

@pytest.mark.multi_gpu
def test_multi_gpu(): pass

@pytest.mark.cuda
def test_cuda(): pass

@pytest.mark.rocm
def test_rocm(): pass

@pytest.mark.cpu_only
def test_cpu_only(): pass

@pytest.mark.entry
@pytest.mark.slow
def test_entry_slow(): pass

@pytest.mark.perf(threshold=2.0)
def test_perf(): pass
"""


def test_auto_on_cpu_skips_accelerator_tests_with_reasons_and_runs_the_rest(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("-rs", "--strict-markers")
    result.assert_outcomes(passed=4, skipped=5)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1] *:5: requires tpu x1 (detected: cpu x1 via default)"]
    )
    assert skip_reasons(pytester, "--strict-markers") == {
        "test_tpu_ci": "requires tpu x1 (detected: cpu x1 via default)",
        "test_tpu": "requires tpu x1 (detected: cpu x1 via default)",
        "test_multi_gpu": "requires gpu x2 (detected: cpu x1 via default)",
        "test_cuda": "requires cuda x1 (detected: cpu x1 via default)",
        "test_rocm": "requires rocm x1 (detected: cpu x1 via default)",
    }


def test_explicit_tpu_on_a_machine_without_one_stops_with_exit_4_naming_the_evidence(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("-p", "pytest_accel", "--accel=tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --accel=tpu: no tpu device found (detected cpu x1 via default);"
            " checked: /sys/bus/pci/devices: 0 TPU chip(s)*/dev/accel*: 0 node(s)*"
        ]
    )
    assert "collected" not in result.stdout.str()


def test_pytest_accel_env_requests_a_platform_like_the_option(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_ACCEL", "tpu")
    pytester.makepyfile("def test_ok(): pass")
    assert pytester.runpytest().ret == pytest.ExitCode.USAGE_ERROR
    assert pytester.runpytest("--accel=auto").ret == pytest.ExitCode.OK


def test_allow_missing_turns_the_error_into_skips_naming_what_was_detected(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-allow-missing")
    result.assert_outcomes(passed=3, skipped=6)
    result.stdout.fnmatch_lines(
        ["accel: cpu x1 via default (requested tpu: missing, its tests skip)*"]
    )
    reasons = skip_reasons(pytester, "--accel=tpu", "--accel-allow-missing")
    assert reasons["test_tpu"] == "requires tpu x1 (detected: cpu x1 via default)"
    assert reasons["test_cpu_only"] == (
        "cpu_only: this run targets an accelerator (detected: cpu x1 via default)"
    )


def test_jax_platforms_cpu_appears_in_the_skip_reason(
    pytester: pytest.Pytester, fakesys: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakesys.add_tpu(8, "0x006f")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    pytester.makepyfile("import pytest\n@pytest.mark.tpu(min_devices=8)\ndef test_big(): pass\n")
    assert skip_reasons(pytester) == {
        "test_big": "requires tpu x8 (detected: cpu x1 via env JAX_PLATFORMS=cpu)"
    }


def test_on_a_tpu_host_tpu_tests_run_and_gpu_and_cpu_only_tests_skip(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    fakesys.add_tpu(8, "0x006f")
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-probe=none")
    result.assert_outcomes(passed=5, skipped=4)
    reasons = skip_reasons(pytester, "--accel=tpu", "--accel-probe=none")
    assert sorted(reasons) == ["test_cpu_only", "test_cuda", "test_multi_gpu", "test_rocm"]
    assert reasons["test_cuda"] == "requires cuda x1 (detected: tpu x8 (TPU v6 lite) via pci)"


def test_accel_only_deselects_tests_that_do_not_target_the_platform(
    pytester: pytest.Pytester, fakesys: FakeSys
) -> None:
    fakesys.add_tpu(8, "0x006f")
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("--accel=tpu", "--accel-probe=none", "--accel-only")
    result.assert_outcomes(passed=2, deselected=7)


def test_kind_globs_and_device_counts_decide_with_emulated_hardware(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.accel("tpu", kind="tpu V5*")
        def test_v5_family(): pass

        @pytest.mark.accel("tpu", kind="TPU v4")
        def test_v4_only(): pass

        @pytest.mark.tpu(min_devices=16)
        def test_pod_slice(): pass

        @pytest.mark.accel("gpu", "tpu", min_devices=8)
        def test_any_big_accelerator(): pass

        @pytest.mark.multi_device(8)
        def test_eight_devices(): pass
        """
    )
    result = pytester.runpytest("--accel-emulate=tpu:8:TPU v5 lite", "-v", "--collect-only")
    result.stdout.fnmatch_lines(["accel: tpu x8 (TPU v5 lite) via emulated*"])
    result = pytester.runpytest("--accel-emulate=tpu:8:TPU v5 lite")
    result.assert_outcomes(passed=3, skipped=2)
    assert skip_reasons(pytester, "--accel-emulate=tpu:8:TPU v5 lite") == {
        "test_v4_only": (
            "requires tpu x1 of kind 'TPU v4' (detected: tpu x8 (TPU v5 lite) via emulated)"
        ),
        "test_pod_slice": "requires tpu x16 (detected: tpu x8 (TPU v5 lite) via emulated)",
    }


def test_class_level_markers_apply_to_every_method(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.multi_gpu(4)
        class TestSharded:
            def test_a(self): pass
            def test_b(self): pass
        """
    )
    pytester.runpytest("--accel-emulate=cuda:2").assert_outcomes(skipped=2)
    pytester.runpytest("--accel-emulate=rocm:4").assert_outcomes(passed=2)


def test_ray_tests_skip_when_ray_is_not_importable(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import pytest\n@pytest.mark.ray\ndef test_cluster(): pass\n")
    assert skip_reasons(pytester) == {
        "test_cluster": "requires ray (not importable here: pip install ray)"
    }


def test_category_markers_select_with_dash_m(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED_SUITE)
    result = pytester.runpytest("-m", "not entry and not slow", "--strict-markers")
    result.assert_outcomes(passed=3, skipped=5, deselected=1)


def test_every_marker_is_listed_with_its_help_text(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines_random(
        [
            "@pytest.mark.accel(*platforms, min_devices=1, kind=None): *",
            "@pytest.mark.tpu(min_devices=1, kind=None): *",
            "@pytest.mark.tpu_ci(min_devices=1, kind=None): *",
            "@pytest.mark.gpu(*",
            "@pytest.mark.cuda(*",
            "@pytest.mark.rocm(*",
            "@pytest.mark.multi_gpu(n=2): *",
            "@pytest.mark.multi_device(n=2): *",
            "@pytest.mark.cpu_only: *",
            "@pytest.mark.entry: *",
            "@pytest.mark.ray: *",
            "@pytest.mark.slow: *",
            "@pytest.mark.perf(threshold=None, min_delta=None, ignore=False): *",
        ]
    )


def test_a_marker_with_bad_arguments_is_a_usage_error_naming_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("import pytest\n@pytest.mark.accel('tpux')\ndef test_x(): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *test_x: @pytest.mark.accel: unknown platform 'tpux' (choose from cpu, cuda,*"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--accel=tpux"],
            "ERROR: --accel: invalid choice 'tpux' (choose from auto, cpu, cuda, rocm, tpu, gpu)",
        ),
        (
            ["--accel-emulate=tpu:x"],
            "ERROR: --accel-emulate: invalid value 'tpu:x': device count 'x' is not a positive"
            " integer; expected PLATFORM[[]:COUNT[[]:KIND]], e.g. 'tpu:8:TPU v5 lite'",
        ),
        (
            ["--accel-cpu-devices=-1"],
            "ERROR: --accel-cpu-devices: '-1' is not a positive integer up to 1000000 (e.g. *)",
        ),
        (
            ["--accel-probe=maybe"],
            "ERROR: --accel-probe: invalid choice 'maybe' (choose from auto, none, jax)",
        ),
        (["--flaky-reruns=-1"], "ERROR: --flaky-reruns: '-1' is not a non-negative integer*"),
        (["--flaky-window=0"], "ERROR: --flaky-window: '0' is not a positive integer*"),
        (["--flaky-max-pct=150"], "ERROR: --flaky-max-pct: '150' is above 100*"),
        (
            ["--flaky-quarantine=missing.txt"],
            "ERROR: --flaky-quarantine: missing.txt: no such file",
        ),
        (
            ["--accel-probe-timeout=soon"],
            "ERROR: --accel-probe-timeout: 'soon' is not a positive number",
        ),
    ],
)
def test_bad_option_values_are_usage_errors_that_quote_the_value_and_list_choices(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_ini_keys_configure_options_and_the_command_line_wins(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\naccel_emulate = cuda:4:NVIDIA L4\n")
    pytester.makepyfile("import pytest\n@pytest.mark.cuda\ndef test_gpu(): pass\n")
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest("--accel-emulate=cpu").assert_outcomes(skipped=1)


def test_evaluate_marks_combines_marks_with_and() -> None:
    tpu8 = Detection("tpu", 8, "TPU v6 lite", "pci")
    verdict = evaluate_marks([("tpu", (), {}), ("multi_device", (16,), {})], tpu8, KNOWN)
    assert verdict.skip_reason == "requires 16 devices (detected: tpu x8 (TPU v6 lite) via pci)"
    assert verdict.targets == frozenset({"tpu"})
    assert evaluate_marks([("slow", (), {})], tpu8, KNOWN).skip_reason is None


def test_evaluate_marks_rejects_non_positive_counts() -> None:
    cpu = Detection("cpu", 1, "cpu")
    with pytest.raises(MarkerError, match=r"multi_gpu: n must be a positive integer, got 0"):
        evaluate_marks([("multi_gpu", (0,), {})], cpu, KNOWN)
    with pytest.raises(MarkerError, match=r"tpu takes no positional arguments, got \(8,\)"):
        evaluate_marks([("tpu", (8,), {})], cpu, KNOWN)


@pytest.mark.parametrize(
    ("mark", "message"),
    [
        (
            '@pytest.mark.accel("tpu", min_devces=4)',
            "@pytest.mark.accel: unknown keyword 'min_devces' (did you mean min_devices=?);"
            " it takes min_devices=, kind=",
        ),
        (
            "@pytest.mark.multi_gpu(m=4)",
            "@pytest.mark.multi_gpu: unknown keyword 'm' (did you mean n=?); it takes n=",
        ),
        (
            "@pytest.mark.tpu_ci(knd='TPU v5*')",
            "@pytest.mark.tpu_ci: unknown keyword 'knd' (did you mean kind=?)",
        ),
        ("@pytest.mark.slow(reason='x')", "@pytest.mark.slow: unknown keyword 'reason';"),
        ("@pytest.mark.multi_device(2, 4)", "@pytest.mark.multi_device takes at most 1"),
        (
            "@pytest.mark.tpu(min_devices='4')",
            "@pytest.mark.tpu: min_devices must be a positive integer, got '4'",
        ),
    ],
)
def test_a_misspelled_or_mistyped_marker_argument_stops_the_run_naming_test_and_keyword(
    pytester: pytest.Pytester, mark: str, message: str
) -> None:
    pytester.makepyfile(f"import pytest\n\n{mark}\ndef test_x():\n    pass\n")
    result = pytester.runpytest("--accel-emulate=tpu:8")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *test_x: {message}*"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(("typo", "meant"), [("multi_gpus", "multi_gpu"), ("tpu_cl", "tpu_ci")])
def test_a_marker_two_edits_from_ours_warns_with_the_one_meant(
    pytester: pytest.Pytester, typo: str, meant: str
) -> None:
    pytester.makepyfile(
        f"import pytest\n\n@pytest.mark.{typo}(4)\ndef test_x():\n    pass\n\n"
        "@pytest.mark.unrelated_marker\ndef test_y():\n    pass\n"
    )
    # Shown as a fresh process would (this suite runs with -W error): one warning per
    # unknown marker, pytest's, which names the marker meant where it is a near miss
    # (the plugin once added a second warning of its own beside pytest's).
    result = pytester.runpytest("-W", "default::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=2, warnings=2)
    result.stdout.fnmatch_lines(
        [
            f"*PytestUnknownMarkWarning: @pytest.mark.{typo} is not a registered marker; did you"
            f" mean @pytest.mark.{meant}?*"
        ]
    )
    assert f"Unknown pytest.mark.{typo} " not in result.stdout.str()
    assert "Unknown pytest.mark.unrelated_marker - is this a typo?" in result.stdout.str()
    assert "unrelated_marker is not" not in result.stdout.str()
    strict = pytester.runpytest("--strict-markers")
    assert strict.ret == pytest.ExitCode.INTERRUPTED  # pytest refuses it at collection


def test_a_multi_device_skip_on_cpu_says_how_to_run_it_here() -> None:
    verdict = evaluate_marks([("multi_device", (4,), {})], Detection("cpu", 1, "cpu"), KNOWN)
    assert verdict.skip_reason == (
        "requires 4 devices (detected: cpu x1 via default); --accel-cpu-devices=4 runs it here"
    )
    on_gpu = evaluate_marks([("multi_device", (4,), {})], Detection("cuda", 2, "H100"), KNOWN)
    assert on_gpu.skip_reason is not None
    assert "--accel-cpu-devices" not in on_gpu.skip_reason


def test_running_tests_under_emulation_says_they_run_on_this_machine(
    pytester: pytest.Pytester,
) -> None:
    """Emulation previews a runner's selection; a run under it runs the selected tests
    here, so an honest TPU test fails: the header says so, a preview's does not."""
    pytester.makepyfile(
        "import pytest\n@pytest.mark.tpu\ndef test_on_tpu():\n"
        "    assert False, 'checks its device: there is no TPU here'\n"
    )
    result = pytester.runpytest("--accel-emulate=tpu:4")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "accel: tpu x4 via emulated (emulated: the tests selected for tpu run here, on"
            " this machine's devices; a test that checks its device fails; use --collect-only"
            " to preview)*"
        ]
    )
    preview = pytester.runpytest("--accel-emulate=tpu:4", "--collect-only")
    preview.stdout.fnmatch_lines(["accel: tpu x4 via emulated*"])
    preview.stdout.no_fnmatch_line("*emulated: the tests selected*")
