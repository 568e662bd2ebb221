#!/bin/bash
# A slowdown committed into a real suite whose runs keep a dependency map, as a trusted
# branch's CI does (docs/regressions.md, "The changed code a slower test runs"): BASE
# (default 5) mapping runs at the suite's commit, each recorded; then SLEEP seconds
# (default 0.01; or LINE) added at the top of FUNCTION in FILE and committed on a branch
# of a clone; then, for each baseline size in SIZES (default "3 5"), RUNS (default 3)
# mapping runs, each compared with a baseline of the newest SIZE base runs and folded
# into it (--perf-update-baseline).  What each run said is kept in OUT; the alarms and
# the changed code named are printed.
#   cd quax && FILE=quax/examples/zero/_core.py FUNCTION=_shape_dtype \
#     SEL=tests/test_zero.py OUT=/tmp/named bash named_slowdown.sh
set -eu
FILE=${FILE:?the file to slow down}
FUNCTION=${FUNCTION:?the function to slow down}
SEL=${SEL:?the tests to run}
OUT=${OUT:?where the records and outputs go}
PYTHON=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
export JAX_PLATFORMS=cpu
mkdir -p "$OUT"
clone="$OUT/clone"
[ -d "$clone" ] || git clone -q . "$clone"
cd "$clone"
git checkout -q "$(git -C "$OLDPWD" rev-parse HEAD)"
run() {  # a mapping run of SEL, its output kept as $1.txt
  local name=$1
  shift
  # shellcheck disable=SC2086  # SEL is a list of arguments
  $PYTHON -m pytest -q -p no:cacheprovider $SEL --accel-map="$OUT/map.db" \
    --accel-map-programs=off "$@" >"$OUT/$name.txt" 2>&1 || true
}
for i in $(seq "${BASE:-5}"); do  # kept from an earlier attempt where they are there
  [ -f "$OUT/base$i.json" ] || run "base$i" --perf-record="$OUT/base$i.json"
done
for size in ${SIZES:-3 5}; do
  first=$((${BASE:-5} - size + 1))
  records=()
  for i in $(seq "$first" "${BASE:-5}"); do records+=("$OUT/base$i.json"); done
  rm -f "$OUT/baseline$size.json"
  $PYTHON -m pytest_accel baseline --into "$OUT/baseline$size.json" "${records[@]}" >/dev/null
done
LINE=${LINE:-"import time; time.sleep(${SLEEP:-0.01})  # an injected slowdown"}
$PYTHON "$here/inject.py" "$FILE" "$FUNCTION" "$LINE"
git -c user.name=bench -c user.email=bench@localhost commit -q -am "Injected in $FUNCTION: $LINE"
echo "slowdown committed as $(git rev-parse --short=12 HEAD)"
for size in ${SIZES:-3 5}; do
  for i in $(seq "${RUNS:-3}"); do
    run "slow${size}_$i" --perf-baseline="$OUT/baseline$size.json" --perf-update-baseline
    echo "== baseline of $size runs, run $i after the change"
    grep -E "^(REGRESSION|CHANGED|RECOMPILED|  changed code|perf: )" "$OUT/slow${size}_$i.txt" || true
  done
done
