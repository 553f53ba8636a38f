#!/usr/bin/env bash
# Dumps on request: SIGUSR2 to gangrun makes every rank of a running job
# write its recent operations to the job's flight-recorder directory, which
# gangrun makes (private, with a random name); gang-trace reads them and
# names the rank that is behind.
#   test_dump.sh GANGRUN GANG_TRACE PYTHONPATH DEMO
GANGRUN=$1
TRACE=$2
export PYTHONPATH=$3
DEMO=$4
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 -c 'import numpy, gang' 2>/dev/null ||
  skip "/usr/bin/python3 cannot import numpy and gang from $PYTHONPATH"

unset GANG_FLIGHT_RECORDER
export HANG_DEMO_SECONDS=8
"$GANGRUN" --nproc-per-node 4 -- /usr/bin/python3 "$DEMO" \
  >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 200); do
  [ "$(grep -c 'after 3 all-reduces' "$TMP/out")" -eq 4 ] && break
  sleep 0.1
done
[ "$(grep -c 'after 3 all-reduces' "$TMP/out")" -eq 4 ] ||
  fail "the ranks did not reach their fourth all-reduce"
sleep 1
kill -USR2 "$PID"
sleep 1
line=$(grep 'received SIGUSR2' "$TMP/err") || { cat "$TMP/err" >&2; fail "no SIGUSR2 line"; }
note "$line"
dir=${line##*gang-trace }
case "$dir" in
  */gangrun-$PID-??????) ;;
  *) fail "dumps in '$dir', expected the job's directory, gangrun-$PID-<random>" ;;
esac
[ "$(stat -c %a "$dir")" = 700 ] || fail "the job's directory $dir has mode $(stat -c %a "$dir")"
"$TRACE" "$dir" >"$TMP/report"
rc=$?
cat "$TMP/report" >&2
rm -rf "$dir"
[ "$rc" -eq 1 ] || fail "gang-trace exited $rc, not 1 (a rank is behind)"
grep -q 'rank 2: idle after gang_all_reduce #3' "$TMP/report" || fail "rank 2 not idle after #3"
grep -q 'BEHIND by 1' "$TMP/report" || fail "nobody is behind by 1"
grep -q 'rank 0: in gang_all_reduce #4' "$TMP/report" || fail "rank 0 not in #4"
wait "$PID" || fail "the job failed after the dump: $(cat "$TMP/err")"

# A symbolic link planted in the --log-dir where rank 0's dump goes is not
# followed: rank 0 writes no dump and says why, the others write theirs.
mine="$TMP/mine"
mkdir -m 0700 "$mine"
echo original >"$TMP/victim"
ln -s "$TMP/victim" "$mine/flight-0.txt"
GANG_LOG_LEVEL=warn "$GANGRUN" --nproc-per-node 4 --log-dir "$mine" -- \
  /usr/bin/python3 "$DEMO" >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 200); do
  [ "$(grep -c 'after 3 all-reduces' "$TMP/out")" -eq 4 ] && break
  sleep 0.1
done
sleep 1
kill -USR2 "$PID"
sleep 1
wait "$PID" || fail "the job with a planted link failed: $(cat "$TMP/err")"
[ "$(cat "$TMP/victim")" = original ] || fail "a dump followed the planted link"
grep -q "flight recorder did not write .*flight-0.txt: it is a symbolic link" "$TMP/err" ||
  fail "rank 0 does not say why it wrote no dump: $(cat "$TMP/err")"
note "$(grep -m1 'flight recorder did not write' "$TMP/err")"
[ -s "$mine/flight-1.txt" ] || fail "rank 1 wrote no dump beside the planted link"
echo "PASS"
