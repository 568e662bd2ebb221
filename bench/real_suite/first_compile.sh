#!/bin/bash
# The first torch.compile of a process, moved by a path selection, on a real suite
# (docs/regressions.md, "torch.compile"): three runs of the whole suite as the baseline,
# then SUBSET alone three times, in which another test is the first to compile and
# pays torch.compile's imports.  Prints each subset run's perf findings.
#   pip install torch einops==0.8.2 (its sdist holds the tests), then, in its tree:
#   OUT=/tmp/first SUBSET=einops/tests/test_other.py \
#     DESELECT=einops/tests/test_other.py::test_einops_threading \
#     EINOPS_TEST_BACKENDS=numpy,torch bash first_compile.sh einops/tests
# OLD_SRC=DIR: the same with another tree's plugin (its src), to compare.
set -eu
SUITE=${1:?the path of the whole suite}
SUBSET=${SUBSET:?the tests to run alone}
OUT=${OUT:?where the baseline and records go}
PYTHON=${PYTHON:-python}
mkdir -p "$OUT"
export TORCHINDUCTOR_CACHE_DIR=$OUT/inductor-cache  # warm after the first run
if [[ -n "${OLD_SRC:-}" ]]; then export PYTHONPATH=$OLD_SRC; fi
args=(-q -p no:cacheprovider ${DESELECT:+--deselect "$DESELECT"} --perf-baseline="$OUT/baseline.json")
rm -f "$OUT/baseline.json"
for i in 1 2 3; do
    $PYTHON -m pytest "$SUITE" "${args[@]}" --perf-update-baseline >"$OUT/full_$i.txt" 2>&1 || true
done
for i in 1 2 3; do
    $PYTHON -m pytest "$SUBSET" "${args[@]}" --perf-record="$OUT/subset_$i.json" >"$OUT/subset_$i.txt" 2>&1 || true
    grep -E "^(REGRESSION|CHANGED|perf:)" "$OUT/subset_$i.txt" | sed "s/^/run $i: /"
done
