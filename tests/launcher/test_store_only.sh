#!/usr/bin/env bash
# gangrun --store-only HOST:PORT: a store apart from every rank, for jobs
# launched without gangrun. It prints its url on stdout; ranks started by
# hand (GANG_RANK, GANG_SIZE, GANG_INIT_METHOD) meet there and all-reduce;
# a second job meets there too after the first ended (the store outlives
# its ranks); SIGTERM stops it with status 0. A program given beside it is
# a usage error.
GANGRUN=$1
PROG=$2
. "$(dirname "$0")/lib.sh"

"$GANGRUN" --store-only 127.0.0.1:0 -- "$PROG" 2>"$TMP/usage" && fail "a program beside --store-only was accepted"
grep -q "runs no program" "$TMP/usage" || fail "the usage error does not say why: $(cat "$TMP/usage")"

export GANG_STORE_TOKEN=store-only-test-token
"$GANGRUN" --store-only 127.0.0.1:0 >"$TMP/url" 2>"$TMP/store.err" &
store=$!
for _ in $(seq 100); do
  [ -s "$TMP/url" ] && break
  sleep 0.1
done
url=$(head -n1 "$TMP/url")
case "$url" in tcp://127.0.0.1:*) ;; *) kill "$store"; fail "no url printed: '$url' $(cat "$TMP/store.err")" ;; esac
note "store at $url"

run_job() {
  local pids=() r
  for r in 0 1 2; do
    GANG_RANK=$r GANG_SIZE=3 GANG_INIT_METHOD=$url GANG_TIMEOUT_MS=20000 \
      "$PROG" >"$TMP/job$1.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1 2; do
    wait "${pids[$r]}" || { kill "$store"; fail "job $1 rank $r failed: $(cat "$TMP/job$1.$r")"; }
    grep -q "sum 6 ok" "$TMP/job$1.$r" || { kill "$store"; fail "job $1 rank $r: $(cat "$TMP/job$1.$r")"; }
  done
}
run_job 1
alive "$store" || fail "the store ended with the first job"
run_job 2

kill -TERM "$store"
wait "$store"
rc=$?
[ "$rc" -eq 0 ] || fail "the store exited $rc on SIGTERM"
grep -q "store stopped" "$TMP/store.err" || fail "no word of stopping: $(cat "$TMP/store.err")"
echo "ok: gangrun --store-only served two jobs started by hand and stopped on SIGTERM"
