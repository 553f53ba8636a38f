#!/usr/bin/env bash
# Fail-fast: when one rank exits non-zero or is killed, gangrun stops the
# others (SIGTERM, then SIGKILL after --grace), names the rank, and exits
# with its status.
#   test_failure.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

# 1. A gang program: rank 2 exits 3 after the gang is made, the others are
#    in an all-reduce with it.
note "gang program, rank 2 exits 3"
start=$(now)
"$GANGRUN" --nproc-per-node 4 --grace 5 -- "$PROG" --exit-rank 2 --exit-code 3 \
  >"$TMP/out1" 2>"$TMP/err1"
rc=$? t=$(elapsed "$start")
[ $rc -eq 3 ] || { cat "$TMP/err1" >&2; fail "exit status $rc, expected 3"; }
less_than "$t" 5 || fail "took $t s, more than the 5 s grace period"
expect_grep '^gangrun: rank 2 \(pid [0-9]+\) exited with status 3$' "$TMP/err1" \
  "failure line"

# 2. Ranks that ignore SIGTERM are killed after the grace period.
note "rank 2 exits 3, the others ignore SIGTERM"
mkdir "$TMP/d2"
start=$(now)
"$GANGRUN" --nproc-per-node 4 --grace 1 -- sh -c \
  "if [ \"\$GANG_RANK\" = 2 ]; then
     while [ \$(ls $TMP/d2 | wc -l) -lt 3 ]; do sleep 0.05; done; exit 3
   fi; $(sleeper "trap '' TERM;" "$TMP/d2")" >"$TMP/out2" 2>"$TMP/err2"
rc=$? t=$(elapsed "$start")
[ $rc -eq 3 ] || { cat "$TMP/err2" >&2; fail "exit status $rc, expected 3"; }
less_than 0.9 "$t" || fail "took $t s: the grace period was not waited out"
less_than "$t" 4 || fail "took $t s with --grace 1"
expect_grep '^gangrun: rank 2 \(pid [0-9]+\) exited with status 3$' "$TMP/err2" \
  "failure line"
expect_grep 'SIGKILL' "$TMP/err2" "the SIGKILL escalation"
all_gone "$TMP/d2" 2 || fail "ranks left running"

# 3. A rank killed by SIGKILL: exit 128+9 and the line.
note "rank 1 is killed by SIGKILL"
mkdir "$TMP/d3"
start=$(now)
"$GANGRUN" --nproc-per-node 4 -- sh -c \
  "if [ \"\$GANG_RANK\" = 1 ]; then
     while [ \$(ls $TMP/d3 | wc -l) -lt 3 ]; do sleep 0.05; done; kill -9 \$\$
   fi; $(sleeper "" "$TMP/d3")" >"$TMP/out3" 2>"$TMP/err3"
rc=$? t=$(elapsed "$start")
[ $rc -eq 137 ] || { cat "$TMP/err3" >&2; fail "exit status $rc, expected 137"; }
less_than "$t" 5 || fail "took $t s, more than the grace period"
expect_grep '^gangrun: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\)$' \
  "$TMP/err3" "failure line"
all_gone "$TMP/d3" 2 || fail "ranks left running"

# 4. Success needs every rank: one rank exiting 0 early does not stop others.
note "rank 0 exits 0 early, the others finish later"
"$GANGRUN" --nproc-per-node 3 -- sh -c \
  '[ "$GANG_RANK" = 0 ] && exit 0; sleep 0.5; echo "rank $GANG_RANK done"' \
  >"$TMP/out4" 2>"$TMP/err4"
rc=$?
[ $rc -eq 0 ] || { cat "$TMP/err4" >&2; fail "exit status $rc, expected 0"; }
[ "$(grep -c done "$TMP/out4")" -eq 2 ] || fail "ranks 1 and 2 were cut short"

# 5. --timeout ends the job with 124.
note "--timeout"
start=$(now)
"$GANGRUN" --nproc-per-node 2 --timeout 1 -- sleep 60 >"$TMP/out5" 2>"$TMP/err5"
rc=$? t=$(elapsed "$start")
[ $rc -eq 124 ] || { cat "$TMP/err5" >&2; fail "exit status $rc, expected 124"; }
less_than "$t" 4 || fail "took $t s with --timeout 1"
expect_grep '^gangrun: timed out after 1 s' "$TMP/err5" "timeout line"

# 6. A program that cannot run.
note "missing program"
"$GANGRUN" --nproc-per-node 2 -- "$TMP/no-such-program" 2>"$TMP/err6"
rc=$?
[ $rc -eq 1 ] || fail "exit status $rc for a missing program, expected 1"
expect_grep '^gangrun: cannot run' "$TMP/err6" "missing program line"
echo PASS
