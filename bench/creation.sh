#!/usr/bin/env bash
# Creation at scale: N local ranks (8, 32, 128, 256 by default) create a
# gang under gangrun on gloo and on shm and run an 8-byte all-reduce;
# prints, per N and backend, the creation time from the last rank's call to
# gang_create to the last rank's return (launch skew left out), from the
# first rank's call, and the all-reduce's median (the largest over ranks).
#
#   bench/creation.sh [BUILD_DIR] [N ...]      (default: build, 8 32 128 256)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(8 32 128 256)
cmake --build "$build" --target gang-bench gangrun >/dev/null
# Every rank holds a few descriptors per peer it talks to.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

printf '%6s %8s %16s %16s %18s\n' ranks backend "create (ms)" "from first (ms)" "all_reduce 8 B (us)"
for n in "${counts[@]}"; do
  for backend in gloo shm; do
    json=$("$build/gangrun" --nproc-per-node "$n" --timeout 600 -- \
             "$build/gang-bench" --backend "$backend" -t all_reduce -b 8 -e 8 \
             -n 5 -w 1 --json 2>/dev/null) || { printf '%6d %8s failed\n' "$n" "$backend"; continue; }
    /usr/bin/python3 - "$n" "$backend" <<PY
import json, sys
doc = json.loads('''$json''')
r = doc["results"][0]["out_of_place"]
print("%6s %8s %16.1f %16.1f %18.1f" % (sys.argv[1], doc["backend"], doc["create_ms"],
      doc["create_from_first_ms"], r["time_us"]))
PY
  done
done
