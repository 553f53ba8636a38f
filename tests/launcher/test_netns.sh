#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair
# (10.77.0.1/24 and 10.77.0.2/24, addresses that exist only inside them).
# gangrun runs node 0 in one and node 1 in the other, 2 ranks each; the
# all-reduce must span both, and the ranks must use the veth interface:
# found from the route to the master address, or named by
# GANG_SOCKET_IFNAME. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and `ip`
# (iproute2); skips (77) without them.
# With ELASTIC (examples/c/train_elastic), also: a rank on node 1 is
# SIGKILLed mid-training; the survivors of both hosts shrink (two levels:
# shm within node 0, gloo across the veth), node 1's gangrun starts a
# replacement (--replace-failed 1) that joins, and all 4 end identical.
#   test_netns.sh GANGRUN PROG [ELASTIC]
GANGRUN=$1 PROG=$2 ELASTIC=${3-}
. "$(dirname "$0")/lib.sh"

command -v ip >/dev/null || skip "no 'ip' command (install iproute2)"
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"

NS_A=gangrun-a-$$ NS_B=gangrun-b-$$
VETH_A=gra$$ VETH_B=grb$$  # interface names are at most 15 bytes
ADDR_A=10.77.0.1 ADDR_B=10.77.0.2

cleanup() {
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null  # takes the veth pair with it
  ip link del "$VETH_A" 2>/dev/null
  cleanup_tmp
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$NS_A" 2>"$TMP/ip.err" ||
  skip "cannot create a network namespace: $(cat "$TMP/ip.err")"
ip netns add "$NS_B" 2>"$TMP/ip.err" ||
  skip "cannot create a network namespace: $(cat "$TMP/ip.err")"
ip link add "$VETH_A" type veth peer name "$VETH_B" 2>"$TMP/ip.err" ||
  skip "cannot create a veth pair: $(cat "$TMP/ip.err")"
ip link set "$VETH_A" netns "$NS_A" || fail "moving $VETH_A"
ip link set "$VETH_B" netns "$NS_B" || fail "moving $VETH_B"
ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A" || fail "address A"
ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VETH_B" || fail "address B"
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up || fail "lo up in $ns"
done
ip -n "$NS_A" link set "$VETH_A" up || fail "$VETH_A up"
ip -n "$NS_B" link set "$VETH_B" up || fail "$VETH_B up"
ip netns exec "$NS_A" true 2>"$TMP/ip.err" ||
  skip "cannot enter a network namespace: $(cat "$TMP/ip.err")"

# run NAME IFNAME_A IFNAME_B: one job across both namespaces; IFNAME_X is
# GANG_SOCKET_IFNAME for that node ("" for unset).
run() {
  local name=$1 if_a=$2 if_b=$3 port=29500 pa pb rca rcb
  ip netns exec "$NS_A" env GANG_LOG_LEVEL=info ${if_a:+GANG_SOCKET_IFNAME=$if_a} \
    "$GANGRUN" --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr "$ADDR_A" \
    --master-port $port --timeout 60 --prefix -- "$PROG" \
    >"$TMP/$name.a.out" 2>"$TMP/$name.a.err" &
  pa=$!
  ip netns exec "$NS_B" env GANG_LOG_LEVEL=info ${if_b:+GANG_SOCKET_IFNAME=$if_b} \
    "$GANGRUN" --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr "$ADDR_A" \
    --master-port $port --timeout 60 --prefix -- "$PROG" \
    >"$TMP/$name.b.out" 2>"$TMP/$name.b.err" &
  pb=$!
  wait $pa; rca=$?
  wait $pb; rcb=$?
  if [ $rca -ne 0 ] || [ $rcb -ne 0 ]; then
    cat "$TMP/$name".*.err >&2
    fail "$name: the nodes exited $rca and $rcb"
  fi
  for r in 0 1; do
    expect_grep "^\[rank $r\] rank $r of 4: sum 10 ok$" "$TMP/$name.a.out" "$name: rank $r"
  done
  for r in 2 3; do
    expect_grep "^\[rank $r\] rank $r of 4: sum 10 ok$" "$TMP/$name.b.out" "$name: rank $r"
  done  # "auto" picks two levels: shm within each host, gloo between them.
  [ "$(cat "$TMP/$name".*.err | grep -c 'created gang "root" rank [0-3] of 4 on shm+gloo')" -eq 4 ] ||
    fail "$name: not every rank created its gang on shm+gloo: $(grep -h 'created gang' "$TMP/$name".*.err)"
}

note "interface from the route to the master address"
run auto "" ""
# check_device NAME: each node's 2 ranks logged (GANG_LOG_LEVEL=info) a
# gloo device on its veth and address, e.g.
#   gloo device: tcp, pci=, iface=gra123, speed=10000, addr=[10.77.0.1]
check_device() {
  local side addr veth
  for side in a b; do
    addr=$ADDR_A veth=$VETH_A
    [ $side = b ] && addr=$ADDR_B veth=$VETH_B
    [ "$(grep -Ec "gloo device: .*iface=$veth, .*addr=\\[$addr\\]" \
         "$TMP/$1.$side.err")" -eq 2 ] || {
      cat "$TMP/$1.$side.err" >&2
      fail "$1: node $side's ranks did not report a device on $veth ($addr)"
    }
  done
}
check_device auto

note "GANG_SOCKET_IFNAME names the veth"
run ifname "$VETH_A" "$VETH_B"
check_device ifname

note "GANG_SOCKET_IFNAME naming a missing interface fails cleanly"
ip netns exec "$NS_A" env GANG_SOCKET_IFNAME=nosuch0 "$GANGRUN" --nnodes 2 \
  --node-rank 0 --nproc-per-node 1 --master-addr "$ADDR_A" --master-port 29501 \
  --timeout 60 -- "$PROG" >/dev/null 2>"$TMP/bad.a.err" &
pa=$!
ip netns exec "$NS_B" "$GANGRUN" --nnodes 2 --node-rank 1 --nproc-per-node 1 \
  --master-addr "$ADDR_A" --master-port 29501 --timeout 60 -- "$PROG" \
  >/dev/null 2>"$TMP/bad.b.err" &
pb=$!
wait $pa; rca=$?
wait $pb; rcb=$?
[ $rca -ne 0 ] || fail "node 0 succeeded on a missing interface"
[ $rcb -ne 0 ] || fail "node 1 succeeded without node 0"
expect_grep 'nosuch0' "$TMP/bad.a.err" "the missing interface named"

if [ -n "$ELASTIC" ]; then
  note "a rank lost on node 1: shrink across the hosts, a replacement joins there"
  port=29502
  ip netns exec "$NS_A" env GANG_LOG_LEVEL=info "$GANGRUN" --nnodes 2 --node-rank 0 \
    --nproc-per-node 2 --master-addr "$ADDR_A" --master-port $port --timeout 120 \
    --replace-failed 1 -- "$ELASTIC" >"$TMP/elastic.a.out" 2>"$TMP/elastic.a.err" &
  pa=$!
  ip netns exec "$NS_B" env GANG_LOG_LEVEL=info "$GANGRUN" --nnodes 2 --node-rank 1 \
    --nproc-per-node 2 --master-addr "$ADDR_A" --master-port $port --timeout 120 \
    --replace-failed 1 -- "$ELASTIC" >"$TMP/elastic.b.out" 2>"$TMP/elastic.b.err" &
  pb=$!
  wait $pa; rca=$?
  wait $pb; rcb=$?
  if [ $rca -ne 0 ] || [ $rcb -ne 0 ]; then
    tail -n 30 "$TMP"/elastic.*.err "$TMP"/elastic.*.out >&2
    fail "elastic: the nodes exited $rca and $rcb"
  fi
  expect_grep 'starting join 1 in its place' "$TMP/elastic.b.err" "node 1 started the replacement"
  [ "$(cat "$TMP"/elastic.*.out | grep -c 'done on 4 ranks: parameters identical')" -eq 4 ] ||
    fail "elastic: not all 4 ended identical: $(cat "$TMP"/elastic.*.out | grep done)"
  # The survivors' gang spans both hosts: two levels.
  grep -h 'created sub-gang "root/shrink1"\|shrank to "root/shrink1"' "$TMP"/elastic.*.err \
    | grep -q . || fail "elastic: no survivor logged its shrunk gang"
  grep -h 'created gang "root/grow2" rank [0-3] of 4 on shm+gloo' "$TMP"/elastic.*.err \
    | grep -c . | grep -qx 4 ||
    fail "elastic: the grown gang is not on shm+gloo on all 4: $(grep -h 'root/grow2' "$TMP"/elastic.*.err)"
fi
echo PASS
