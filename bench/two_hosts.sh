#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair
# whose both ends are shaped with tc netem (a rate and a one-way delay), and
# an all-reduce (float32 sum) over 2 x P ranks, P per "host", timed on the
# same link by:
#   gang two-level   gang-bench --backend auto (shm within a host, gloo between)
#   gang flat gloo   gang-bench --backend gloo
#   plain Gloo       bench/gloo_peer.cc (gloo::allreduce, as a user without gang)
#   torch gloo       bench/torch_peer.py in a PyPI torch venv (.ci/torch-venv.sh;
#                    GANG_TORCH_VENV or the cache), when there is one
#   Open MPI         bench/mpi_peer.c (MPI_Allreduce over its TCP transport,
#                    within a host too: both namespaces have one hostname, so
#                    its shared-memory transport would mix the two hosts'
#                    segments and crash), when mpirun and mpicc are there:
#                    mpirun starts in the first namespace and reaches the
#                    second through an "rsh agent" that enters it
# Prints, per link and P, the median times (the slowest rank's), plain
# Gloo / two-level (the target: >= 1.5 from 1 MiB) and two-level / the
# link's floor (the bytes that must cross: each host sends and receives
# the whole buffer once, at the shaped rate, plus the delay; the target:
# <= 1.2 from 16 MiB); draws busbw against size to OUT_DIR/two_hosts.png.
# Needs root (network namespaces, tc) and iproute2.
#
#   bench/two_hosts.sh [BUILD_DIR] [OUT_DIR]
#     LINKS="10gbit:25us 1gbit:25us"  PER_HOST="2 4"  MIN=16  MAX=64M  ITERS=5
#     (sizes MIN, 4 MIN, 16 MIN, ... up to MAX)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
out=${2:-$build/two_hosts}
links=${LINKS:-10gbit:25us 1gbit:25us}
per_host=${PER_HOST:-2 4}
min=$(numfmt --from=iec "${MIN:-16}")
max=$(numfmt --from=iec "${MAX:-64M}")
iters=${ITERS:-5}
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.txt "$out/links" "$out"/*.err

[ "$(id -u)" -eq 0 ] || { echo "two_hosts.sh: needs root (network namespaces, tc)" >&2; exit 1; }
command -v ip >/dev/null && command -v tc >/dev/null ||
  { echo "two_hosts.sh: needs ip and tc (iproute2)" >&2; exit 1; }
# matplotlib draws the plot (a peer of the benchmark only), as in compare.sh.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-matplotlib >/dev/null || true
fi
cmake --build "$build" --target gang-bench gloo_peer gangrun >/dev/null

torch_py=
for py in "${GANG_TORCH_VENV:-}/bin/python" /var/cache/gang-torch-venv/*/bin/python; do
  if [ -x "$py" ] && "$py" -c 'import torch.distributed' 2>/dev/null; then
    torch_py=$py
    break
  fi
done

mpi=
if command -v mpirun >/dev/null && command -v mpicc >/dev/null; then
  mpicc -O2 -o "$build/bench/mpi_peer" "$here/bench/mpi_peer.c" && mpi=1
fi

NS_A=gang-bench-a-$$ NS_B=gang-bench-b-$$
VETH_A=gba$$ VETH_B=gbb$$
ADDR_A=10.78.0.1 ADDR_B=10.78.0.2
cleanup() {
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
}
trap cleanup EXIT
# The "remote shell" mpirun uses to start its daemon on a host: enters that
# host's namespace (by its address) and runs the command there.
agent=$out/netns-agent
cat >"$agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $ADDR_A) ns=$NS_A ;;
  *) ns=$NS_B ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$agent"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "$VETH_A" type veth peer name "$VETH_B"
ip link set "$VETH_A" netns "$NS_A"
ip link set "$VETH_B" netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A"
ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VETH_A" up
ip -n "$NS_B" link set "$VETH_B" up

port=29600
# pair NAME P CMD...: runs CMD under gangrun on both hosts, P ranks each;
# node 0's output (rank 0's report) goes to $out/NAME. In CMD, @ADDR@ and
# @IF@ become the host's address and interface.
pair() {
  local name=$1 p=$2 pa pb rca rcb
  shift 2
  port=$((port + 1))
  local a=("${@//@ADDR@/$ADDR_A}") b=("${@//@ADDR@/$ADDR_B}")
  a=("${a[@]//@IF@/$VETH_A}") b=("${b[@]//@IF@/$VETH_B}")
  ip netns exec "$NS_A" "$build/gangrun" --nnodes 2 --node-rank 0 --nproc-per-node "$p" \
    --master-addr "$ADDR_A" --master-port "$port" --timeout 900 -- "${a[@]}" \
    >"$out/$name" 2>"$out/$name.a.err" &
  pa=$!
  ip netns exec "$NS_B" "$build/gangrun" --nnodes 2 --node-rank 1 --nproc-per-node "$p" \
    --master-addr "$ADDR_A" --master-port "$port" --timeout 900 -- "${b[@]}" \
    >/dev/null 2>"$out/$name.b.err" &
  pb=$!
  wait $pa && rca=0 || rca=$?
  wait $pb && rcb=0 || rcb=$?
  if [ $rca -ne 0 ] || [ $rcb -ne 0 ]; then
    echo "two_hosts.sh: $name failed ($rca, $rcb):" >&2
    tail -n 5 "$out/$name.a.err" "$out/$name.b.err" >&2
    rm -f "$out/$name"
  fi
}

# shape RATE DELAY: both ends of the link; prints the delay it could set.
# netem where the kernel has it; else tbf, which shapes the rate only (the
# delay is then 0us and the report says so), with a bucket of 8 ms of bytes.
shape() {
  local rate=$1 delay=$2 ns_dev bits burst said=$2
  for ns_dev in "$NS_A:$VETH_A" "$NS_B:$VETH_B"; do
    if ! ip netns exec "${ns_dev%%:*}" tc qdisc replace dev "${ns_dev#*:}" root netem \
         delay "$delay" rate "$rate" limit 100000 2>/dev/null; then
      bits=$(numfmt --from=si "$(echo "${rate%bit}" | tr gmk GMK)")
      burst=$((bits / 8 / 125 > 65536 ? bits / 8 / 125 : 65536))
      ip netns exec "${ns_dev%%:*}" tc qdisc replace dev "${ns_dev#*:}" root tbf \
        rate "$rate" burst "$burst" latency 100ms
      said=0us
    fi
  done
  echo "$said"
}

for link in $links; do
  rate=${link%%:*} delay=${link#*:}
  delay=$(shape "$rate" "$delay")
  [ "$delay" != 0us ] ||
    echo "two_hosts.sh: no netem in this kernel: $rate shaped by tbf, without delay" >&2
  echo "$rate:$delay" >>"$out/links"
  for p in $per_host; do
    tag="$rate.$p"
    echo "== link $rate, $delay each way; 2 x $p ranks" >&2
    for backend in auto gloo; do
      pair "gang-$backend.$tag.json" "$p" env GANG_SOCKET_IFNAME=@IF@ "$build/gang-bench" \
        --backend "$backend" -t all_reduce -b "$min" -e "$max" -f 4 -n "$iters" -w 2 -c 0 --json
    done
    store=$(mktemp -d)
    pair "plain.$tag.txt" "$p" env GLOO_PEER_HOST=@ADDR@ "$build/bench/gloo_peer" all_reduce \
      "$min" "$max" 4 "$iters" 2 "$store"
    rm -rf "$store"
    if [ -n "$mpi" ]; then
      ip netns exec "$NS_A" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --oversubscribe -np $((2 * p)) --host "$ADDR_A:$p,$ADDR_B:$p" \
        --mca plm_rsh_agent "$agent" --mca btl self,tcp \
        --mca btl_tcp_if_include 10.78.0.0/24 --mca oob_tcp_if_include 10.78.0.0/24 \
        "$build/bench/mpi_peer" all_reduce "$min" "$max" 4 "$iters" 2 \
        >"$out/mpi.$tag.txt" 2>"$out/mpi.$tag.err" ||
        { echo "two_hosts.sh: Open MPI failed:" >&2; tail -n 5 "$out/mpi.$tag.err" >&2
          rm -f "$out/mpi.$tag.txt"; }
    fi
    if [ -n "$torch_py" ]; then
      pair "torch.$tag.txt" "$p" env GLOO_SOCKET_IFNAME=@IF@ "$torch_py" \
        "$here/bench/torch_peer.py" "$min" "$max" 4 "$iters" 2 \
        "$ADDR_A:$((port + 5000))"
    fi
  done
done

PYTHONPATH="$here/bench" /usr/bin/python3 - "$out" "$(cat "$out/links")" "$per_host" <<'PY'
import os, sys
from compare_report import gang, label, peer
out, links, per_host = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def bits_per_s(rate):
    for unit, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * mult
    return float(rate)

def micros(delay):
    if delay.endswith("us"):
        return float(delay[:-2])
    return float(delay[:-2]) * 1e3 if delay.endswith("ms") else float(delay)

impls = [("two-level", "gang-auto.{t}.json", gang), ("flat gloo", "gang-gloo.{t}.json", gang),
         ("plain Gloo", "plain.{t}.txt", peer), ("torch gloo", "torch.{t}.txt", peer),
         ("Open MPI", "mpi.{t}.txt", peer)]
plots = []
for link in links:
    rate, delay = link.split(":")
    for p in per_host:
        tag = f"{rate}.{p}"
        data = {}
        for name, pat, read in impls:
            path = os.path.join(out, pat.format(t=tag))
            if os.path.exists(path):
                data[name] = read(path)
        if "two-level" not in data:
            continue
        sizes = sorted(data["two-level"])
        print(f"\nall_reduce, 2 hosts x {p} ranks, link {rate} and {delay} each way: median us")
        print(f"{'size':>8}" + "".join(f" {n:>11}" for n, _, _ in impls if n in data) +
              f" {'floor':>9} {'plain/2lvl':>10} {'2lvl/floor':>10}")
        for s in sizes:
            floor = s * 8 / bits_per_s(rate) * 1e6 + micros(delay)
            row = f"{label(s):>8}"
            for n, _, _ in impls:
                if n in data:
                    v = data[n].get(s)
                    row += f" {v:11.1f}" if v is not None else f" {'-':>11}"
            two = data["two-level"][s]
            plain = data.get("plain Gloo", {}).get(s)
            row += f" {floor:9.1f} {plain / two if plain else float('nan'):10.2f} {two / floor:10.2f}"
            print(row)
        plots.append((rate, delay, p, sizes, data))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("\n(no matplotlib: no plot)")
    sys.exit(0)
if plots:
    fig, axes = plt.subplots(1, len(plots), figsize=(5 * len(plots), 4), squeeze=False)
    for ax, (rate, delay, p, sizes, data) in zip(axes.flat, plots):
        n = 2 * int(p)
        for name, series in data.items():
            xs = [s for s in sizes if s in series]
            ax.plot(xs, [s / series[s] / 1e3 * 2 * (n - 1) / n for s in xs], marker="o",
                    markersize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"all_reduce, 2 x {p} ranks, {rate} {delay}")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend()
    fig.tight_layout()
    png = os.path.join(out, "two_hosts.png")
    fig.savefig(png, dpi=90)
    print(f"\nplot: {png}")
PY
