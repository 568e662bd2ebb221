#!/bin/bash
# Tracing judged on a busy runner (docs/regressions.md, "Tracing"): in a clone of a JAX
# suite, UNCHANGED serial runs (default 8) and then SLOWED runs (default 3) of the
# clone's branch SLOW_BRANCH (a slowdown committed into a function its tests trace, as
# slowdown.sh commits one), all beside LOADERS copies of LOAD_SEL in a loop (load.sh's
# load). Then each unchanged run is compared with a baseline of those before it and
# each slowed run with the baseline of all of them, by this tree and by the tree whose
# src/ is OLD_SRC, each folding its own baseline. Prints a line per comparison.
#   cd dm_pix && SEL="dm_pix/_src/interpolation_test.py" SLOW_BRANCH=trace-slowdown \
#     LOAD_SEL=dm_pix/_src/color_conversion_test.py OLD_SRC=/tmp/before/src OUT=/tmp/busy \
#     bash /path/to/bench/real_suite/busy_tracing.sh
set -u
SEL=${SEL:?the tests to run}
SLOW_BRANCH=${SLOW_BRANCH:?the branch with the slowdown committed}
LOAD_SEL=${LOAD_SEL:?the tests to run beside}
OLD_SRC=${OLD_SRC:?the src directory of the tree to compare with}
OUT=${OUT:?where the records go}
PYTHON=${PYTHON:-python}
NEW_SRC=$(cd "$(dirname "$0")/../../src" && pwd)
export JAX_PLATFORMS=cpu
mkdir -p "$OUT"
back=$(git rev-parse --abbrev-ref HEAD)
loaders=()
for _ in $(seq "${LOADERS:-3}"); do
  # shellcheck disable=SC2086  # LOAD_SEL is a list of arguments
  (while true; do $PYTHON -m pytest -q -p no:cacheprovider -p no:pytest_accel $LOAD_SEL >/dev/null 2>&1; done) &
  loaders+=($!)
done
trap 'kill "${loaders[@]}" 2>/dev/null; git checkout -q "$back"' EXIT
sleep 5
unchanged=() slowed=()
for i in $(seq "${UNCHANGED:-8}"); do
  # shellcheck disable=SC2086  # SEL is a list of arguments
  PYTHONPATH=$NEW_SRC $PYTHON -m pytest -q -p no:cacheprovider $SEL --perf-record="$OUT/u$i.json" >/dev/null
  unchanged+=("$OUT/u$i.json")
done
git checkout -q "$SLOW_BRANCH"
for i in $(seq "${SLOWED:-3}"); do
  # shellcheck disable=SC2086
  PYTHONPATH=$NEW_SRC $PYTHON -m pytest -q -p no:cacheprovider $SEL --perf-record="$OUT/s$i.json" >/dev/null
  slowed+=("$OUT/s$i.json")
done
git checkout -q "$back"
kill "${loaders[@]}" 2>/dev/null
judge() {  # record, tree's src, tree's name
  PYTHONPATH=$2 $PYTHON -m pytest_accel compare "$1" --baseline "$OUT/base-$3.json" \
    --format json 2>/dev/null | $PYTHON -c '
import json, sys
found = json.load(sys.stdin)
tracing = [f["kind"] for f in found["regressions"] if f.get("tracing")]
share = (found.get("cpu_wait") or {}).get("share")
print(sys.argv[1], sys.argv[2], len(found["regressions"]), "regression(s),",
      len(tracing), "of tracing", sorted(set(tracing)), "- waits", share)' "$(basename "$1")" "$3"
}
for record in "${unchanged[@]}"; do
  for tree in old new; do
    src=$NEW_SRC; [ "$tree" = old ] && src=$OLD_SRC
    [ -f "$OUT/base-$tree.json" ] && judge "$record" "$src" "$tree"
    PYTHONPATH=$src $PYTHON -m pytest_accel baseline "$record" --into "$OUT/base-$tree.json" >/dev/null
  done
done
for record in "${slowed[@]}"; do
  for tree in old new; do
    src=$NEW_SRC; [ "$tree" = old ] && src=$OLD_SRC
    judge "$record" "$src" "$tree"
  done
done
