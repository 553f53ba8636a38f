#!/bin/sh
# abi_gate_selftest.sh - shows the ABI gate failing, once per kind of break,
# each alone. In a scratch copy of the sources it builds libgang (debug
# info, no optimisation, the library alone), then for each mutant applies
# one change to a fresh copy of the headers, the sources and the version
# script, rebuilds, and expects abi_gate.sh to fail and name what changed:
#
#   field        a field inserted in the middle of gang_options_t
#   narrowed     gang_set_timeout's int64_t parameter narrowed to int
#   renumbered   the enumerator GANG_MAX renumbered
#   member_type  a struct member's type changed (same size, other type)
#   removed      gang_barrier dropped from the version script
#   moved        gang_grow moved from GANG_0.3 to GANG_0.2
#
# The unchanged build must pass.
#
#   tests/abi/abi_gate_selftest.sh [BUILD_DIR]   (default: build)
#
# Exit 0: the gate works, 1: it does not, 77: skipped (abigail-tools missing).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
gate=$root/tests/abi/abi_gate.sh
command -v abidw >/dev/null 2>&1 || { echo "SKIP: abidw not found"; exit 77; }

work=$(mktemp -d /tmp/gang-abi-selftest.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "abi-gate self-test: FAILED: $*" >&2; exit 1; }

run_gate() { # LIBDIR SRCDIR LOG
  sh "$gate" "$1/libgang.so.0" "$root/tests/abi" "$2/include/gang" "$2/src/gang.map" >"$3" 2>&1
}

# The unchanged build passes.
run_gate "$build" "$root" "$work/unchanged.log" ||
  { cat "$work/unchanged.log"; fail "the gate refuses the unchanged build"; }

mkdir -p "$work/src" "$work/pristine"
(cd "$root" && tar cf - CMakeLists.txt LICENSE cmake include src pkgconfig packaging) | tar xf - -C "$work/pristine"
cp -a "$work/pristine/." "$work/src/"
echo "abi-gate self-test: building the scratch library in $work/build"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Debug -DGANG_BUILD_TESTS=OFF \
  -DGANG_BUILD_EXAMPLES=OFF -DGANG_BUILD_BENCH=OFF -DGANG_BUILD_PYTHON=OFF \
  -DGANG_BUILD_GO=OFF -DGANG_WITH_NCCL=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure"; }

# Replaces `from` by `to` in FILE (a fixed string), failing if absent.
change() { # FILE FROM TO
  python3 - "$work/src/$1" "$2" "$3" <<'EOF' || fail "could not change $1"
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if old not in text:
    sys.exit(1)
open(path, "w").write(text.replace(old, new, 1))
EOF
}

# Puts back the pristine copy of every file a mutant changed (keeping the
# build's timestamps for the rest, so a rebuild is incremental).
restore() {
  for f in include/gang/gang.h src/gang.map src/abi/gang.cc; do
    if ! cmp -s "$work/pristine/$f" "$work/src/$f"; then cp "$work/pristine/$f" "$work/src/$f"; fi
  done
}

mutant() { # NAME WHAT-THE-REPORT-MUST-NAME
  name=$1
  expect=$2
  cmake --build "$work/build" -j2 --target gang >"$work/$name.build.log" 2>&1 ||
    { tail -30 "$work/$name.build.log"; fail "$name: build"; }
  if run_gate "$work/build" "$work/src" "$work/$name.log"; then
    cat "$work/$name.log"
    fail "$name: the gate passed it"
  fi
  grep -q -- "$expect" "$work/$name.log" ||
    { cat "$work/$name.log"; fail "$name: the report does not name $expect"; }
  echo "abi-gate self-test: $name refused:"
  grep -E "^FAIL|$expect" "$work/$name.log" | head -4 | sed 's/^/  /'
  restore
}

change include/gang/gang.h "  const char* backend;" "  const char* backend;
  int64_t inserted_field;"
# (and silence the library's own size check, as a careless change would)
change src/abi/gang.cc "kOptionsV0Size = 72;" "kOptionsV0Size = 80;"
mutant field gang_options

change include/gang/gang.h "gang_set_timeout(gang_t* gang, int64_t timeout_ms)" \
  "gang_set_timeout(gang_t* gang, int timeout_ms)"
change src/abi/gang.cc "gang_set_timeout(gang_t* g, int64_t timeout_ms)" \
  "gang_set_timeout(gang_t* g, int timeout_ms)"
mutant narrowed gang_set_timeout

change include/gang/gang.h "  GANG_MAX = 3," "  GANG_MAX = 5,"
mutant renumbered GANG_MAX

change include/gang/gang.h "  int32_t reserved0;       /* must be 0 */
} gang_options_t;" "  uint32_t reserved0;      /* must be 0 */
} gang_options_t;"
mutant member_type reserved0

change src/gang.map "    gang_barrier;
" ""
mutant removed gang_barrier

change src/gang.map "    gang_grow;
" ""
change src/gang.map "    gang_set_cuda_completion;" "    gang_set_cuda_completion;
    gang_grow;"
mutant moved gang_grow

echo "abi-gate self-test: ok: the unchanged build passes and each of the six mutants fails the gate"
