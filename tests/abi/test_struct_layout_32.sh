#!/bin/sh
# test_struct_layout_32.sh CC SOURCE INCLUDE_DIR... - compiles test_struct_layout.c for
# i386 (-m32): the layout table must hold there too. Exit 77 (skipped) when
# the compiler has no 32-bit headers (Debian: gcc-multilib).
set -u
cc=$1 src=$2
shift 2
incs=""
for d in "$@"; do incs="$incs -I$d"; done
if ! printf '#include <stdint.h>\nint x;\n' | $cc -m32 -xc - -fsyntax-only 2>/dev/null; then
  echo "SKIP: $cc -m32 has no 32-bit C library headers (install gcc-multilib)"
  exit 77
fi
# shellcheck disable=SC2086
$cc -m32 -std=c11 -Wall -Werror -fsyntax-only $incs "$src" || exit 1
echo "ok: the public structs have the i386 layout gang ships"
