#!/bin/sh
# test_layout_complete.sh INCLUDE_DIR LAYOUT_C - every struct a public header
# defines (typedef struct NAME { ... } NAME_t, or struct NAME { ... }, named
# NAME_t) has
# its size pinned, on LP64 and on i386, in test_struct_layout.c.
set -u
inc=${1:?usage: test_layout_complete.sh include/gang tests/abi/test_struct_layout.c}
layout=${2:?usage: test_layout_complete.sh include/gang tests/abi/test_struct_layout.c}
missing=""
for t in $(sed -n 's/^\(typedef \)\{0,1\}struct \(gangs\{0,1\}_[a-z0-9_]*\) {$/\2_t/p' "$inc"/*.h); do
  n=$(grep -c "^SIZE($t," "$layout")
  [ "$n" -eq 2 ] || missing="$missing $t($n of 2)"
done
if [ -n "$missing" ]; then
  echo "FAIL: public structs without a pinned size on both LP64 and i386:$missing"
  exit 1
fi
echo "ok: every public struct is pinned on LP64 and i386"
