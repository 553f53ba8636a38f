#!/usr/bin/env bash
# Compares two builds of libgang call by call: build/bench/ab_bench loads
# both into each of 2 ranks and alternates one all-reduce on each, so the
# machine's load hits both alike (see ab_bench.cc). The library loaded second
# runs a little slower or faster whatever it is (the same library against a
# copy of itself: -0 to +5 us at 8 B here), so the pair runs twice, once in
# each order, and the estimate of new minus old is half the difference of
# the two runs' median per-pair differences, which cancels that bias.
#
#   bench/before_after.sh OLD_LIBDIR NEW_LIBDIR [PAIRS]
#
# e.g., to compare with the commit before a change:
#   git worktree add /tmp/gang-before <commit>
#   cmake -S /tmp/gang-before -B /tmp/gang-before/build -DGANG_BUILD_TESTS=OFF
#   cmake --build /tmp/gang-before/build --target gang
#   bench/before_after.sh /tmp/gang-before/build build
# (both built with the same CMAKE_BUILD_TYPE; the default is RelWithDebInfo)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench=${AB_BENCH:-$here/build/bench/ab_bench}
pairs=${3:-20000}
one=$("$bench" "$1/libgang.so.0" "$2/libgang.so.0" "$pairs")
two=$("$bench" "$2/libgang.so.0" "$1/libgang.so.0" "$pairs")
echo "== A = old, B = new"
echo "$one"
echo "== A = new, B = old"
echo "$two"
echo
printf '%-6s %12s %12s %18s
' size "old median" "new median" "new - old (ratio)"
for size in "8 B" "1 MiB"; do
  # Columns: size(2 words) pairs A-median us B-median us B/A diff us.
  row1=$(echo "$one" | awk -v s="$size" '$1 " " $2 == s')
  row2=$(echo "$two" | awk -v s="$size" '$1 " " $2 == s')
  echo "$row1 $row2" | awk -v s="$size" '{
    old = ($4 + $16) / 2; new = ($6 + $14) / 2
    d = ($9 - $19) / 2
    printf "%-6s %9.1f us %9.1f us %+8.2f us (%.3f)\n", s, old, new, d, 1 + d / old }'
done
