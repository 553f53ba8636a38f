#!/usr/bin/env bash
# Output: whole lines, --prefix on each line of stdout and stderr, a last
# line without '\n', long outputs intact, and --tee/--log-dir files.
#   test_output.sh GANGRUN
GANGRUN=$1
. "$(dirname "$0")/lib.sh"

note "--prefix"
"$GANGRUN" --nproc-per-node 3 --prefix -- sh -c \
  'echo "hello $GANG_RANK"; echo "oops $GANG_RANK" >&2; printf "partial $GANG_RANK"' \
  >"$TMP/out" 2>"$TMP/err" || fail "gangrun failed"
for r in 0 1 2; do
  expect_grep "^\[rank $r\] hello $r$" "$TMP/out" "stdout of rank $r"
  expect_grep "^\[rank $r\] partial $r$" "$TMP/out" "last partial line of rank $r"
  expect_grep "^\[rank $r\] oops $r$" "$TMP/err" "stderr of rank $r"
done
[ "$(wc -l <"$TMP/out")" -eq 6 ] || fail "expected 6 stdout lines"
[ "$(wc -l <"$TMP/err")" -eq 3 ] || fail "expected 3 stderr lines"

note "no prefix: output passes unchanged"
"$GANGRUN" --nproc-per-node 2 -- sh -c 'echo "plain $GANG_RANK"' >"$TMP/plain" \
  || fail "gangrun failed"
expect_grep '^plain 0$' "$TMP/plain" "rank 0's line"
expect_grep '^plain 1$' "$TMP/plain" "rank 1's line"

note "many lines from every rank, never torn"
"$GANGRUN" --nproc-per-node 4 --prefix -- sh -c \
  'seq 1 20000 | sed "s/^/line-$GANG_RANK-/"' >"$TMP/many" || fail "gangrun failed"
[ "$(wc -l <"$TMP/many")" -eq 80000 ] || fail "expected 80000 lines"
bad=$(grep -Evc '^\[rank ([0-3])\] line-\1-[0-9]+$' "$TMP/many")
[ "$bad" -eq 0 ] || fail "$bad torn or mislabelled lines"
for r in 0 1 2 3; do
  [ "$(grep -c "^\[rank $r\] " "$TMP/many")" -eq 20000 ] || fail "rank $r lost lines"
done

note "--tee --log-dir"
"$GANGRUN" --nproc-per-node 2 --prefix --tee --log-dir "$TMP/logs" -- sh -c \
  'echo "out $GANG_RANK"; echo "err $GANG_RANK" >&2' >"$TMP/tee.out" 2>"$TMP/tee.err" \
  || fail "gangrun failed"
for r in 0 1; do
  f="$TMP/logs/rank-$r.log"
  [ -f "$f" ] || fail "$f missing"
  expect_grep "^out $r$" "$f" "rank $r's log"
  expect_grep "^err $r$" "$f" "rank $r's log"
  expect_grep "^\[rank $r\] out $r$" "$TMP/tee.out" "the console copy"
done
echo PASS
