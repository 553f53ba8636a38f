#!/usr/bin/env bash
# One run, side by side: gang-bench on each CPU backend (shm, gloo), a plain
# Gloo program (bench/gloo_peer.cc) and Open MPI (bench/mpi_peer.c, shared
# memory transport), for all_reduce, broadcast and all_gather on 2 and 4
# local ranks, 8 B to 64 MiB. Prints one table of times and ratios (gang /
# peer) and draws busbw against size (PNG). gang-bench on shm runs with
# --bind (one core per rank), as mpirun binds its ranks by default;
# unbound, the scheduler sometimes leaves two ranks on one core for a whole
# run. On gloo it runs unbound, as the plain Gloo program does.
#
#   bench/compare.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, build/compare)
#
# Open MPI and matplotlib are peers for this comparison only: installed here
# (Debian's openmpi-bin, libopenmpi-dev, python3-matplotlib) when missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
out=${2:-$build/compare}
iters=${ITERS:-25}
mkdir -p "$out"

if ! command -v mpicc >/dev/null || ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q \
    openmpi-bin libopenmpi-dev python3-matplotlib >/dev/null
fi
cmake --build "$build" --target gang-bench gloo_peer gangrun >/dev/null
mpicc -O2 -o "$build/bench/mpi_peer" "$here/bench/mpi_peer.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

sizes=(8 $((64 << 20)) 2)  # min, max, factor
# Each run starts on a quiet machine: what the previous one left behind
# (Open MPI's daemons winding down) can hold a core for a while, which
# showed as 100 us small sizes in whatever ran next.
settle() { sleep "${SETTLE_S:-1}"; }
for n in 2 4; do
  for coll in all_reduce broadcast all_gather; do
    echo "== $coll, $n ranks" >&2
    for backend in shm gloo; do
      # shm binds as mpirun does; gloo runs unbound as the plain Gloo
      # program does (bound, each rank's Gloo event loop would share its
      # core with the rank, which plain Gloo's loop never has to).
      bind=$([ "$backend" = shm ] && echo --bind || true)
      settle
      "$build/gangrun" --nproc-per-node "$n" -- "$build/gang-bench" --backend "$backend" $bind \
        -t "$coll" -b "${sizes[0]}" -e "${sizes[1]}" -f "${sizes[2]}" -n "$iters" -w 5 \
        -c 0 --json >"$out/gang-$backend.$coll.$n.json"
    done
    store=$(mktemp -d)
    settle
    "$build/gangrun" --nproc-per-node "$n" -- "$build/bench/gloo_peer" "$coll" \
      "${sizes[@]}" "$iters" 5 "$store" >"$out/gloo.$coll.$n.txt"
    rm -rf "$store"
    settle
    mpirun --oversubscribe -np "$n" --mca btl self,vader "$build/bench/mpi_peer" \
      "$coll" "${sizes[@]}" "$iters" 5 >"$out/mpi.$coll.$n.txt"
  done
done
/usr/bin/python3 "$here/bench/compare_report.py" "$out"
