#!/usr/bin/env bash
# A job under an address-space limit (ulimit -v): the README's demo on 2
# ranks, on the default backend (shm: one host) and on gloo, must run. gang
# reserves address space for its handles as they come, not a gigabyte up
# front, which such a limit refused ("cannot reserve 1073741824 bytes").
#   test_memory_limit.sh GANGRUN TRAIN_LINEAR
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

LIMIT_KB=600000
for backend in auto gloo; do
  note "train_linear on $backend under ulimit -v $LIMIT_KB"
  (ulimit -v "$LIMIT_KB" &&
     "$GANGRUN" --nproc-per-node 2 --timeout 120 -- "$PROG" --backend "$backend") \
    >"$TMP/out" 2>"$TMP/err" || {
    cat "$TMP/out" "$TMP/err" >&2
    fail "train_linear ($backend) failed under ulimit -v $LIMIT_KB"
  }
  expect_grep '^OK: parameters identical and converged on all 2 ranks$' "$TMP/out" \
    "train_linear ($backend)"
done
echo PASS
