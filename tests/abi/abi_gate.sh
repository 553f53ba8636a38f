#!/bin/sh
# abi_gate.sh LIBGANG BASELINE INCLUDE_DIR - the ABI gate: compares the
# built library with the checked-in ABI baseline (abidw's XML of the last
# release's libgang, public headers only) and fails on any change that is
# not an addition: a removed or changed function or variable, a changed
# type reachable from them. New functions pass (they belong in a new
# version node, which abi.exports checks).
#
# Updating the baseline is a deliberate commit:
#   abidw --headers-dir include/gang --no-corpus-path --drop-private-types \
#     --exported-interfaces-only \
#     --out-file tests/abi/libgang.so.0.abi build/libgang.so.0
#
# Exit 0: pass, 1: fail, 77: skipped (abigail-tools missing).
set -u

lib=${1:?usage: abi_gate.sh libgang.so baseline.abi include/gang}
baseline=${2:?usage: abi_gate.sh libgang.so baseline.abi include/gang}
inc=${3:?usage: abi_gate.sh libgang.so baseline.abi include/gang}

for tool in abidw abidiff; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found (Debian: abigail-tools)"
    exit 77
  fi
done
work=$(mktemp -d /tmp/gang-abi-gate.XXXXXX)
trap 'rm -rf "$work"' EXIT

if ! abidw --headers-dir "$inc" --no-corpus-path --drop-private-types --exported-interfaces-only \
      --out-file "$work/current.abi" "$lib" 2>"$work/abidw.err"; then
  echo "FAIL: abidw could not read $lib:"
  cat "$work/abidw.err"
  exit 1
fi
abidiff "$baseline" "$work/current.abi" >"$work/report" 2>&1
rc=$?
# abidiff's status is a bit field: 1 error, 2 usage error, 4 an ABI change,
# 8 an incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
  echo "FAIL: abidiff failed (status $rc):"
  cat "$work/report"
  exit 1
fi
# Anything in the summaries but additions fails the gate.
bad=$(grep -E "^(Functions|Variables|Unreachable types|Function symbols|Variable symbols) changes summary" \
        "$work/report" | grep -vE ": 0 Removed(, 0 Changed( \([0-9]+ filtered out\))?)?," || true)
if [ $((rc & 8)) -ne 0 ] || [ -n "$bad" ]; then
  echo "FAIL: the ABI of $lib changed beyond additions (abidiff status $rc):"
  cat "$work/report"
  exit 1
fi
added=$(sed -n 's/^Functions changes summary: .*, \([0-9]*\) Added.*/\1/p' "$work/report")
echo "ok: the ABI matches the baseline ${added:+(${added} functions added)}"
exit 0
