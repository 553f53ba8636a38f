#!/bin/sh
# abi_gate_selftest.sh - shows the ABI gate failing: in a scratch copy of
# the sources it inserts a field in the middle of gang_options_t and drops
# gang_barrier from the version script, builds libgang there (debug info,
# no optimisation, the library alone), and expects abi_gate.sh to fail and
# name both changes. Then it checks that the unchanged build passes.
#
#   tests/abi/abi_gate_selftest.sh [BUILD_DIR]   (default: build)
#
# Exit 0: the gate works, 1: it does not, 77: skipped (abigail-tools missing).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
gate=$root/tests/abi/abi_gate.sh
baseline=$root/tests/abi/libgang.so.0.abi
command -v abidw >/dev/null 2>&1 || { echo "SKIP: abidw not found"; exit 77; }

work=$(mktemp -d /tmp/gang-abi-selftest.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "abi-gate self-test: FAILED: $*" >&2; exit 1; }

# The unchanged build passes.
sh "$gate" "$build/libgang.so.0" "$baseline" "$root/include/gang" ||
  fail "the gate refuses the unchanged build"

# A scratch copy with two breaking changes.
mkdir -p "$work/src"
(cd "$root" && tar cf - CMakeLists.txt cmake include src pkgconfig) | tar xf - -C "$work/src"
sed -i 's|^  const char\* backend;  *\(/\*.*\)$|  const char* backend;\n  int64_t inserted_field;|' \
  "$work/src/include/gang/gang.h"
grep -q 'int64_t inserted_field;' "$work/src/include/gang/gang.h" ||
  fail "could not change gang_options_t in the scratch copy"
# (and silence the library's own size check, as a careless change would)
sed -i 's/kOptionsV0Size = 72;/kOptionsV0Size = 80;/' "$work/src/src/abi/gang.cc"
sed -i '/^    gang_barrier;$/d' "$work/src/src/gang.map"
! grep -q 'gang_barrier;' "$work/src/src/gang.map" ||
  fail "could not drop gang_barrier from the scratch copy's version script"

echo "abi-gate self-test: building the changed library in $work/build"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Debug -DGANG_BUILD_TESTS=OFF \
  -DGANG_BUILD_EXAMPLES=OFF -DGANG_BUILD_BENCH=OFF -DGANG_BUILD_PYTHON=OFF \
  -DGANG_BUILD_GO=OFF -DGANG_WITH_NCCL=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/build" -j2 --target gang >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "build"; }

if sh "$gate" "$work/build/libgang.so.0" "$baseline" "$work/src/include/gang" >"$work/gate.log" 2>&1; then
  cat "$work/gate.log"
  fail "the gate passed a library with a changed struct and a removed function"
fi
grep -q 'gang_barrier' "$work/gate.log" || { cat "$work/gate.log"; fail "the report does not name gang_barrier"; }
grep -q 'gang_options' "$work/gate.log" || { cat "$work/gate.log"; fail "the report does not name gang_options"; }
echo "abi-gate self-test: ok: the gate refused the changed library, naming gang_barrier and gang_options:"
grep -E "changes summary|gang_barrier|struct gang_options" "$work/gate.log" | head -8 | sed 's/^/  /'
