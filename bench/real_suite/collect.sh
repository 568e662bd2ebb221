#!/bin/bash
# Records of a real suite, unchanged, in three layouts, interleaved (docs/regressions.md,
# "On a real suite"): in each round a serial run, a run with -n 2 and two shard jobs.
#   cd optax-0.2.8 && OUT=/tmp/runs bash /path/to/bench/real_suite/collect.sh
# SEL: the tests to run (default: optax's projections, tree_utils and transforms);
# FIRST/LAST: the rounds (default 1-8).
set -u
SEL=${SEL:-"optax/projections optax/tree_utils optax/transforms --ignore optax/transforms/_accumulation_test.py"}
OUT=${OUT:?where the records go}
PYTHON=${PYTHON:-python}
export JAX_PLATFORMS=cpu
mkdir -p "$OUT"
for i in $(seq "${FIRST:-1}" "${LAST:-8}"); do
  # shellcheck disable=SC2086  # SEL is a list of arguments
  $PYTHON -m pytest -q -p no:cacheprovider $SEL --perf-record="$OUT/serial$i.json" >/dev/null
  $PYTHON -m pytest -q -p no:cacheprovider $SEL -n 2 --perf-record="$OUT/xdist$i.json" >/dev/null
  $PYTHON -m pytest -q -p no:cacheprovider $SEL --accel-shard=1/2 --perf-record="$OUT/s1_$i.json" >/dev/null
  $PYTHON -m pytest -q -p no:cacheprovider $SEL --accel-shard=2/2 --perf-record="$OUT/s2_$i.json" >/dev/null
  echo "round $i done $(date +%T)"
done
