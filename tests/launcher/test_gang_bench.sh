#!/usr/bin/env bash
# gang-bench smoke run: every collective on 2 and 3 ranks under gangrun,
# on auto (shm: the ranks share this host) and on gloo, small sizes,
# results checked (gang-bench exits 1 on any wrong element); every dtype and
# op of all_reduce (avg of an integer refused); the table's rows and the JSON
# parse.
#   test_gang_bench.sh GANGRUN GANG_BENCH
set -euo pipefail
gangrun=$1
bench=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for backend in auto gloo; do
for n in 2 3; do
  for coll in all_reduce all_gather reduce_scatter broadcast reduce gather \
              scatter all_to_all sendrecv barrier; do
    root=0
    [ "$coll" = broadcast ] || [ "$coll" = reduce ] || [ "$coll" = gather ] ||
      [ "$coll" = scatter ] && root=$((n - 1))
    "$gangrun" --nproc-per-node "$n" -- "$bench" --backend "$backend" -t "$coll" \
      -b 8 -e 96K -f 8 -n 3 -w 1 -r "$root" >"$out/table" 2>"$out/err" ||
      { echo "FAIL: $coll on $n ranks ($backend)"; cat "$out/table" "$out/err"; exit 1; }
    want=$backend
    [ "$backend" = auto ] && want=shm
    grep -q "^# gang-bench: $coll, $n ranks, backend $want," "$out/table" ||
      { echo "FAIL: $coll on $n ranks did not run on $want"; head -2 "$out/table"; exit 1; }
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out/table" || true)
    # 8, 64, 512, 4096, 32768 bytes.
    [ "$rows" -eq 5 ] || { echo "FAIL: $coll on $n ranks printed $rows rows"; cat "$out/table"; exit 1; }
    # No row may report a wrong element (the last column of each half).
    if awk '/^ +[0-9]+ +[0-9]+ / && ($9 != 0 && $9 != "N/A" || $13 != 0 && $13 != "N/A")' \
         "$out/table" | grep . >/dev/null; then
      echo "FAIL: $coll on $n ranks has wrong elements"; cat "$out/table"; exit 1
    fi
  done
done
done

for d in int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double; do
  for o in sum prod min max avg; do
    "$gangrun" --nproc-per-node 3 -- "$bench" -t all_reduce -d "$d" -o "$o" \
      -b 6K -e 6K -n 2 -w 0 >"$out/table" 2>"$out/err" && rc=0 || rc=$?
    case "$d/$o" in
      *int*/avg)  # no integer mean: refused up front, with the reason
        [ $rc -eq 2 ] && grep -q "does not reduce $d with avg (gang averages floating types only)" "$out/err" ||
          { echo "FAIL: all_reduce $d $o: exit $rc"; cat "$out/table" "$out/err"; exit 1; } ;;
      *)
        [ $rc -eq 0 ] ||
          { echo "FAIL: all_reduce $d $o"; cat "$out/table" "$out/err"; exit 1; } ;;
    esac
  done
done

"$gangrun" --nproc-per-node 2 -- "$bench" -t all_gather -b 1K -e 4K -f 2 -n 3 \
  --json >"$out/json"
/usr/bin/python3 - "$out/json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["collective"] == "all_gather" and doc["ranks"] == 2, doc
sizes = [r["size"] for r in doc["results"]]
assert sizes == [1024, 2048, 4096], sizes
for r in doc["results"]:
    for half in ("out_of_place", "in_place"):
        h = r[half]
        assert h["wrong"] == 0 and h["time_us"] > 0 and h["busbw_gbs"] > 0, r
        assert h["min_us"] <= h["p50_us"] <= h["max_us"], r
PY

# Bad arguments are refused before any gang is made.
if "$bench" -t no_such_collective 2>"$out/err"; then
  echo "FAIL: an unknown collective was accepted"; exit 1
fi
grep -q 'unknown collective "no_such_collective"' "$out/err"
echo "gang-bench smoke run passed"
