#!/bin/sh
# bench_overhead.sh - the per-call cost of the bindings over the C call.
#
#   bindings/bench_overhead.sh [BUILD_DIR [ITERATIONS [ROUNDS]]]
#
# Times a blocking 8-byte all-reduce (one float64, SUM) from C
# (bench/overhead.c), Python (bench/overhead.py) and Go (go/cmd/overhead),
# ITERATIONS calls after a warmup each, in ROUNDS interleaved rounds so that
# load from elsewhere hits all three alike:
#
#   shm       two local processes; "auto" picks the shm backend (the call
#             as programs on one host see it)
#   gloo      the same two processes over Gloo/TCP (GANG_BENCH_BACKEND=gloo);
#             each run reports the median call (GANG_BENCH_MEDIAN): on a VM,
#             one call in ten or so takes a scheduler tick or more, which
#             would swamp a mean
#   fake      a fake gang of 2 in one process, no traffic (the call's own
#             cost, so the bindings' overhead stands out)
#
# For each it prints the median and best time per call, the ratio of the
# medians to C's and their difference: the binding's overhead per call.
# Not a test: run it by hand, on a machine as quiet as you can find.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
iters=${2:-2000}
rounds=${3:-5}
python=${PYTHON:-/usr/bin/python3}

if [ ! -x "$build/gangrun" ]; then
  echo "bench_overhead.sh: no gangrun in $build (build the project first)" >&2
  exit 1
fi
launch="$build/gangrun --nproc-per-node 2 --"

results=$(mktemp)
trap 'rm -f "$results"' EXIT

# time MODE LANG PREFIX...: appends "MODE LANG us/call" from rank 0's line.
time_one() {
  mode=$1 lang=$2
  shift 2
  case $lang in
    c) set -- "$@" "$build/bindings/gang_overhead_c" ;;
    python) set -- "$@" env PYTHONPATH="$build/bindings/python" "$python" "$here/bench/overhead.py" ;;
    go) set -- "$@" "$build/bindings/go/overhead" ;;
  esac
  n=$iters
  [ "$mode" = shm ] && n=$((iters * 10))
  [ "$mode" = fake ] && n=$((iters * 50))
  [ "$mode" = gloo ] && n=$((iters / 4 + 1))
  us=$("$@" "$n" | sed -n 's/.*: \([0-9.]*\) us\/call.*/\1/p')
  echo "$mode $lang $us" >>"$results"
}

round=1
while [ "$round" -le "$rounds" ]; do
  for lang in c python go; do
    time_one shm "$lang" $launch
    time_one gloo "$lang" env GANG_BENCH_BACKEND=gloo GANG_BENCH_MEDIAN=1 $launch
    time_one fake "$lang" env GANG_BENCH_FAKE=1
  done
  round=$((round + 1))
done

summary() {
  mode=$1
  for lang in c python go; do
    grep "^$mode $lang " "$results" | cut -d' ' -f3 | sort -n |
      awk -v lang="$lang" '{ v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              print lang, m, v[1] }'
  done | awk '
    { median[$1] = $2; best[$1] = $3; order[NR] = $1 }
    END {
      for (i = 1; i <= NR; i++) {
        l = order[i]
        printf "  %-7s median %9.3f  best %9.3f us/call   x%.2f of C   %+8.3f us over C\n",
               l, median[l], best[l], median[l] / median["c"], median[l] - median["c"]
      }
    }'
}

echo "8-byte all-reduce (float64 SUM), $rounds interleaved rounds"
echo "2 ranks, shm backend, $((iters * 10)) calls per run:"
summary shm
echo "2 ranks over Gloo/TCP, $((iters / 4 + 1)) calls per run:"
summary gloo
echo "fake gang of 2, no traffic, $((iters * 50)) calls per run:"
summary fake
