#!/usr/bin/env bash
# gang on Gloo against a plain Gloo program (bench/gloo_peer.cc), one
# collective at a time, 2 and 4 local ranks, in one run: gang-bench
# --backend gloo and gloo_peer take turns size range by size range, so both
# see the same machine. Prints the median time of each (the slowest rank's)
# and gang/plain, which issue targets read: <= 1.0 from 1 MiB, <= 1.1 at 8 B.
#
#   bench/gloo_compare.sh [BUILD_DIR]    (COLL=all_reduce, RANKS="2 4",
#                                         ROUNDS=3: turns per size range,
#                                         RANGES="8:8 1048576:67108864")
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
coll=${COLL:-all_reduce}
ranks=${RANKS:-2 4}
rounds=${ROUNDS:-3}
iters=${ITERS:-25}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cmake --build "$build" --target gang-bench gloo_peer gangrun >/dev/null

for n in $ranks; do
  for round in $(seq "$rounds"); do
    for range in ${RANGES:-8:8 1048576:67108864}; do
      set -- "${range%:*}" "${range#*:}"
      "$build/gangrun" --nproc-per-node "$n" -- "$build/gang-bench" --backend gloo \
        -t "$coll" -b "$1" -e "$2" -f 4 -n "$iters" -w 5 -c 0 --json \
        >"$out/gang.$n.$round.$1.json"
      store=$(mktemp -d)
      "$build/gangrun" --nproc-per-node "$n" -- "$build/bench/gloo_peer" "$coll" \
        "$1" "$2" 4 "$iters" 5 "$store" >"$out/plain.$n.$round.$1.txt"
      rm -rf "$store"
    done
  done
done

PYTHONPATH="$here/bench" /usr/bin/python3 - "$out" "$coll" "$ranks" <<'PY'
import glob, os, statistics, sys
from compare_report import gang as gang_times, label, peer
out, coll, ranks = sys.argv[1], sys.argv[2], sys.argv[3].split()
for n in ranks:
    gang, plain = {}, {}
    for f in glob.glob(os.path.join(out, f"gang.{n}.*.json")):
        for s, us in gang_times(f).items():
            gang.setdefault(s, []).append(us)
    for f in glob.glob(os.path.join(out, f"plain.{n}.*.txt")):
        for s, us in peer(f).items():
            plain.setdefault(s, []).append(us)
    print(f"\n{coll}, {n} ranks, gang on Gloo against plain Gloo: median of the "
          f"runs' medians, us")
    print(f"{'size':>8} {'gang gloo':>10} {'plain Gloo':>11} {'gang/plain':>11}")
    for s in sorted(set(gang) & set(plain)):
        g, p = statistics.median(gang[s]), statistics.median(plain[s])
        print(f"{label(s):>8} {g:10.1f} {p:11.1f} {g / p:11.2f}")
PY
