#!/usr/bin/env bash
# Python programs, as torchrun runs them: a script ending in .py (not an
# executable) runs under GANG_PYTHON, else the virtual environment's python,
# else python3 on PATH, with -u; -m runs a module; --no-python runs the
# program as it is; an executable .py runs as it is.
#   test_python.sh GANGRUN
GANGRUN=$1
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip "no python3 on PATH"
# The interpreter itself, not a shim (pyenv) that starts another.
PY=$(python3 -c 'import sys; print(sys.executable)') || fail "python3 fails"
cd "$TMP" || fail "cd $TMP"

# Each rank prints its rank, the interpreter's argv and the script's.
cat >show.py <<'PYEOF'
import os, sys
cmd = open("/proc/self/cmdline").read().split("\0")[:-1]
print(os.environ["GANG_RANK"], os.environ["GANG_SIZE"], "|", " ".join(cmd), "|",
      " ".join(sys.argv))
PYEOF

# A python3 that says it was used, then runs the real one.
mkdir bin venv venv/bin
for f in bin/python3 venv/bin/python; do
  printf '#!/bin/sh\necho "via %s" >&2\nexec "%s" "$@"\n' "$f" "$PY" >"$f"
  chmod +x "$f"
done

note "a script in the current directory: python3 from PATH, with -u"
PATH="$TMP/bin:$PATH" "$GANGRUN" --nproc-per-node 2 show.py a "b c" \
  >out 2>err || { cat err >&2; fail "gangrun show.py failed"; }
for r in 0 1; do
  expect_grep "^$r 2 \| [^ ]*python[0-9.]* -u show\.py a b c \| show\.py a b c$" \
    out "rank $r"
done
[ "$(grep -c '^via bin/python3$' err)" -eq 2 ] || { cat err >&2; fail "not python3 from PATH"; }

note "VIRTUAL_ENV's python"
VIRTUAL_ENV="$TMP/venv" PATH="$TMP/bin:$PATH" "$GANGRUN" --nproc-per-node 2 \
  -- show.py >out 2>err || { cat err >&2; fail "gangrun under VIRTUAL_ENV failed"; }
[ "$(grep -c '^via venv/bin/python$' err)" -eq 2 ] || { cat err >&2; fail "not the venv's python"; }

note "GANG_PYTHON wins, as a name on PATH or a path"
GANG_PYTHON=python3 VIRTUAL_ENV="$TMP/venv" PATH="$TMP/bin:$PATH" \
  "$GANGRUN" -- show.py >out 2>err || { cat err >&2; fail "GANG_PYTHON=python3"; }
expect_grep '^via bin/python3$' err "GANG_PYTHON=python3"
GANG_PYTHON="$PY" VIRTUAL_ENV="$TMP/venv" "$GANGRUN" -v -- "$TMP/show.py" x \
  >out 2>err || { cat err >&2; fail "GANG_PYTHON=$PY"; }
grep -q '^via' err && fail "GANG_PYTHON=$PY ran a wrapper"
expect_grep "^0 1 \| $PY -u $TMP/show\.py x \|" out "GANG_PYTHON=$PY"
expect_grep "^gangrun: running $PY -u $TMP/show\.py x \(Python from GANG_PYTHON\)$" \
  err "--verbose says what runs"

note "-m and --module run a module"
mkdir pkg && : >pkg/__init__.py && cp show.py pkg/mod.py
"$GANGRUN" --nproc-per-node 2 -m pkg.mod m1 >out 2>err \
  || { cat err >&2; fail "-m pkg.mod"; }
expect_grep "^1 2 \| [^ ]*python[0-9.]* -u -m pkg\.mod m1 \| [^ ]*/pkg/mod\.py m1$" \
  out "-m"
"$GANGRUN" --module -- pkg.mod >out 2>err || { cat err >&2; fail "--module"; }
expect_grep "^0 1 \| [^ ]*python[0-9.]* -u -m pkg\.mod \|" out "--module"

note "an executable .py runs as it is"
printf '#!/bin/sh\necho "as is $GANG_RANK $0"\n' >tool.py && chmod +x tool.py
"$GANGRUN" ./tool.py >out 2>err || { cat err >&2; fail "./tool.py"; }
expect_grep '^as is 0 \./tool\.py$' out "./tool.py"
PATH="$TMP:$PATH" "$GANGRUN" tool.py >out 2>err || { cat err >&2; fail "tool.py on PATH"; }
expect_grep "^as is 0 $TMP/tool\.py$" out "tool.py on PATH"

note "--no-python runs the program as it is"
"$GANGRUN" --no-python show.py 2>err
[ $? -eq 1 ] || fail "--no-python show.py did not fail"
expect_grep '^gangrun: program not found on PATH: show\.py$' err "--no-python"
"$GANGRUN" --no_python ./tool.py >out 2>err || { cat err >&2; fail "--no_python ./tool.py"; }
expect_grep '^as is 0 \./tool\.py$' out "--no_python"

note "what cannot run says why"
"$GANGRUN" missing.py 2>err; [ $? -eq 1 ] || fail "missing.py"
expect_grep '^gangrun: cannot run the Python script missing\.py: .*not in the current directory, nor an executable on PATH' \
  err "missing.py"
"$GANGRUN" sub/missing.py 2>err; [ $? -eq 1 ] || fail "sub/missing.py"
expect_grep '^gangrun: cannot run the Python script sub/missing\.py: ' err "sub/missing.py"
GANG_PYTHON="$TMP/nope" "$GANGRUN" show.py 2>err; [ $? -eq 1 ] || fail "GANG_PYTHON=nope"
expect_grep "^gangrun: GANG_PYTHON=$TMP/nope is not a Python to run" err "GANG_PYTHON=nope"
VIRTUAL_ENV="$TMP/bin" "$GANGRUN" show.py 2>err; [ $? -eq 1 ] || fail "VIRTUAL_ENV without python"
expect_grep "^gangrun: VIRTUAL_ENV=$TMP/bin: cannot run $TMP/bin/bin/python: " err "bad VIRTUAL_ENV"
PATH=/nonexistent "$GANGRUN" show.py 2>err; [ $? -eq 1 ] || fail "no python3"
expect_grep '^gangrun: no python3 on PATH' err "no python3"
"$GANGRUN" -m --no-python pkg.mod 2>err; [ $? -eq 2 ] || fail "-m --no-python"
expect_grep '^gangrun: --module runs a Python module, --no-python runs no Python' err "-m --no-python"
"$GANGRUN" --help | grep -q 'GANG_PYTHON' || fail "--help does not name GANG_PYTHON"
echo PASS
