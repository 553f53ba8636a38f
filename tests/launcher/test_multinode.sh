#!/usr/bin/env bash
# Two "nodes" on this host over loopback: --nnodes 2 with node ranks 0 and
# 1. Checks the all-reduce across both, the variables of node 1's ranks,
# that a failure on one node stops the other (unless --replace-failed
# replaces the rank on its node), and that a mismatched node is refused.
#   test_multinode.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

# node K ARGS...: gangrun for node K of 2, 2 ranks each, in the background.
node() {
  local k=$1
  shift
  "$GANGRUN" --nnodes 2 --node-rank "$k" --nproc-per-node 2 \
    --master-addr 127.0.0.1 --master-port "$port" --timeout 120 "$@" \
    >"$TMP/n$k.out" 2>"$TMP/n$k.err" &
  eval "pid$k=\$!"
}

# join_nodes E0 E1: waits for both and checks their exit statuses.
join_nodes() {
  wait "$pid0"; local rc0=$?
  wait "$pid1"; local rc1=$?
  [ $rc0 -eq "$1" ] && [ $rc1 -eq "$2" ] || {
    cat "$TMP/n0.err" "$TMP/n1.err" >&2
    fail "nodes exited $rc0 and $rc1, expected $1 and $2"
  }
}

note "all-reduce across two nodes (node 1 starts first)"
port=$("$PROG" --free-port) || fail "no free port"
node 1 -- "$PROG"
sleep 0.5
node 0 -- "$PROG"
join_nodes 0 0
cat "$TMP/n0.out" "$TMP/n1.out" >"$TMP/all.out"
for r in 0 1 2 3; do
  expect_grep "^rank $r of 4: sum 10 ok$" "$TMP/all.out" "rank $r"
done
expect_grep '^rank [23] of 4' "$TMP/n1.out" "node 1 holds ranks 2 and 3"

note "node 1's variables"
port=$("$PROG" --free-port) || fail "no free port"
show='echo "$GANG_RANK $GANG_LOCAL_RANK $GANG_NODE_RANK $GANG_NUM_NODES $RANK $LOCAL_RANK $GROUP_RANK $GROUP_WORLD_SIZE $WORLD_SIZE $MASTER_ADDR $MASTER_PORT $GANG_INIT_METHOD"'
node 0 -- sh -c "$show"
node 1 -- sh -c "$show"
join_nodes 0 0
expect_grep "^3 1 1 2 3 1 1 2 4 127\.0\.0\.1 [0-9]+ tcp://127\.0\.0\.1:$port$" \
  "$TMP/n1.out" "node 1, rank 3"
mp0=$(awk '{print $11}' "$TMP/n0.out" | sort -u)
mp1=$(awk '{print $11}' "$TMP/n1.out" | sort -u)
[ "$mp0" = "$mp1" ] && [ "$mp0" != "$port" ] || fail "MASTER_PORT $mp0 vs $mp1"

note "a rank on node 1 fails: node 0 stops too, with its status"
port=$("$PROG" --free-port) || fail "no free port"
mkdir "$TMP/d"
body="if [ \"\$GANG_RANK\" = 3 ]; then sleep 1; exit 3; fi; $(sleeper "" "$TMP/d")"
start=$(now)
node 0 -- sh -c "$body"
node 1 -- sh -c "$body"
join_nodes 3 3
less_than "$(elapsed "$start")" 8 || fail "took too long"
expect_grep '^gangrun: rank 3 \(pid [0-9]+\) exited with status 3$' "$TMP/n1.err" \
  "node 1's line"
expect_grep '^gangrun: rank 3 \(pid [0-9]+\) on node 1 exited with status 3' \
  "$TMP/n0.err" "node 0's line"
all_gone "$TMP/d" 2 || fail "ranks left running"

note "--replace-failed: node 1 replaces its failed rank, neither node aborts"
port=$("$PROG" --free-port) || fail "no free port"
mkdir "$TMP/r"
body="if [ -n \"\${GANG_JOIN-}\" ]; then
        echo \"joiner replaces \$GANG_REPLACES local \$GANG_LOCAL_RANK node \$GANG_NODE_RANK\"
        : > $TMP/r/joined; exit 0
      fi
      if [ \"\$GANG_RANK\" = 3 ]; then kill -9 \$\$; fi
      i=0; while [ ! -e $TMP/r/joined ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i+1)); done
      [ -e $TMP/r/joined ]"
node 0 --replace-failed 1 -- sh -c "$body"
node 1 --replace-failed 1 -- sh -c "$body"
join_nodes 0 0
expect_grep '^gangrun: rank 3 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\); starting join 1 in its place' \
  "$TMP/n1.err" "node 1 replaces rank 3"
expect_grep '^joiner replaces 3 local 1 node 1$' "$TMP/n1.out" "the joiner on node 1"
grep -q 'rank 3' "$TMP/n0.err" && fail "node 0 heard of rank 3's failure"

note "a node started differently is refused"
port=$("$PROG" --free-port) || fail "no free port"
node 0 -- sleep 3
"$GANGRUN" --nnodes 2 --node-rank 1 --nproc-per-node 3 --master-addr 127.0.0.1 \
  --master-port "$port" -- true 2>"$TMP/bad.err"
[ $? -eq 1 ] || fail "a mismatched node was accepted"
expect_grep 'every node must be started the same way' "$TMP/bad.err" "mismatch"
kill -TERM "$pid0"
sleep 0.5
kill -TERM "$pid0"  # the second: do not wait for nodes that never joined
wait "$pid0"

note "node 1 without node 0 gives up after --connect-timeout"
port=$("$PROG" --free-port) || fail "no free port"
start=$(now)
"$GANGRUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
  --connect-timeout 1 -- true 2>"$TMP/alone.err"
[ $? -eq 1 ] || fail "node 1 alone did not fail"
less_than "$(elapsed "$start")" 6 || fail "took too long"
expect_grep "cannot reach node 0's store" "$TMP/alone.err" "connect failure"
echo PASS
