#!/usr/bin/env bash
# Checks gang's Debian packages the way a Debian user meets them: builds
# libgang0, libgang-dev and python3-gang with cpack in BUILD_DIR (configured
# with -DCMAKE_INSTALL_PREFIX=/usr), shows their dependencies, installs them
# with apt-get, builds a C consumer with pkg-config and one with CMake
# against the system copy, runs them as 2 ranks, imports the Python package
# with Debian's python3, and removes the packages again. Root only (CI).
#
#   .ci/check-debs.sh [BUILD_DIR]     (default: build)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d /tmp/gang-debs-check.XXXXXX)
fail() { echo "check-debs: FAILED: $*" >&2; exit 1; }
cleanup() {
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q gang-consumer gang-tools libgang0 \
    libgang-dev python3-gang >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

grep -q '^CMAKE_INSTALL_PREFIX:PATH=/usr$' "$build/CMakeCache.txt" ||
  fail "$build is not configured with -DCMAKE_INSTALL_PREFIX=/usr"
(cd "$build" && rm -f ./*.deb && cpack -G DEB >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
for deb in "$build"/*.deb; do
  echo "check-debs: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
done
[ "$(ls "$build"/libgang0_*.deb "$build"/libgang-dev_*.deb "$build"/python3-gang_*.deb \
        "$build"/gang-tools_*.deb | wc -l)" = 4 ] ||
  fail "expected libgang0, libgang-dev, python3-gang and gang-tools"
# lintian on gang's own packages: clean, but for the overrides they ship,
# each with its reason.
if command -v lintian >/dev/null 2>&1; then
  lintian --no-cfg "$build"/libgang0_*.deb "$build"/libgang-dev_*.deb \
    "$build"/python3-gang_*.deb "$build"/gang-tools_*.deb >"$work/lintian.log" 2>&1 || true
  if grep -E '^[EW]:' "$work/lintian.log"; then
    fail "lintian: $(grep -c '^E:' "$work/lintian.log") errors, $(grep -c '^W:' "$work/lintian.log") warnings"
  fi
  echo "check-debs: lintian: no errors or warnings on the four packages"
fi

DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "$build"/libgang0_*.deb "$build"/libgang-dev_*.deb "$build"/python3-gang_*.deb \
  "$build"/gang-tools_*.deb >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get install ./*.deb"; }
# grep reads all of it: with pipefail, grep -q could leave ldconfig to die of SIGPIPE
ldconfig -p | grep 'libgang.so.0 ' >/dev/null || fail "libgang.so.0 is not in the loader's cache"

cat >"$work/prog.c" <<'PROG'
#define _POSIX_C_SOURCE 200809L
#include <gang/gang.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  gang_options_t o;
  gang_t* g = NULL;
  double x = 0;
  gang_options_init(&o); /* rank, size, init_method from GANG_* */
  if (gang_create(&o, &g) != GANG_OK) { fprintf(stderr, "%s\n", gang_last_error()); return 1; }
  x = gang_rank(g) + 1;
  if (gang_all_reduce(g, &x, &x, 1, GANG_FLOAT64, GANG_SUM, NULL) != GANG_OK || x != 3) return 1;
  printf("rank %d: sum %g (libgang %s)\n", gang_rank(g), x, gang_version_string());
  return gang_destroy(g) == GANG_OK ? 0 : 1;
}
PROG
two_ranks() {  # two_ranks NAME PROGRAM...
  local name=$1 r
  shift
  for r in 0 1; do
    GANG_RANK=$r GANG_SIZE=2 GANG_INIT_METHOD="file://$work/store-$name" \
      timeout 120 "$@" >"$work/$name-$r.log" 2>&1 &
  done
  wait %1 && wait %2 || { cat "$work/$name"-*.log; fail "$name: 2 ranks"; }
  echo "check-debs: $name: $(head -1 "$work/$name-0.log")"
}

# pkg-config and CMake find the system copy with no paths given.
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror "$work/prog.c" -o "$work/prog-pc" $(pkg-config --cflags --libs gang) ||
  fail "building with pkg-config"
two_ranks pkg-config "$work/prog-pc"
mkdir -p "$work/cm"
cp "$work/prog.c" "$work/cm/"
cat >"$work/cm/CMakeLists.txt" <<'CML'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(Gang 0.3 REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog PRIVATE Gang::gang)
CML
(cmake -S "$work/cm" -B "$work/cm/build" && cmake --build "$work/cm/build") >"$work/cm.log" 2>&1 ||
  { cat "$work/cm.log"; fail "building with find_package(Gang)"; }
two_ranks cmake "$work/cm/build/prog"
cat >"$work/prog.py" <<'PY'
import gang, numpy as np
with gang.create() as g:
    x = np.full(2, g.rank + 1.0)
    g.all_reduce(x)
    assert (x == 3).all(), x
    print(f"rank {g.rank}: sum {x[0]} ({gang.__file__})")
PY
(cd "$work" && two_ranks python /usr/bin/python3 "$work/prog.py")

# A package that depends on libgang, as a distribution would build one:
# dpkg-shlibdeps finds libgang0's symbols file and asks for the lowest
# release that has every function the program calls; lintian finds nothing
# that gang's files cause (a search path from gang.pc, say); apt installs it.
dep=$work/dep
mkdir -p "$dep/debian" "$dep/pkg/DEBIAN" "$dep/pkg/usr/bin"
cp "$work/prog-pc" "$dep/pkg/usr/bin/gang-consumer"
strip --strip-unneeded "$dep/pkg/usr/bin/gang-consumer"
printf 'Source: gang-consumer\n\nPackage: gang-consumer\nArchitecture: any\n' >"$dep/debian/control"
shlibs=$(cd "$dep" && dpkg-shlibdeps -O pkg/usr/bin/gang-consumer 2>"$work/shlibdeps.err") ||
  { cat "$work/shlibdeps.err"; fail "dpkg-shlibdeps on a program linked with libgang"; }
echo "check-debs: dpkg-shlibdeps: $shlibs"
depends=${shlibs#shlibs:Depends=}
echo "$depends" | grep -q 'libgang0 (>= 0\.1\.0)' ||
  fail "dpkg-shlibdeps did not ask for libgang0 (>= 0.1.0): $depends"
cat >"$dep/pkg/DEBIAN/control" <<CTL
Package: gang-consumer
Version: 1.0
Architecture: $(dpkg --print-architecture)
Maintainer: gang CI <ci@example.org>
Depends: $depends
Section: misc
Priority: optional
Description: a program linked with libgang (check-debs)
 Built by .ci/check-debs.sh to check that packages can depend on libgang0.
CTL
dpkg-deb --root-owner-group --build "$dep/pkg" "$work/gang-consumer_1.0.deb" >/dev/null ||
  fail "dpkg-deb --build gang-consumer"
if command -v lintian >/dev/null 2>&1; then
  lintian --no-cfg "$work/gang-consumer_1.0.deb" >"$work/lintian-dep.log" 2>&1 || true
  # The consumer has no copyright, changelog or manual page of its own;
  # what may not appear is anything gang's files cause.
  if grep -E 'custom-library-search-path|binary-or-shlib-defines-rpath|missing-dependency-on-libc' "$work/lintian-dep.log"; then
    fail "lintian finds a problem libgang causes in a package that depends on it"
  fi
  echo "check-debs: lintian on the dependent package: nothing from gang ($(grep -c '^[EW]:' "$work/lintian-dep.log") tags about its own packaging)"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$work/gang-consumer_1.0.deb" \
  >"$work/apt-dep.log" 2>&1 || { cat "$work/apt-dep.log"; fail "apt-get install gang-consumer"; }
two_ranks dependent-package /usr/bin/gang-consumer
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q gang-consumer >/dev/null 2>&1 ||
  fail "apt-get purge gang-consumer"

DEBIAN_FRONTEND=noninteractive apt-get purge -y -q gang-tools libgang0 libgang-dev python3-gang \
  >"$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "apt-get purge"; }
! dpkg -s libgang0 >/dev/null 2>&1 || fail "libgang0 is still installed"
[ ! -e /usr/include/gang/gang.h ] || fail "/usr/include/gang/gang.h is still there"
echo "check-debs: OK (installed, used from C, CMake and Python, purged)"
