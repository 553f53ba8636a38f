#!/usr/bin/env bash
# The measurements behind the gloo backend's choice of algorithm: gang-bench
# on Gloo with each algorithm forced (GANG_GLOO_ALGORITHM) and with the
# automatic choice, one collective at a time, 2, 3 and 4 local ranks, the
# algorithms taking turns size by size range. Prints the median time of
# each (the slowest rank's, µs), which algorithm is fastest at each size,
# and auto/best: what the thresholds in src/backends/gloo/gloo_dispatch.cc
# cost against the best choice on this machine (1.00 where they pick it).
#
#   bench/gloo_algorithms.sh [BUILD_DIR]   (COLLS="all_reduce broadcast
#                                           all_gather", RANKS="2 3 4",
#                                           ROUNDS=3, ITERS=25,
#                                           MIN=1024 MAX=16777216)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
colls=${COLLS:-all_reduce broadcast all_gather}
ranks=${RANKS:-2 3 4}
rounds=${ROUNDS:-3}
iters=${ITERS:-25}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cmake --build "$build" --target gang-bench gangrun >/dev/null

algorithms() {
  case $1 in
    broadcast) echo auto direct tree ring ;;
    *) echo auto direct ring ;;
  esac
}

for coll in $colls; do
  for n in $ranks; do
    for round in $(seq "$rounds"); do
      # Each round starts with another algorithm: whichever runs first
      # after a pause pays for the machine waking up.
      set -- $(algorithms "$coll")
      for _ in $(seq $(( round % $# ))); do set -- "${@:2}" "$1"; done
      for a in "$@"; do
        GANG_GLOO_ALGORITHM=$a "$build/gangrun" --nproc-per-node "$n" -- \
          "$build/gang-bench" --backend gloo -t "$coll" -b "${MIN:-1024}" \
          -e "${MAX:-16777216}" -f 4 -n "$iters" -w 3 -c 0 --json \
          >"$out/$coll.$n.$a.$round.json"
      done
    done
  done
done

PYTHONPATH="$here/bench" /usr/bin/python3 - "$out" "$colls" "$ranks" <<'PY'
import glob, os, statistics, sys
from compare_report import gang, label
out, colls, ranks = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
for coll in colls:
    for n in ranks:
        t = {}
        for f in glob.glob(os.path.join(out, f"{coll}.{n}.*.json")):
            a = f.split(".")[-3]
            for s, us in gang(f).items():
                t.setdefault(a, {}).setdefault(s, []).append(us)
        algos = [a for a in ("auto", "direct", "tree", "ring") if a in t]
        forced = [a for a in algos if a != "auto"]
        print(f"\n{coll}, {n} ranks, gang on Gloo, each algorithm forced: "
              f"median of the runs' medians, us")
        print(f"{'size':>8} " + " ".join(f"{a:>9}" for a in algos) +
              f" {'best':>7} {'auto/best':>10}")
        for s in sorted(set.intersection(*(set(t[a]) for a in algos))):
            m = {a: statistics.median(t[a][s]) for a in algos}
            best = min(forced, key=lambda a: m[a])
            print(f"{label(s):>8} " + " ".join(f"{m[a]:9.1f}" for a in algos) +
                  f" {best:>7} {m['auto'] / m[best]:10.2f}")
PY
