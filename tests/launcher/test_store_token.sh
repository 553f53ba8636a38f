#!/usr/bin/env bash
# gangrun's store and its token: each job's ranks get a fresh random
# GANG_STORE_TOKEN (or the one gangrun was given) and the store refuses
# clients without it; --store-bind chooses where the store listens; several
# nodes share a token set on each, and a node with another one is refused
# at once.
#   test_store_token.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

show='echo "$GANG_RANK ${GANG_STORE_TOKEN-unset} $GANG_INIT_METHOD"'

note "one node: a random token per job, the same for every rank"
unset GANG_STORE_TOKEN
"$GANGRUN" --nproc-per-node 3 -- sh -c "$show" >"$TMP/a" 2>"$TMP/a.err" ||
  { cat "$TMP/a.err" >&2; fail "gangrun failed"; }
"$GANGRUN" --nproc-per-node 1 -- sh -c "$show" >"$TMP/b" 2>"$TMP/b.err" ||
  { cat "$TMP/b.err" >&2; fail "gangrun failed"; }
for r in 0 1 2; do
  expect_grep "^$r [0-9a-f]{32} tcp://127\.0\.0\.1:[0-9]+$" "$TMP/a" "rank $r's token"
done
[ "$(awk '{print $2}' "$TMP/a" | sort -u | wc -l)" -eq 1 ] || fail "ranks got different tokens"
[ "$(awk '{print $2}' "$TMP/a" | sort -u)" != "$(awk '{print $2}' "$TMP/b")" ] ||
  fail "two jobs got the same token"

note "a rank without the token is refused; with it, the job runs"
"$GANGRUN" --nproc-per-node 2 -- env -u GANG_STORE_TOKEN "$PROG" \
  >"$TMP/c.out" 2>"$TMP/c.err"
[ $? -ne 0 ] || fail "ranks without the token were served"
expect_grep 'requires a token' "$TMP/c.err" "the refusal names the token"
"$GANGRUN" --nproc-per-node 2 -- "$PROG" >"$TMP/d.out" 2>"$TMP/d.err" ||
  { cat "$TMP/d.err" >&2; fail "the job with its token failed"; }
[ "$(grep -c 'sum 3 ok' "$TMP/d.out")" -eq 2 ] || fail "the job with its token"
if grep -q "$(awk '{print $2}' "$TMP/a" | head -1)" "$TMP/a.err" "$TMP/c.err" "$TMP/d.err"; then
  fail "a token appeared in gangrun's messages"
fi

note "GANG_STORE_TOKEN given to gangrun is the job's"
GANG_STORE_TOKEN=given-Token_1 "$GANGRUN" --nproc-per-node 2 -- sh -c "$show" \
  >"$TMP/e" 2>"$TMP/e.err" || { cat "$TMP/e.err" >&2; fail "gangrun failed"; }
[ "$(grep -c ' given-Token_1 ' "$TMP/e")" -eq 2 ] || fail "the given token was not passed on"
GANG_STORE_TOKEN='not a token' "$GANGRUN" -- true 2>"$TMP/f.err"
[ $? -eq 1 ] || fail "a malformed GANG_STORE_TOKEN was accepted"
expect_grep 'GANG_STORE_TOKEN' "$TMP/f.err" "the malformed token's variable named"
if grep -q 'not a token' "$TMP/f.err"; then fail "the malformed token was echoed"; fi

note "--store-bind"
"$GANGRUN" -v -- true 2>"$TMP/g.err" || fail "gangrun -v failed"
expect_grep 'listening on 127\.0\.0\.1\)' "$TMP/g.err" "loopback by default"
"$GANGRUN" -v --store-bind 0.0.0.0 -- true 2>"$TMP/h.err" || fail "--store-bind 0.0.0.0"
expect_grep 'listening on (::|0\.0\.0\.0)\)' "$TMP/h.err" "every interface"
"$GANGRUN" --store-bind 192.0.2.1 -- true 2>"$TMP/i.err"
[ $? -eq 1 ] || fail "binding an address of another machine did not fail"
expect_grep 'cannot host the store.*192\.0\.2\.1' "$TMP/i.err" "the address named"

# node K TOKEN ARGS...: gangrun for node K of 2 (TOKEN "" for none).
node() {
  local k=$1 token=$2
  shift 2
  env ${token:+GANG_STORE_TOKEN=$token} "$GANGRUN" --nnodes 2 --node-rank "$k" \
    --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" \
    --timeout 120 "$@" >"$TMP/n$k.out" 2>"$TMP/n$k.err" &
  eval "pid$k=\$!"
}

note "two nodes with one token"
port=$("$PROG" --free-port) || fail "no free port"
node 0 shared-secret -- "$PROG"
node 1 shared-secret -- "$PROG"
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { cat "$TMP"/n?.err >&2; fail "nodes exited $rc0 and $rc1"; }
[ "$(cat "$TMP"/n?.out | grep -c 'sum 10 ok')" -eq 4 ] || fail "the all-reduce across nodes"
if grep -q 'warning' "$TMP/n0.err"; then fail "a warning with a token set"; fi

note "a node with another token is refused at once"
port=$("$PROG" --free-port) || fail "no free port"
node 0 right-secret -- sleep 30
start=$(now)
GANG_STORE_TOKEN=wrong-secret "$GANGRUN" --nnodes 2 --node-rank 1 --nproc-per-node 2 \
  --master-addr 127.0.0.1 --master-port "$port" --connect-timeout 60 -- true \
  2>"$TMP/wrong.err"
[ $? -eq 1 ] || fail "a node with the wrong token was accepted"
less_than "$(elapsed "$start")" 10 || fail "the refused node waited"
expect_grep "refused this node" "$TMP/wrong.err" "the refusal"
if grep -q 'right-secret\|wrong-secret' "$TMP/wrong.err" "$TMP/n0.err"; then
  fail "a token appeared in a message"
fi
kill -TERM "$pid0"
sleep 0.5
kill -TERM "$pid0" 2>/dev/null
wait "$pid0"

note "two nodes without a token: they run, and node 0 says so"
port=$("$PROG" --free-port) || fail "no free port"
node 0 "" -- "$PROG"
node 1 "" -- "$PROG"
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { cat "$TMP"/n?.err >&2; fail "nodes exited $rc0 and $rc1"; }
expect_grep '^gangrun: warning: GANG_STORE_TOKEN is not set' "$TMP/n0.err" "the warning"
echo PASS
