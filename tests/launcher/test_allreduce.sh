#!/usr/bin/env bash
# gangrun starts 4 ranks of a gang program that all-reduce across the store
# gangrun hosts; every rank checks the sum.
#   test_allreduce.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

"$GANGRUN" --nproc-per-node 4 -- "$PROG" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "gangrun exited $rc"; }
for r in 0 1 2 3; do
  expect_grep "^rank $r of 4: sum 10 ok$" "$TMP/out" "rank $r"
done
[ "$(wc -l <"$TMP/out")" -eq 4 ] || fail "expected 4 lines of output"
echo PASS
