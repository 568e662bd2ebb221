#!/bin/bash
# A slowdown committed into a real suite, judged run after run as CI would
# (docs/regressions.md, "On a real suite"): SLEEP seconds (default 0.02) added at the
# top of FUNCTION in FILE (a function many tests call, some while JAX traces them),
# committed on a branch of the suite's clone; then RUNS (default 3) serial runs, each
# recorded, compared with each baseline given and folded into it, as
# --perf-update-baseline does.  The clone is put back on its branch afterwards.
#   cd dm_pix && FILE=dm_pix/_src/interpolation.py FUNCTION=_make_linear_interpolation_indices_nd \
#     SEL="dm_pix/_src/interpolation_test.py" OUT=/tmp/slow \
#     bash slowdown.sh base3.json base5.json
set -eu
FILE=${FILE:?the file to slow down}
FUNCTION=${FUNCTION:?the function to slow down}
SEL=${SEL:?the tests to run}
OUT=${OUT:?where the records and judgements go}
PYTHON=${PYTHON:-python}
SLEEP=${SLEEP:-0.02}
export JAX_PLATFORMS=cpu
mkdir -p "$OUT"
back=$(git rev-parse --abbrev-ref HEAD)
git checkout -q -B "injected-$FUNCTION"
# LINE: what is injected instead of the sleep (a per-call jax.jit, say); a method's name
# works as FUNCTION too (its first definition in FILE).
LINE=${LINE:-"import time; time.sleep($SLEEP)  # an injected slowdown"}
$PYTHON "$(cd "$(dirname "$0")" && pwd)/inject.py" "$FILE" "$FUNCTION" "$LINE"
git commit -q -am "Injected in $FUNCTION: $LINE"
commit=$(git rev-parse --short HEAD)
echo "slowdown committed as $commit"
for baseline in "$@"; do cp "$baseline" "$OUT/$(basename "$baseline")"; done
for i in $(seq "${RUNS:-3}"); do
  # shellcheck disable=SC2086  # SEL is a list of arguments
  $PYTHON -m pytest -q -p no:cacheprovider $SEL --perf-record="$OUT/slow$i.json" >/dev/null || true
  for baseline in "$@"; do
    copy="$OUT/$(basename "$baseline")"
    $PYTHON -m pytest_accel compare "$OUT/slow$i.json" --baseline "$copy" \
      > "$OUT/slow$i-vs-$(basename "$baseline" .json).txt" || true
    $PYTHON -m pytest_accel compare "$OUT/slow$i.json" --baseline "$copy" --format json \
      > "$OUT/slow$i-vs-$(basename "$baseline" .json).json" || true
    $PYTHON -m pytest_accel baseline "$OUT/slow$i.json" --into "$copy" >/dev/null
  done
  echo "slowed run $i done $(date +%T)"
done
git checkout -q "$back"
