#!/usr/bin/env bash
# Signals: SIGINT and SIGTERM to gangrun reach every rank; a second SIGINT
# kills hard; gangrun killed by SIGKILL takes its ranks along. No rank is
# left running in any case.
#   test_signals.sh GANGRUN
GANGRUN=$1
. "$(dirname "$0")/lib.sh"

# run_bg NAME ARGS...: starts gangrun in the background (so SIGINT is
# ignored on entry, as for any `cmd &` of a script: gangrun must handle it
# anyway), waits until its 4 ranks recorded their pids.
run_bg() {
  local name=$1
  shift
  mkdir "$TMP/$name"
  "$GANGRUN" --nproc-per-node 4 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PID=$!
  wait_files 4 "$TMP/$name/pid." 20 || fail "$name: the ranks did not start"
}

# finish NAME EXPECTED LIMIT: waits for gangrun, checks its status and time.
finish() {
  local name=$1 expected=$2 limit=$3 rc start
  start=$(now)
  wait "$PID"
  rc=$?
  [ "$rc" -eq "$expected" ] || {
    cat "$TMP/$name.err" >&2
    fail "$name: exit status $rc, expected $expected"
  }
  less_than "$(elapsed "$start")" "$limit" || fail "$name: took too long"
  all_gone "$TMP/$name" 2 || fail "$name: ranks left running"
}

note "SIGINT"
run_bg int -- sh -c "$(sleeper "" "$TMP/int")"
kill -INT "$PID"
finish int 130 5
expect_grep '^gangrun: received SIGINT' "$TMP/int.err" "SIGINT line"

note "SIGTERM"
run_bg term -- sh -c "$(sleeper "" "$TMP/term")"
kill -TERM "$PID"
finish term 143 5

note "ranks ignoring SIGINT are killed after the grace period"
run_bg grace --grace 1 -- sh -c "$(sleeper "trap '' INT;" "$TMP/grace")"
kill -INT "$PID"
finish grace 130 5
expect_grep 'SIGKILL' "$TMP/grace.err" "the SIGKILL escalation"

note "a second SIGINT kills hard"
run_bg twice --grace 60 -- sh -c "$(sleeper "trap '' INT TERM;" "$TMP/twice")"
kill -INT "$PID"
sleep 0.3
kill -INT "$PID"
finish twice 130 5
expect_grep 'again; sending SIGKILL' "$TMP/twice.err" "hard kill line"

note "gangrun killed by SIGKILL: its ranks die with it"
run_bg hard -- sh -c "$(sleeper "trap '' INT TERM HUP;" "$TMP/hard")"
kill -KILL "$PID"
wait "$PID" 2>/dev/null
all_gone "$TMP/hard" 3 || fail "ranks outlived gangrun"
echo PASS
