#!/usr/bin/env bash
# The variables every rank gets, and two gangruns on one host at once (each
# with its own free port).
#   test_env.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

vars="GANG_INIT_METHOD GANG_RANK GANG_SIZE GANG_LOCAL_RANK GANG_LOCAL_SIZE
GANG_NODE_RANK GANG_NUM_NODES RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
GROUP_RANK GROUP_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_USE_AGENT_STORE"
script='for v in '$(echo $vars)'; do eval "echo $GANG_RANK $v=\${$v-unset}"; done'

note "one node"
TORCHELASTIC_USE_AGENT_STORE=True RANK=99 \
  "$GANGRUN" --nproc-per-node 3 -- sh -c "$script" >"$TMP/env" 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "gangrun failed"; }
for r in 0 1 2; do
  for kv in GANG_RANK=$r GANG_SIZE=3 GANG_LOCAL_RANK=$r GANG_LOCAL_SIZE=3 \
            GANG_NODE_RANK=0 GANG_NUM_NODES=1 RANK=$r WORLD_SIZE=3 \
            LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 GROUP_RANK=0 GROUP_WORLD_SIZE=1 \
            MASTER_ADDR=127.0.0.1 TORCHELASTIC_USE_AGENT_STORE=unset; do
    expect_grep "^$r $kv$" "$TMP/env" "rank $r: $kv"
  done
  expect_grep "^$r GANG_INIT_METHOD=tcp://127\.0\.0\.1:[0-9]+$" "$TMP/env" "rank $r"
  expect_grep "^$r MASTER_PORT=[0-9]+$" "$TMP/env" "rank $r"
done
store_port=$(sed -n 's/^0 GANG_INIT_METHOD=tcp:\/\/127.0.0.1://p' "$TMP/env")
master_port=$(sed -n 's/^0 MASTER_PORT=//p' "$TMP/env")
[ "$(grep -c "GANG_INIT_METHOD=tcp://127.0.0.1:$store_port$" "$TMP/env")" -eq 3 ] \
  || fail "ranks got different stores"
[ "$(grep -c "MASTER_PORT=$master_port$" "$TMP/env")" -eq 3 ] \
  || fail "ranks got different MASTER_PORTs"
[ "$store_port" != "$master_port" ] || fail "MASTER_PORT is the store's port"

note "MASTER_PORT is free for the program to bind"
"$GANGRUN" --nproc-per-node 1 -- sh -c \
  'exec python3 -c "import os,socket; s=socket.socket(); s.bind((\"\", int(os.environ[\"MASTER_PORT\"]))); print(\"bound\")"' \
  >"$TMP/bind" 2>&1 || true
if command -v python3 >/dev/null && python3 -c 'import socket' 2>/dev/null; then
  expect_grep '^bound$' "$TMP/bind" "binding MASTER_PORT"
fi

note "--master-port given"
port=$("$PROG" --free-port) || fail "no free port"
"$GANGRUN" --master-port "$port" -- sh -c 'echo "$GANG_INIT_METHOD $MASTER_PORT"' \
  >"$TMP/port" || fail "gangrun failed"
expect_grep "^tcp://127\.0\.0\.1:$port [0-9]+$" "$TMP/port" "the given store port"
[ "$(awk '{print $2}' "$TMP/port")" != "$port" ] || fail "MASTER_PORT is the store's"
"$GANGRUN" --master-port "$port" -- sh -c \
  "\"$GANGRUN\" --master-port $port -- true" 2>"$TMP/busy"
[ $? -eq 1 ] || fail "a busy --master-port did not fail"
expect_grep '^gangrun: cannot host the store' "$TMP/busy" "busy port message"

note "two gangruns at once"
"$GANGRUN" --nproc-per-node 3 -- "$PROG" >"$TMP/a.out" 2>"$TMP/a.err" &
a=$!
"$GANGRUN" --nproc-per-node 3 -- "$PROG" >"$TMP/b.out" 2>"$TMP/b.err" &
b=$!
wait $a || { cat "$TMP/a.err" >&2; fail "the first gangrun failed"; }
wait $b || { cat "$TMP/b.err" >&2; fail "the second gangrun failed"; }
[ "$(grep -c 'sum 6 ok' "$TMP/a.out")" -eq 3 ] || fail "job a"
[ "$(grep -c 'sum 6 ok' "$TMP/b.out")" -eq 3 ] || fail "job b"

note "usage errors"
"$GANGRUN" --nproc-per-node 0 -- true 2>/dev/null; [ $? -eq 2 ] || fail "--nproc-per-node 0"
"$GANGRUN" --bogus -- true 2>/dev/null; [ $? -eq 2 ] || fail "--bogus"
"$GANGRUN" --nnodes 2 -- true 2>/dev/null; [ $? -eq 2 ] || fail "--nnodes 2 alone"
"$GANGRUN" 2>/dev/null; [ $? -eq 2 ] || fail "no program"
"$GANGRUN" --help | grep '^usage: gangrun' >/dev/null || fail "--help"
echo PASS
