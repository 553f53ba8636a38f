#!/usr/bin/env bash
# torchrun's spellings where they mean what gangrun does: --standalone,
# --nnodes N:N, --node_rank, --rdzv-endpoint HOST[:PORT], --rdzv-backend
# c10d|static, --rdzv-id (ignored, with a note), --max-restarts 0; and what
# gangrun cannot do (an elastic range, another rendezvous backend,
# restarts) refused with a clear message.
#   test_torchrun_spellings.sh GANGRUN PROG
GANGRUN=$1 PROG=$2
. "$(dirname "$0")/lib.sh"

show='echo "$GANG_RANK $GANG_SIZE $GANG_NUM_NODES $MASTER_ADDR $GANG_INIT_METHOD"'

# refused EXPECTED-MESSAGE ARGS...: gangrun ARGS exits 2 saying so.
refused() {
  local want=$1
  shift
  "$GANGRUN" "$@" 2>"$TMP/refused" >/dev/null
  local rc=$?
  [ $rc -eq 2 ] || { cat "$TMP/refused" >&2; fail "gangrun $* exited $rc, not 2"; }
  expect_grep "^gangrun: $want" "$TMP/refused" "gangrun $*"
}

note "--standalone, --nnodes 1:1, --rdzv-backend, --max-restarts 0"
"$GANGRUN" --standalone --nnodes 1:1 --nproc_per_node 2 --rdzv-backend c10d \
  --max-restarts 0 -- sh -c "$show" >"$TMP/out" 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "--standalone"; }
for r in 0 1; do
  expect_grep "^$r 2 1 127\.0\.0\.1 tcp://127\.0\.0\.1:[0-9]+$" "$TMP/out" "rank $r"
done
[ -s "$TMP/err" ] && { cat "$TMP/err" >&2; fail "--standalone said something"; }
"$GANGRUN" --standalone --nproc-per-node 3 -- "$PROG" >"$TMP/out" 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "--standalone all-reduce"; }
[ "$(grep -c 'of 3: sum 6 ok' "$TMP/out")" -eq 3 ] || fail "--standalone all-reduce"

note "--rdzv-endpoint HOST:PORT is --master-addr/--master-port"
port=$("$PROG" --free-port) || fail "no free port"
"$GANGRUN" --rdzv_endpoint=127.0.0.1:"$port" --rdzv_backend=static -- sh -c "$show" \
  >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "--rdzv_endpoint"; }
expect_grep "^0 1 1 127\.0\.0\.1 tcp://127\.0\.0\.1:$port$" "$TMP/out" "--rdzv_endpoint"
"$GANGRUN" --rdzv-endpoint localhost -- sh -c "$show" >"$TMP/out" 2>"$TMP/err" \
  || { cat "$TMP/err" >&2; fail "--rdzv-endpoint localhost"; }
expect_grep "^0 1 1 localhost tcp://localhost:[0-9]+$" "$TMP/out" "no port: a free one"

note "--rdzv-id is ignored, and says so"
"$GANGRUN" --rdzv-id job7 -- true 2>"$TMP/err" || fail "--rdzv-id"
expect_grep '^gangrun: note: --rdzv-id job7 is ignored' "$TMP/err" "--rdzv-id note"

note "two nodes with torchrun's spellings"
port=$("$PROG" --free-port) || fail "no free port"
for k in 1 0; do
  "$GANGRUN" --nnodes 2:2 --node_rank "$k" --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$port" --rdzv_id j1 --max_restarts 0 --timeout 120 \
    -- "$PROG" >"$TMP/n$k.out" 2>"$TMP/n$k.err" &
  eval "pid$k=\$!"
done
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || {
  cat "$TMP/n0.err" "$TMP/n1.err" >&2
  fail "nodes exited $rc0 and $rc1"
}
cat "$TMP/n0.out" "$TMP/n1.out" >"$TMP/all.out"
for r in 0 1 2 3; do
  expect_grep "^rank $r of 4: sum 10 ok$" "$TMP/all.out" "rank $r"
done

note "what gangrun does not do is refused"
refused "--nnodes 1:4 is a range of node counts \(an elastic job\), which gangrun does not run: give one count" \
  --nnodes 1:4 -- true
refused "--nnodes 3:2: the minimum is above the maximum" --nnodes 3:2 -- true
refused "--nnodes wants an integer" --nnodes 1:2:3 -- true
refused "--rdzv-backend etcd is not supported" --rdzv-backend etcd -- true
refused "--max-restarts: gangrun does not restart the job" --max-restarts 3 -- true
refused "--standalone runs one node" --standalone --nnodes 2 -- true
refused "--standalone runs one node" --standalone --master-port 1234 -- true
refused "--standalone runs one node" --standalone --rdzv-endpoint h:1 -- true
refused "--rdzv-endpoint and --master-addr/--master-port both name node 0" \
  --rdzv-endpoint h:1 --master-addr h -- true
refused "--nnodes > 1 needs --master-port, or --rdzv-endpoint HOST:PORT" \
  --nnodes 2 --rdzv-endpoint h -- true
refused "--nnodes > 1 needs --master-addr or --rdzv-endpoint" --nnodes 2:2 -- true
refused '--rdzv-endpoint "::1:5": put an IPv6 address in brackets' \
  --rdzv-endpoint ::1:5 -- true
refused "--rdzv-endpoint's port wants an integer" --rdzv-endpoint h:x -- true
refused '--rdzv-endpoint ":5" has no host' --rdzv-endpoint :5 -- true
"$GANGRUN" --help | grep -q -- '--rdzv-endpoint HOST\[:PORT\]' || fail "--help"
echo PASS
