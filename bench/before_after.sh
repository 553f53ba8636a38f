#!/usr/bin/env bash
# Times gang's all-reduce (2 ranks, Gloo, float32 SUM) with two builds of
# libgang in one run: the same allreduce_bench binary is run alternately
# against each library (the ABI is the same, so LD_LIBRARY_PATH picks the
# library), so machine load hits both alike. Prints each round's medians and
# the median over rounds of the 8 B and 1 MiB rows, with new/old ratios.
#
#   bench/before_after.sh OLD_LIBDIR NEW_LIBDIR [ROUNDS] [BENCH]
#
# e.g., to compare with the commit before a change:
#   git worktree add /tmp/gang-before <commit>
#   cmake -S /tmp/gang-before -B /tmp/gang-before/build -DGANG_BUILD_TESTS=OFF
#   cmake --build /tmp/gang-before/build --target gang
#   bench/before_after.sh /tmp/gang-before/build build 7
set -euo pipefail
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
rounds=${3:-5}
bench=${4:-$new/bench/allreduce_bench}
out=$(mktemp -d /tmp/gang-before-after.XXXXXX)
trap 'rm -rf "$out"' EXIT

for ((i = 1; i <= rounds; ++i)); do
  for which in old new; do
    dir=$old
    [ "$which" = new ] && dir=$new
    LD_LIBRARY_PATH=$dir "$bench" --quick --only gang,gloo >"$out/$which.$i" 2>&1
    # The library actually loaded must be the one asked for.
    got=$(LD_LIBRARY_PATH=$dir ldd "$bench" | awk '$1 ~ /^libgang\.so/ { print $3 }')
    [ "$(dirname "$(realpath "$got")")" = "$(realpath "$dir")" ] ||
      { echo "before_after: $which loaded $got, not from $dir" >&2; exit 1; }
    printf '%s round %d: ' "$which" "$i"
    awk '$3 == "gang" && ($1 == "8" || $1 == "1") { printf "%s %s: %s us   ", $1, $2, $4 }' \
      "$out/$which.$i"
    echo
  done
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
printf '%-7s %12s %12s %9s\n' size "old median" "new median" "new/old"
for size in 8 1; do
  label="8 B"
  [ "$size" = 1 ] && label="1 MiB"
  o=$(cat "$out"/old.* | awk -v s="$size" '$1 == s && $3 == "gang" { print $4 }' | median)
  n=$(cat "$out"/new.* | awk -v s="$size" '$1 == s && $3 == "gang" { print $4 }' | median)
  printf '%-7s %10.1f us %10.1f us %9.3f\n' "$label" "$o" "$n" "$(awk -v n="$n" -v o="$o" 'BEGIN { print n / o }')"
done
