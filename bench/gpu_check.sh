#!/usr/bin/env bash
# The plugin on a real GPU, in one call of at most 8 minutes (issue 38).
#
# Prepare here (a machine with the package indexes), once:
#     bench/gpu_check.sh --prepare      # the plugin's wheel and the wheels the GPU
#                                       # image lacks (orjson, filelock) into .whl/
# Run there (the device tool: carry .whl, OUT set):
#     bench/gpu_check.sh                # every check, about 4 minutes on an H200
#     bench/gpu_check.sh --startup      # where detection's and the plugin's start-up
#                                       # seconds go (imports, a profile), under a minute
# Everything it finds goes to $OUT: summary.md (what held and what did not, with
# figures), and one log per step.  Without a GPU it says so and runs what it can
# (GPU_CHECK_ALLOW_CPU=1: a dry run of the script itself).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEELS=${GPU_CHECK_WHEELS:-$ROOT/.whl}

if [[ "${1:-}" == "--prepare" ]]; then
    PY=${PYTHON:-python3}
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    "$PY" -m pip wheel --no-deps -q -w "$WHEELS" "$ROOT"
    for wheel in orjson filelock; do
        "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform any -d "$WHEELS" "$wheel"
    done
    ls -1 "$WHEELS"
    exit 0
fi

OUT=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
WORK=$(mktemp -d)
SITE="$WORK/site"
PY=${PYTHON:-python3}
FAILED=0
: >"$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }
held() { say "- [x] $*"; }
missed() { say "- [ ] $*"; FAILED=$((FAILED + 1)); }
# The device tool brings back 8 files at most: the summary, the two records and one
# archive of every step's log.
pack() {
    (cd "$OUT" && tar czf logs.tar.gz --exclude=logs.tar.gz --exclude=summary.md \
        --exclude='*_record.json' -- * 2>/dev/null &&
        find . -maxdepth 1 -type f ! -name summary.md ! -name logs.tar.gz \
            ! -name '*_record.json' -delete)
    rm -rf "$WORK"
}
trap pack EXIT

say "# pytest-accel on a GPU ($(date -u +%Y-%m-%dT%H:%MZ))"
say ""
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
    | sed 's/^/device: /' | tee -a "$SUMMARY"

# --- the plugin and what the image lacks, from the carried wheels -------------------
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    # With their bytecode: the first run there kept none between processes, and each
    # compiled modules from source (0.42 s of a 1.23 s `detect`).
    "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl \
        >"$OUT/install.log" 2>&1 || { say "install failed: see install.log"; exit 1; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
    say "(no .whl/: the plugin as installed here)"
fi
"$PY" - <<'EOF' 2>&1 | tee -a "$SUMMARY"
import importlib.metadata as m
for name in ("pytest-accel", "pytest", "pytest-xdist", "jax", "jaxlib", "torch"):
    try:
        print(f"- {name} {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"- {name}: not installed")
EOF
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # two processes on one GPU: each takes what it uses
export PYTEST_ADDOPTS="-p no:cacheprovider"
ACCEL=("$PY" -m pytest_accel)

# --- the suites -------------------------------------------------------------------
mkdir -p "$WORK/jax" "$WORK/torch"
cat >"$WORK/jax/test_jax_gpu.py" <<'EOF'
import os

import jax
import jax.numpy as jnp

MIB = 2**20


def test_matmul():
    n = 2048 * (2 if os.environ.get("GROW") else 1)  # 16 MiB a matrix, 64 MiB grown
    x = jnp.ones((n, n), jnp.float32)
    (x @ x).block_until_ready()


def test_jit_shapes():
    f = jax.jit(lambda x: jnp.sin(x) * 2)
    for n in (8, 16, 32):
        f(jnp.ones(n)).block_until_ready()


def test_small():
    assert float(jnp.ones(4).sum()) == 4.0
EOF
cat >"$WORK/torch/test_torch_gpu.py" <<'EOF'
import os

import torch


def test_alloc():
    n = 64 * 2**20 * (4 if os.environ.get("GROW") else 1)  # 256 MiB, 1 GiB grown
    x = torch.empty(n // 4, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    del x


def test_compile():
    # Inductor (Triton kernels) where asked, else Dynamo's graphs run eagerly: as many
    # compilations and recompilations, seconds instead of a minute per run.
    backend = os.environ.get("TORCH_BACKEND", "eager")
    f = torch.compile(lambda x: x.sin() * 2, dynamic=False, backend=backend)
    shapes = 12 if os.environ.get("RECOMPILE") else 2  # a new shape each call
    for n in range(shapes):
        f(torch.ones(n + 1, device="cuda"))


def test_small():
    assert torch.ones(4, device="cuda").sum().item() == 4.0
EOF

# --- --startup: where detection's and the plugin's start-up seconds go ------------
if [[ "${1:-}" == "--startup" ]]; then
    say ""
    say "## Where detection's seconds go (an empty directory)"
    mkdir -p "$WORK/detect" && cd "$WORK/detect" || exit 1
    "$PY" -X importtime -m pytest_accel detect >/dev/null 2>"$OUT/importtime.txt"
    say "- the slowest imports, cumulative microseconds:"
    grep '^import time:' "$OUT/importtime.txt" | sort -t'|' -k2 -n -r | head -15 \
        | sed 's/^/      /' | tee -a "$SUMMARY"
    "$PY" - >"$OUT/detect_profile.txt" 2>&1 <<'EOF'
import cProfile, pstats, sys
profile = cProfile.Profile()
profile.enable()
from pytest_accel.cli import main
main(["detect"])
profile.disable()
pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(40)
EOF
    say "- cProfile of \`pytest-accel detect\`, by cumulative seconds:"
    grep -E '^ +[0-9]' "$OUT/detect_profile.txt" | head -40 | sed 's/^/      /' \
        | tee -a "$SUMMARY"
    say ""
    say "## The plugin's cost on the JAX suite: bare, loaded, recording (4 rounds, interleaved)"
    cd "$WORK/jax" || exit 1
    "$PY" - "$PY" <<'EOF' | tee -a "$SUMMARY"
import statistics, subprocess, sys, time
python = sys.argv[1]
variants = {"bare": ["-p", "no:pytest_accel"], "loaded": [], "record": ["--perf-record=r.json"]}
seconds = {name: [] for name in variants}
for _ in range(4):
    for name, args in variants.items():
        began = time.perf_counter()
        subprocess.run([python, "-m", "pytest", "-q", *args], capture_output=True, check=False)
        seconds[name].append(time.perf_counter() - began)
bare = statistics.median(seconds["bare"])
for name, values in seconds.items():
    print(f"- {name}: median {statistics.median(values):.2f} s"
          f" ({statistics.median(values) / bare:.3f}x bare); runs "
          + ", ".join(f"{v:.2f}" for v in values))
EOF
    exit 0
fi

# --- detection --------------------------------------------------------------------
say ""
say "## Detection"
# In an empty directory, as in a project with no conftest.py: this repository's own
# conftest.py imports JAX, which the first run here timed as detection (5.3 s).
mkdir -p "$WORK/detect" && cd "$WORK/detect" || exit 1
start=$(date +%s.%N)
"$PY" -m pytest --version >/dev/null 2>&1
end=$(date +%s.%N)
say "- for scale: \`python -m pytest --version\` here took $(awk "BEGIN{printf \"%.2f\", $end - $start}") s"
start=$(date +%s.%N)
"${ACCEL[@]}" detect --json >"$OUT/detect.json" 2>"$OUT/detect.err"
end=$(date +%s.%N)
"${ACCEL[@]}" detect >"$OUT/detect.txt" 2>&1
sed 's/^/    /' "$OUT/detect.txt" | tee -a "$SUMMARY"
"$PY" - "$OUT/detect.json" "$start" "$end" <<'EOF' | tee -a "$SUMMARY"
import json, sys
found = json.load(open(sys.argv[1]))
seconds = float(sys.argv[3]) - float(sys.argv[2])
print(f"- detected {found.get('platform')} x{found.get('device_count')}"
      f" ({found.get('device_kind')}) via {found.get('source')} in {seconds:.2f} s"
      " (the whole command, Python's start included)")
EOF
PLATFORM=$("$PY" -c "import json;print(json.load(open('$OUT/detect.json')).get('platform'))")
if [[ "$PLATFORM" != "cuda" && -z "${GPU_CHECK_ALLOW_CPU:-}" ]]; then
    missed "no CUDA device detected (platform $PLATFORM): the rest needs one"
    exit 1
fi

mkdir -p "$WORK/refuse" && cd "$WORK/refuse" || exit 1
printf 'def test_a():\n    pass\n' >test_a.py
for accel in cuda gpu; do
    "$PY" -m pytest -q "--accel=$accel" >"$OUT/accel_$accel.txt" 2>&1
    status=$?
    if [[ $status == 0 ]]; then held "--accel=$accel accepted"; else missed "--accel=$accel: exit $status"; fi
done
"$PY" -m pytest -q --accel=tpu >"$OUT/accel_tpu.txt" 2>&1
status=$?
if [[ $status == 4 ]]; then
    held "--accel=tpu refused with exit 4: $(grep -m1 -i tpu "$OUT/accel_tpu.txt")"
else
    missed "--accel=tpu: exit $status (expected 4)"
fi

say ""
say "## Recording"
for suite in jax torch; do
    cd "$WORK/$suite" || exit 1
    TORCH_BACKEND=inductor "$PY" -m pytest -q --perf-record=record.json >"$OUT/${suite}_record.txt" 2>&1
    cp record.json "$OUT/${suite}_record.json" 2>/dev/null
    "$PY" - "$suite" record.json <<'EOF' | tee -a "$SUMMARY"
import json, sys
suite, path = sys.argv[1:]
try:
    tests = json.load(open(path))["tests"]
except (OSError, ValueError, KeyError) as exc:
    print(f"- [ ] {suite}: no record ({exc})")
    raise SystemExit
memory = tests.get("device_memory", {})
compiles = tests.get("compiles", {})
calls = dict(zip(tests["id"], tests["call"]))
mark = "x" if memory and compiles else " "
print(f"- [{mark}] {suite}: device memory of {len(memory)} test(s), compilations of"
      f" {len(compiles)}")
for test, peaks in memory.items():
    shown = ", ".join(f"{d} {b / 2**20:.1f} MiB" for d, b in peaks.items())
    bound = " (lower bound)" if test in tests.get("device_memory_bounded", []) else ""
    print(f"  - {test}: {shown}{bound}; call {calls[test]:.3f} s,"
          f" {compiles.get(test, 0)} compilation(s),"
          f" {tests.get('compile_seconds', {}).get(test, 0):.3f} s compiling,"
          f" {tests.get('recompiles', {}).get(test, 0)} recompilation(s)")
EOF
done

# test_matmul's peak was 192 MiB for 16 MiB matrices on the H200: if it is the
# compiler's autotuning scratch, it moves with the order as imports did.  Without it:
cd "$WORK/jax" || exit 1
XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_autotune_level=0" "$PY" -m pytest -q \
    --perf-record=untuned.json >"$OUT/jax_untuned.txt" 2>&1
"$PY" - untuned.json <<'EOF' | tee -a "$SUMMARY"
import json, sys
try:
    memory = json.load(open(sys.argv[1]))["tests"].get("device_memory", {})
except (OSError, ValueError) as exc:
    print(f"- without autotuning: no record ({exc})")
    raise SystemExit
peak = memory.get("test_jax_gpu.py::test_matmul", {})
print("- JAX test_matmul's peak without autotuning (--xla_gpu_autotune_level=0): "
      + (", ".join(f"{d} {b / 2**20:.1f} MiB" for d, b in peak.items()) or "none"))
EOF

say ""
say "## Injected regressions, against 3 unchanged runs"
for suite in jax torch; do
    cd "$WORK/$suite" || exit 1
    for _ in 1 2 3; do
        "$PY" -m pytest -q --perf-baseline=b.json --perf-update-baseline >>"$OUT/${suite}_baseline.txt" 2>&1
    done
done
# found LOG PATTERN WHAT: held where LOG has a line matching PATTERN (shown), else missed.
found() {
    local line
    line=$(grep -m1 -E "$2" "$OUT/$1")
    if [[ -n "$line" ]]; then held "$3: $line"; else missed "$3: not found ($1)"; fi
}
cd "$WORK/jax" || exit 1
GROW=1 "$PY" -m pytest -q --perf-baseline=b.json --perf-fail >"$OUT/jax_grown.txt" 2>&1
found jax_grown.txt "^MEMORY test test_jax_gpu.py::test_matmul" "JAX memory growth"
cd "$WORK/torch" || exit 1
GROW=1 "$PY" -m pytest -q --perf-baseline=b.json --perf-fail >"$OUT/torch_grown.txt" 2>&1
found torch_grown.txt "^MEMORY test test_torch_gpu.py::test_alloc" "PyTorch memory growth"
RECOMPILE=1 "$PY" -m pytest -q --perf-baseline=b.json --perf-fail >"$OUT/torch_recompiled.txt" 2>&1
found torch_recompiled.txt "^RECOMPILED test test_torch_gpu.py::test_compile" \
    "torch.compile recompilation"
# test_alloc's 64 MiB fit under the limit (the first run here asked that, and rightly
# found nothing); grown to 256 MiB it must not.
GROW=1 "$PY" -m pytest -q --accel-max-device-memory=128MiB >"$OUT/torch_limit.txt" 2>&1
found torch_limit.txt "is over --accel-max-device-memory" \
    "--accel-max-device-memory=128MiB, test_alloc grown to 256 MiB"

say ""
say "## A first torch.compile call (Inductor), apart"
# The first run here timed test_compile's call at 14.0 s and heard 3.7 s of compilation
# from Dynamo's callbacks: where the other seconds go.
"$PY" - <<'PROBE' 2>"$OUT/torch_first_call.err" | tee -a "$SUMMARY"
import time

began = time.perf_counter()
import torch

imported = time.perf_counter()
import torch._dynamo
from torch._dynamo.callback import callback_handler

dynamo = time.perf_counter()
spans, opened = [], []
callback_handler.register_start_callback(lambda *a: opened.append(time.perf_counter()))
callback_handler.register_end_callback(lambda *a: spans.append(time.perf_counter() - opened[-1]))
f = torch.compile(lambda x: x.sin() * 2, dynamic=False)
before = time.perf_counter()
f(torch.ones(1, device="cuda"))
torch.cuda.synchronize()
first = time.perf_counter()
f(torch.ones(2, device="cuda"))
torch.cuda.synchronize()
second = time.perf_counter()
f(torch.ones(2, device="cuda"))
torch.cuda.synchronize()
third = time.perf_counter()
print(f"- import torch {imported - began:.2f} s; import torch._dynamo {dynamo - imported:.2f} s")
print(f"- first call {first - before:.2f} s, a new shape {second - first:.2f} s,"
      f" the same shape again {third - second:.4f} s")
print(f"- Dynamo's compile callbacks: {len(spans)} span(s), "
      + ", ".join(f"{s:.2f} s" for s in spans))
try:
    print("- torch._dynamo.utils.compile_times():")
    for line in str(torch._dynamo.utils.compile_times(repr="str")).splitlines()[:12]:
        print(f"      {line}")
except Exception as exc:
    print(f"- compile_times: {type(exc).__name__}: {exc}")
PROBE

say ""
say "## A first torch.compile moved by a selection (einops' own suite, where installed)"
# bench/real_suite/first_compile.sh: three whole-suite runs as the baseline, then
# test_other.py alone, whose torch.compile test then pays torch.compile's imports.
EINOPS_TESTS=$("$PY" -c 'import einops.tests, os; print(os.path.dirname(einops.tests.__file__))' 2>/dev/null)
if [[ -f "$EINOPS_TESTS/test_other.py" ]]; then
    cd "$WORK" || exit 1
    OUT="$WORK/first" PYTHON="$PY" SUBSET="$EINOPS_TESTS/test_other.py" \
        DESELECT="$EINOPS_TESTS/test_other.py::test_einops_threading" \
        EINOPS_TEST_BACKENDS=numpy,torch bash "$ROOT/bench/real_suite/first_compile.sh" \
        "$EINOPS_TESTS" >"$OUT/einops_first_compile.txt" 2>&1
    if grep -q "^run [123]: REGRESSION" "$OUT/einops_first_compile.txt"; then
        missed "einops: a false regression where the first compile moved:"
        sed 's/^/    /' "$OUT/einops_first_compile.txt" | tee -a "$SUMMARY"
    elif grep -q "^run 3: perf:" "$OUT/einops_first_compile.txt"; then
        held "einops: no finding in 3 runs of test_other.py alone against 3 whole-suite runs"
    else
        missed "einops: the runs did not finish (einops_first_compile.txt)"
    fi
else
    say "- einops' tests are not installed here: skipped"
fi

say ""
say "## Two xdist workers on one GPU"
cd "$WORK/torch" || exit 1
"$PY" -m pytest -q -n 2 >"$OUT/xdist_pinned.txt" 2>&1
status=$?
say "- -n 2, pinned (the default): exit $status: $(grep -m1 -i 'workers\|device' "$OUT/xdist_pinned.txt")"
"$PY" -m pytest -q -n 2 --accel-pin=off --perf-record=xdist.json >"$OUT/xdist_shared.txt" 2>&1
status=$?
"$PY" - xdist.json "$status" <<'EOF' | tee -a "$SUMMARY"
import json, sys
try:
    tests = json.load(open(sys.argv[1]))["tests"]
except (OSError, ValueError) as exc:
    print(f"- [ ] -n 2 --accel-pin=off: exit {sys.argv[2]}, no record ({exc})")
    raise SystemExit
print(f"- -n 2 --accel-pin=off: exit {sys.argv[2]}; device memory per test:"
      f" {json.dumps(tests.get('device_memory', {}))}")
EOF

say ""
say "## Overhead: --perf-record against -p no:pytest_accel, paired"
cd "$WORK/torch" || exit 1
"$PY" - "$PY" <<'EOF' | tee -a "$SUMMARY"
import statistics, subprocess, sys, time
python = sys.argv[1]
def run(*args):
    began = time.perf_counter()
    subprocess.run([python, "-m", "pytest", "-q", *args], capture_output=True, check=False)
    return time.perf_counter() - began
ratios, bare_times = [], []
for _ in range(3):
    bare = run("-p", "no:pytest_accel")
    plugin = run("--perf-record=overhead.json")
    bare_times.append(bare)
    ratios.append(plugin / bare)
print(f"- 3 pairs: bare median {statistics.median(bare_times):.2f} s; --perf-record /"
      f" bare median {statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f})")
EOF

say ""
if [[ $FAILED == 0 ]]; then say "all checks held"; else say "$FAILED check(s) did not hold"; fi
exit "$FAILED"
