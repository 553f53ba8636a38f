#!/bin/sh
# test_exports.sh LIBGANG - the shared object exports the C ABI and nothing
# else: only gang_* / gangs_* functions (plus the GANG_0 version node), every
# one of them versioned GANG_0, and the SONAME carries the ABI major.
#
# Exit 0: pass, 1: fail, 77: skipped (tools missing).
set -u

lib=${1:?usage: test_exports.sh path/to/libgang.so}

for tool in nm readelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found"
    exit 77
  fi
done
if [ ! -f "$lib" ]; then
  echo "FAIL: $lib does not exist"
  exit 1
fi

status=0
syms=$(nm -D --defined-only "$lib") || { echo "FAIL: nm -D failed on $lib"; exit 1; }

# Lines look like "000000000001a2b0 T gang_all_reduce@@GANG_0"; the version
# node itself is "0000000000000000 A GANG_0".
names=$(printf '%s\n' "$syms" | awk 'NF >= 2 { print $NF }')
count=$(printf '%s\n' "$names" | grep -c .)

unexpected=$(printf '%s\n' "$names" | sed 's/@.*$//' |
             grep -v -E '^(gang_|gangs_)[A-Za-z0-9_]+$' | grep -v -x 'GANG_0')
if [ -n "$unexpected" ]; then
  echo "FAIL: symbols outside gang_*/gangs_* are exported:"
  printf '%s\n' "$unexpected" | sed 's/^/  /' | head -50
  status=1
fi

# Every exported function carries the GANG_0 version node.
unversioned=$(printf '%s\n' "$names" | grep -E '^(gang_|gangs_)' | grep -v '@@GANG_0$')
if [ -n "$unversioned" ]; then
  echo "FAIL: exported functions without the GANG_0 version:"
  printf '%s\n' "$unversioned" | sed 's/^/  /' | head -50
  status=1
fi
if ! printf '%s\n' "$names" | grep -q -x 'GANG_0'; then
  echo "FAIL: no GANG_0 version node"
  status=1
fi

# The functions the contract names must be there.
for f in gang_version_number gang_version_string gang_status_name gang_status_string \
         gang_last_error gang_last_error_copy gang_dtype_size gang_store_create \
         gang_store_destroy gang_store_port gang_store_set gang_store_get gang_store_add \
         gang_store_wait gang_store_delete gang_free gang_options_init_v gang_create \
         gang_create_fake gang_destroy gang_abort gang_rank gang_size gang_backend_name \
         gang_device_type gang_device_index gang_name gang_root_rank gang_set_timeout \
         gang_get_timeout gang_get_async_error gang_supports gang_split gang_create_subgang \
         gang_all_reduce gang_reduce gang_broadcast gang_all_gather gang_all_gatherv \
         gang_gather gang_scatter gang_reduce_scatter gang_reduce_scatterv gang_all_to_all \
         gang_all_to_allv gang_barrier gang_send gang_recv gang_group_start gang_group_end \
         gang_broadcast_bytes gang_all_gather_bytes gang_send_bytes gang_recv_bytes \
         gang_broadcast_flag gang_all_sum gang_work_wait gang_work_test gang_work_destroy; do
  if ! printf '%s\n' "$names" | grep -q -x "$f@@GANG_0"; then
    echo "FAIL: $f is not exported (as $f@@GANG_0)"
    status=1
  fi
done

# The inline helper must stay inline: it is not a symbol.
if printf '%s\n' "$names" | grep -q -E '^gang_options_init(@|$)'; then
  echo "FAIL: gang_options_init is exported; it is a static inline in gang.h"
  status=1
fi

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
  echo "ok: $count exported names, all gang_*/gangs_* at GANG_0; SONAME $soname"
fi
exit "$status"
