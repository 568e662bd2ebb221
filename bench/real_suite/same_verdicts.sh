#!/bin/bash
# Whether a change to the comparison changed any verdict on a real suite's history:
# each record of RUNS (collect.sh's, in name order) is compared with a baseline of the
# records before it, by this tree's `pytest-accel compare --format json` and by the
# tree whose src/ is OLD_SRC, then folded in. Prints the comparisons that differ and a
# count of the regressions and changes among the identical ones.
#   OLD_SRC=/tmp/before/src RUNS=/tmp/pix_runs bash bench/real_suite/same_verdicts.sh
set -u
RUNS=${RUNS:?a directory of records}
OLD_SRC=${OLD_SRC:?the src directory of the tree to compare with}
PYTHON=${PYTHON:-python}
NEW_SRC=$(cd "$(dirname "$0")/../../src" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
compared=0 identical=0 regressions=0 changes=0
for record in $(find "$RUNS" -name '*.json' | sort -V); do
  if [ -f "$OUT/base.json" ]; then
    PYTHONPATH=$OLD_SRC $PYTHON -m pytest_accel compare "$record" --baseline "$OUT/base.json" \
      --format json >"$OUT/then.json" 2>&1
    then_status=$?
    PYTHONPATH=$NEW_SRC $PYTHON -m pytest_accel compare "$record" --baseline "$OUT/base.json" \
      --format json >"$OUT/now.json" 2>&1
    now_status=$?
    compared=$((compared + 1))
    if [ "$then_status" = "$now_status" ] && cmp -s "$OUT/then.json" "$OUT/now.json"; then
      identical=$((identical + 1))
      read -r found changed < <($PYTHON -c 'import json, sys
found = json.load(open(sys.argv[1]))
print(len(found["regressions"]), len(found["changes"]))' "$OUT/now.json")
      regressions=$((regressions + found)) changes=$((changes + changed))
    else
      echo "differs: $record (exit $then_status, now $now_status)"
    fi
  fi
  PYTHONPATH=$NEW_SRC $PYTHON -m pytest_accel baseline "$record" --into "$OUT/base.json" >/dev/null 2>&1 ||
    echo "not folded: $record"
done
echo "$RUNS: $compared comparison(s), $identical identical ($regressions regression(s), $changes change(s) among them)"
