#!/bin/sh
# abi_gate.sh LIBGANG ABI_DIR INCLUDE_DIR MAP - the ABI gate. It fails on
# anything that could break a program built against a released libgang:
#
#  1. Per released version node, a baseline (ABI_DIR/baselines/<node>.abi:
#     abidw's XML of libgang as that node was released, public headers
#     only). abidiff against each must report 0 removed and 0 changed
#     functions and variables (a changed type reachable from them counts as
#     a changed function), and no incompatible change. Additions pass: they
#     belong to later nodes, which step 2 checks. abidiff's own filter of
#     harmless changes stays (an enumerator appended, a typedef renamed to
#     the same type); nothing else is suppressed.
#  2. Per node of MAP, a frozen symbol list (ABI_DIR/nodes/<node>.symbols,
#     one name per line, '#' comments): the node in MAP and the symbols the
#     library exports with that version must both be exactly the list. A
#     released node never gains, loses or trades a symbol; a function added
#     later goes into a new node, which comes with its own list and baseline.
#
# Releasing a node is a deliberate commit (see tests/abi/README.md):
#   abidw --headers-dir include/gang --no-corpus-path --drop-private-types \
#     --exported-interfaces-only \
#     --out-file tests/abi/baselines/GANG_0.4.abi build/libgang.so.0
#   (and tests/abi/nodes/GANG_0.4.symbols)
#
# Exit 0: pass, 1: fail, 77: skipped (abigail-tools missing).
set -u

usage="usage: abi_gate.sh libgang.so tests/abi include/gang src/gang.map"
lib=${1:?$usage}
abi_dir=${2:?$usage}
inc=${3:?$usage}
map=${4:?$usage}

for tool in abidw abidiff; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found (Debian: abigail-tools)"
    exit 77
  fi
done
work=$(mktemp -d /tmp/gang-abi-gate.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
problem() {
  echo "FAIL: $*"
  failed=1
}

# --- 1. every released node's baseline --------------------------------------
if ! abidw --headers-dir "$inc" --no-corpus-path --drop-private-types --exported-interfaces-only \
      --out-file "$work/current.abi" "$lib" 2>"$work/abidw.err"; then
  echo "FAIL: abidw could not read $lib:"
  cat "$work/abidw.err"
  exit 1
fi
baselines=$(ls "$abi_dir"/baselines/*.abi 2>/dev/null)
[ -n "$baselines" ] || problem "no baselines in $abi_dir/baselines"
# "<what> changes summary: R Removed, C Changed[ (F filtered out)], ..." ->
# "R C"; nothing when the line is missing.
counts() {
  sed -n "s/^$1 changes summary: \([0-9][0-9]*\) Removed, \([0-9][0-9]*\) Changed.*/\1 \2/p" "$2"
}
for base in $baselines; do
  node=$(basename "$base" .abi)
  report=$work/$node.report
  abidiff "$base" "$work/current.abi" >"$report" 2>&1
  rc=$?
  # abidiff's status is a bit field: 1 error, 2 usage error, 4 an ABI
  # change (additions too), 8 an incompatible change.
  if [ $((rc & 3)) -ne 0 ]; then
    problem "abidiff failed against $node (status $rc):"
    cat "$report"
    continue
  fi
  if [ "$rc" -eq 0 ]; then
    echo "ok: $node's ABI is unchanged (nothing added since)"
    continue
  fi
  bad=""
  for what in Functions Variables; do
    c=$(counts "$what" "$report")
    [ -n "$c" ] || { bad="$bad; no '$what changes summary' in abidiff's report"; continue; }
    # shellcheck disable=SC2086
    set -- $c
    [ "$1" -eq 0 ] || bad="$bad; $1 ${what} removed"
    [ "$2" -eq 0 ] || bad="$bad; $2 ${what} changed"
  done
  c=$(sed -n 's/^Function symbols changes summary: \([0-9][0-9]*\) Removed.*/\1/p' "$report")
  [ -z "$c" ] || [ "$c" -eq 0 ] || bad="$bad; $c function symbols removed"
  [ $((rc & 8)) -eq 0 ] || bad="$bad; abidiff found an incompatible change"
  if [ -n "$bad" ]; then
    problem "the ABI released as $node changed${bad} (abidiff status $rc):"
    cat "$report"
  else
    added=$(sed -n 's/^Functions changes summary: .*, \([0-9]*\) Added.*/\1/p' "$report")
    echo "ok: $node's ABI is unchanged (${added:-0} functions added since)"
  fi
done

# --- 2. every node frozen ------------------------------------------------------
# MAP -> "<node> <symbol>" lines.
awk '/^GANG_[0-9.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node) }
     /^[ \t]+gangs?_[A-Za-z0-9_]+;/ { s = $1; sub(/;.*/, "", s); print node, s }' \
  "$map" | sort >"$work/map"
# The library's versioned exports -> "<node> <symbol>" lines (objdump -T
# shows "GANG_0.1" or "(GANG_0.1)" before the name; the node's own
# definition symbol, named like the node, is not a function).
objdump -T "$lib" | awk '$NF ~ /^gangs?_/ { for (i = 1; i <= NF; ++i) if ($i ~ /^\(?GANG_/) { v = $i; gsub(/[()]/, "", v); print v, $NF } }' |
  sort >"$work/lib"
nodes=$(cut -d' ' -f1 "$work/map" | sort -u)
[ -n "$nodes" ] || problem "no version nodes in $map"
for node in $nodes; do
  frozen=$abi_dir/nodes/$node.symbols
  if [ ! -f "$frozen" ]; then
    problem "$node has no frozen symbol list ($frozen): a new node comes with its list and baseline"
    continue
  fi
  [ -f "$abi_dir/baselines/$node.abi" ] ||
    problem "$node has no baseline ($abi_dir/baselines/$node.abi)"
  grep -v '^#' "$frozen" | grep . | sort >"$work/frozen.$node"
  awk -v n="$node" '$1 == n { print $2 }' "$work/map" >"$work/map.$node"
  awk -v n="$node" '$1 == n { print $2 }' "$work/lib" >"$work/lib.$node"
  if ! cmp -s "$work/frozen.$node" "$work/map.$node"; then
    problem "$node in $map is not its frozen list (< frozen, > map):"
    diff "$work/frozen.$node" "$work/map.$node" | grep '^[<>]'
  fi
  if ! cmp -s "$work/frozen.$node" "$work/lib.$node"; then
    problem "$node as $lib exports it is not its frozen list (< frozen, > library):"
    diff "$work/frozen.$node" "$work/lib.$node" | grep '^[<>]'
  fi
done
for f in "$abi_dir"/nodes/*.symbols; do
  node=$(basename "$f" .symbols)
  echo "$nodes" | grep -qx "$node" || problem "$node is frozen but missing from $map"
done
unversioned=$(objdump -T "$lib" | awk '$NF ~ /^gangs?_/ && $0 !~ /GANG_/ { print $NF }')
[ -z "$unversioned" ] || problem "exported without a version node: $unversioned"

if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "ok: every node ($(echo $nodes)) exports exactly its frozen symbols"
exit 0
