#!/bin/sh
# test_header_docs.sh INCLUDE_DIR - gang.h's table of status values says
# what gang_status.h defines: every X(NAME, value, ...) appears in it as
# "NAME = value", and nothing else does.
set -u
inc=${1:?usage: test_header_docs.sh include/gang}
defined=$(sed -n 's/^ *X(\(GANG_[A-Z_]*\), *\(-\{0,1\}[0-9]*\),.*/\1 \2/p' "$inc/gang_status.h" | sort)
shown=$(sed -n 's/^ \*   \(GANG_[A-Z_]*\) *= *\(-\{0,1\}[0-9]*\) .*/\1 \2/p' "$inc/gang.h" | sort)
if [ -z "$defined" ] || [ "$defined" != "$shown" ]; then
  echo "FAIL: gang.h's status table differs from gang_status.h (< defined, > shown):"
  echo "$defined" >/tmp/gang-status-defined.$$
  echo "$shown" | diff /tmp/gang-status-defined.$$ - | grep '^[<>]'
  rm -f /tmp/gang-status-defined.$$
  exit 1
fi
echo "ok: gang.h shows the $(echo "$defined" | wc -l) status values gang_status.h defines"
