#!/bin/sh
# test_versions.sh SOURCE_DIR BUILD_DIR PRINT_VERSION - every place that states
# gang's version states the same one, and it follows the ABI: its
# major.minor is the newest version node of src/gang.map (a node addition
# bumps the minor version). The places: the CMake project (the generated
# gang_version.h and GangConfigVersion.cmake), pkg-config's gang.pc, the C
# calls gang_version_string and gang_version_number, the Python package
# (pyproject.toml, and gang.__version__ when the bindings are built), the
# Go package's Version, and the newest entry of CHANGELOG.md.
# PRINT_VERSION is print_version.c built against the library.
set -u
src=${1:?usage: test_versions.sh SOURCE_DIR BUILD_DIR PRINT_VERSION}
build=${2:?usage: test_versions.sh SOURCE_DIR BUILD_DIR PRINT_VERSION}
print_version=${3:?usage: test_versions.sh SOURCE_DIR BUILD_DIR PRINT_VERSION}
failed=0
node=$(sed -n 's/^GANG_\([0-9]*\.[0-9]*\)[ \t]*{.*/\1/p' "$src/src/gang.map" | sort -t. -k1,1n -k2,2n | tail -1)
[ -n "$node" ] || { echo "FAIL: no version node in src/gang.map"; exit 1; }
header=$(sed -n 's/^#define GANG_VERSION_STRING "\(.*\)"$/\1/p' "$build/include/gang/gang_version.h")
case $header in
  "$node".*) ;;
  *) echo "FAIL: the project version is $header, but the newest ABI node is GANG_$node"; failed=1 ;;
esac
check() { # WHERE VALUE
  if [ "$2" = "$header" ]; then
    echo "ok: $1 says $2"
  else
    echo "FAIL: $1 says '$2', the project $header"
    failed=1
  fi
}
check "gang.pc" "$(sed -n 's/^Version: //p' "$build/gang.pc")"
check "GangConfigVersion.cmake" "$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/GangConfigVersion.cmake")"
c_says=$("$print_version")
check "gang_version_string()" "$(echo "$c_says" | sed -n 1p)"
check "gang_version_number()" "$(echo "$c_says" | sed -n 2p)"
check "bindings/python/pyproject.toml" "$(sed -n 's/^version = "\(.*\)"$/\1/p' "$src/bindings/python/pyproject.toml")"
if [ -d "$build/bindings/python/gang" ]; then
  # (not in a sanitizer build: python3 cannot load an instrumented libgang)
  if ! grep -q 'fsanitize' "$build/CMakeCache.txt" 2>/dev/null; then
    check "gang.__version__" "$(PYTHONPATH=$build/bindings/python python3 -c 'import gang; print(gang.__version__)' 2>&1 | tail -1)"
  fi
fi
check "bindings/go (Version)" "$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$src/bindings/go/gang.go")"
check "CHANGELOG.md" "$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' "$src/CHANGELOG.md" | head -1)"
exit $failed
