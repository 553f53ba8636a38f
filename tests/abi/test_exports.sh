#!/bin/sh
# test_exports.sh LIBGANG MAP INCLUDE_DIR - the shared object exports the C
# ABI and nothing else:
#   - only gang_* / gangs_* functions (plus the version nodes GANG_x.y);
#   - exactly the functions the version script MAP lists, each at the node
#     it is listed under (name@@GANG_0.1), so that a function added in a
#     later release cannot silently join an older node;
#   - exactly the functions the public headers in INCLUDE_DIR declare
#     (GANG_API ... name(), inline helpers excluded);
#   - SONAME libgang.so.<ABI major>, no weak or unique symbols.
#
# Exit 0: pass, 1: fail, 77: skipped (tools missing).
set -u

lib=${1:?usage: test_exports.sh path/to/libgang.so path/to/gang.map include/gang}
map=${2:?usage: test_exports.sh path/to/libgang.so path/to/gang.map include/gang}
inc=${3:?usage: test_exports.sh path/to/libgang.so path/to/gang.map include/gang}

for tool in nm readelf awk; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found"
    exit 77
  fi
done
for f in "$lib" "$map"; do
  [ -f "$f" ] || { echo "FAIL: $f does not exist"; exit 1; }
done

status=0
work=$(mktemp -d /tmp/gang-exports.XXXXXX)
trap 'rm -rf "$work"' EXIT
syms=$(nm -D --defined-only "$lib") || { echo "FAIL: nm -D failed on $lib"; exit 1; }

# Lines look like "000000000001a2b0 T gang_all_reduce@@GANG_0.1"; a version
# node itself is "0000000000000000 A GANG_0.1".
names=$(printf '%s\n' "$syms" | awk 'NF >= 2 { print $NF }')
count=$(printf '%s\n' "$names" | grep -c .)

unexpected=$(printf '%s\n' "$names" | sed 's/@.*$//' |
             grep -v -E '^(gang_|gangs_)[A-Za-z0-9_]+$' | grep -v -E '^GANG_[0-9]+\.[0-9]+$')
if [ -n "$unexpected" ]; then
  echo "FAIL: symbols outside gang_*/gangs_* are exported:"
  printf '%s\n' "$unexpected" | sed 's/^/  /' | head -50
  status=1
fi

# What the version script promises: name@@node, node by node.
awk '
  /^[ \t]*GANG_[0-9]+\.[0-9]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
  /^[ \t]*(gang|gangs)_[A-Za-z0-9_]+;/ { name = $1; sub(/;.*/, "", name); print name "@@" node }
' "$map" | sort >"$work/promised"
printf '%s\n' "$names" | grep -E '^(gang_|gangs_)' | sort >"$work/exported"
if [ ! -s "$work/promised" ]; then
  echo "FAIL: $map lists no functions"
  status=1
fi
if ! cmp -s "$work/promised" "$work/exported"; then
  echo "FAIL: the exports differ from $map (< listed there, > exported):"
  diff "$work/promised" "$work/exported" | grep '^[<>]' | sed 's/^/  /' | head -50
  status=1
fi

# What the headers declare: every GANG_API function, by name.
cat "$inc"/*.h | tr '\n' ' ' | grep -oE 'GANG_API [^;{]*\(' |
  sed -E 's/\($//; s/.*[ *]//' | grep -E '^(gang|gangs)_' | sort -u >"$work/declared"
sed 's/@.*//' "$work/exported" | sort -u >"$work/exported_names"
if ! cmp -s "$work/declared" "$work/exported_names"; then
  echo "FAIL: the exports differ from the headers' GANG_API functions (< declared, > exported):"
  diff "$work/declared" "$work/exported_names" | grep '^[<>]' | sed 's/^/  /' | head -50
  status=1
fi

# The inline helpers must stay inline: they are not symbols.
for f in gang_options_init gang_parallel_config_init gang_env_init; do
  if printf '%s\n' "$names" | grep -E "^$f(@|\$)" >/dev/null; then
    echo "FAIL: $f is exported; it is a static inline in gang.h"
    status=1
  fi
done

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ "$soname" != "libgang.so.0" ]; then
  echo "FAIL: SONAME is '$soname', expected libgang.so.0"
  status=1
fi

# Weak or unique symbols (C++ templates, typeinfo, inline statics) must not
# leak out either.
weak=$(printf '%s\n' "$syms" | awk '$2 == "W" || $2 == "V" || $2 == "u" { print $NF }')
if [ -n "$weak" ]; then
  echo "FAIL: weak or unique symbols are exported:"
  printf '%s\n' "$weak" | sed 's/^/  /' | head -20
  status=1
fi

if [ "$status" -eq 0 ]; then
  nodes=$(sed 's/.*@@//' "$work/promised" | sort -u | tr '\n' ' ')
  echo "ok: $count exported names; $(wc -l <"$work/promised") functions as listed in the map" \
       "(nodes: $nodes) and declared in the headers; SONAME $soname"
fi
exit "$status"
