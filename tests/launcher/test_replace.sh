#!/usr/bin/env bash
# --replace-failed N: a failed rank is replaced by a process that runs the
# same command as a joiner (GANG_JOIN=1, GANG_REPLACES, GANG_REPLACEMENT; no
# GANG_RANK, GANG_SIZE, RANK, WORLD_SIZE) while the other ranks go on; the
# job succeeds when every process still counted exits 0. Without the option,
# or once the replacements are used up, a failure stops the job as before.
# A gang program in a joiner's environment is told to call gang_join.
#   test_replace.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

# What every process prints: who it is, as its environment says.
show='echo "rank=${GANG_RANK-none} size=${GANG_SIZE-none} RANK=${RANK-none} WORLD_SIZE=${WORLD_SIZE-none} join=${GANG_JOIN-none} replaces=${GANG_REPLACES-none} number=${GANG_REPLACEMENT-none} local=$GANG_LOCAL_RANK/$GANG_LOCAL_SIZE init=${GANG_INIT_METHOD%%:*} token=${GANG_STORE_TOKEN:+yes}"'

# body DIR RANK: rank RANK SIGKILLs itself; its replacement writes
# DIR/joined.<K>; the others wait for DIR/joined.1 (so they are still
# running when it starts: the job was not stopped) and exit 0.
body() {
  echo "$show
    if [ -n \"\${GANG_JOIN-}\" ]; then : > $1/joined.\$GANG_REPLACEMENT; exit 0; fi
    if [ \"\$GANG_RANK\" = $2 ]; then kill -9 \$\$; fi
    i=0; while [ ! -e $1/joined.1 ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i+1)); done
    [ -e $1/joined.1 ]"
}

note "--replace-failed 1: rank 1 is SIGKILLed, a joiner takes its place, exit 0"
mkdir "$TMP/d1"
"$GANGRUN" --replace-failed 1 --nproc-per-node 3 --prefix --log-dir "$TMP/logs" \
  -- sh -c "$(body "$TMP/d1" 1)" >"$TMP/out1" 2>"$TMP/err1"
rc=$?
[ $rc -eq 0 ] || { cat "$TMP/out1" "$TMP/err1" >&2; fail "exit status $rc, expected 0"; }
expect_grep '^gangrun: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\); starting join 1 in its place \(GANG_JOIN=1 GANG_REPLACES=1, replacement 1 of 1\)$' \
  "$TMP/err1" "the replacement line"
expect_grep '^\[join 1\] rank=none size=none RANK=none WORLD_SIZE=none join=1 replaces=1 number=1 local=1/3 init=tcp token=yes$' \
  "$TMP/out1" "the joiner's environment"
expect_grep '^\[rank 2\] rank=2 size=3 RANK=2 WORLD_SIZE=3 join=none replaces=none number=none local=2/3 init=tcp token=yes$' \
  "$TMP/out1" "a rank's environment"
[ "$(grep -c 'join=1' "$TMP/out1")" -eq 1 ] || fail "more than one joiner"
expect_grep '^rank=none .* join=1 replaces=1 number=1 ' "$TMP/logs/join-1.log" \
  "--tee writes join-1.log"
expect_grep '^rank=1 ' "$TMP/logs/rank-1.log" "--tee keeps rank-1.log"

note "--replace-failed 0 (the default): the first failure stops the job"
mkdir "$TMP/d2"
start=$(now)
"$GANGRUN" --replace-failed 0 --nproc-per-node 3 -- sh -c "$(body "$TMP/d2" 1)" \
  >"$TMP/out2" 2>"$TMP/err2"
rc=$?
[ $rc -eq 137 ] || { cat "$TMP/err2" >&2; fail "exit status $rc, expected 137"; }
less_than "$(elapsed "$start")" 8 || fail "the others were not stopped in time"
expect_grep '^gangrun: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\)$' \
  "$TMP/err2" "the failure line"
grep -q 'join=1' "$TMP/out2" && fail "a joiner ran without --replace-failed"

note "--replace-failed 1, two failures: the second stops the job"
mkdir "$TMP/d3"
start=$(now)
"$GANGRUN" --replace-failed 1 --nproc-per-node 3 -- sh -c "
  if [ -n \"\${GANG_JOIN-}\" ]; then : > $TMP/d3/joined; exit 4; fi
  if [ \"\$GANG_RANK\" = 2 ]; then exit 3; fi
  $(sleeper "" "$TMP/d3")" >"$TMP/out3" 2>"$TMP/err3"
rc=$?
[ $rc -eq 4 ] || { cat "$TMP/err3" >&2; fail "exit status $rc, expected 4"; }
less_than "$(elapsed "$start")" 8 || fail "the others were not stopped in time"
[ -e "$TMP/d3/joined" ] || fail "no joiner ran"
expect_grep '^gangrun: rank 2 \(pid [0-9]+\) exited with status 3; starting join 1 in its place' \
  "$TMP/err3" "the first failure is replaced"
expect_grep '^gangrun: join 1 \(pid [0-9]+\) exited with status 4$' "$TMP/err3" \
  "the joiner's failure line"
expect_grep '^gangrun: no replacement left \(--replace-failed 1: 1 replacement started\)$' \
  "$TMP/err3" "the limit"
all_gone "$TMP/d3" 2 || fail "ranks left running"

note "--replace-failed 2: a rank and its replacement fail, join 2 finishes"
mkdir "$TMP/d4"
"$GANGRUN" --replace-failed 2 --nproc-per-node 3 -- sh -c "$show
  if [ \"\${GANG_REPLACEMENT-}\" = 1 ]; then exit 5; fi
  if [ \"\${GANG_REPLACEMENT-}\" = 2 ]; then : > $TMP/d4/joined.1; exit 0; fi
  $(body "$TMP/d4" 0 | tail -n +3)" >"$TMP/out4" 2>"$TMP/err4"
rc=$?
[ $rc -eq 0 ] || { cat "$TMP/out4" "$TMP/err4" >&2; fail "exit status $rc, expected 0"; }
expect_grep '^gangrun: join 1 \(pid [0-9]+\) exited with status 5; starting join 2 in its place \(GANG_JOIN=1 GANG_REPLACES=0, replacement 2 of 2\)$' \
  "$TMP/err4" "join 2 replaces join 1, in rank 0's place"
expect_grep '^rank=none .* join=1 replaces=0 number=2 local=0/3 ' "$TMP/out4" \
  "join 2's environment"

note "GANG_JOIN in gangrun's own environment does not reach the ranks"
GANG_JOIN=1 GANG_REPLACES=7 GANG_REPLACEMENT=1 "$GANGRUN" --replace-failed 1 \
  --nproc-per-node 2 -- "$PROG" --from-env >"$TMP/out5" 2>"$TMP/err5" \
  || { cat "$TMP/err5" >&2; fail "ranks under GANG_JOIN=1 failed"; }
expect_grep '^rank 1 of 2: sum 3 ok$' "$TMP/out5" "rank 1"

note "gang_create in a joiner's environment says to call gang_join"
env -u GANG_RANK -u GANG_SIZE GANG_JOIN=1 GANG_REPLACES=2 \
  GANG_INIT_METHOD=tcp://127.0.0.1:1 "$PROG" --from-env >/dev/null 2>"$TMP/err6"
rc=$?
[ $rc -eq 1 ] || { cat "$TMP/err6" >&2; fail "exit status $rc, expected 1"; }
expect_grep 'GANG_ERR_INVALID_ARGUMENT: gang_create: this process was started to join a running gang \(GANG_JOIN=1, in place of rank 2\).*call gang_join' \
  "$TMP/err6" "the refusal"

note "options: --replace-failed wants a count"
"$GANGRUN" --replace-failed -1 -- true 2>"$TMP/err7"
[ $? -eq 2 ] || fail "--replace-failed -1 was accepted"
expect_grep '^gangrun: --replace-failed wants an integer in \[0, 65536\]' "$TMP/err7" \
  "the usage error"
"$GANGRUN" --help | grep -q -- '--replace-failed N' || fail "--help lacks --replace-failed"
echo PASS
