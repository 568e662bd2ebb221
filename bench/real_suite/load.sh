#!/bin/bash
# Another suite running beside the one measured, as on a shared CI runner: LOADERS
# copies (default 3) of a pytest run in a loop, in their own process group, until
# killed.  With collect.sh's serial run the 2-core machine's load is 4, with -n 2 5.
#   cd dm_pix && LOAD_SEL=dm_pix/_src/color_conversion_test.py bash load.sh &
set -u
LOAD_SEL=${LOAD_SEL:?the tests to run beside}
PYTHON=${PYTHON:-python}
export JAX_PLATFORMS=cpu
for _ in $(seq "${LOADERS:-3}"); do
  # shellcheck disable=SC2086  # LOAD_SEL is a list of arguments
  (while true; do $PYTHON -m pytest -q -p no:cacheprovider -p no:accel $LOAD_SEL >/dev/null 2>&1; done) &
done
wait
