#!/usr/bin/env bash
# check.sh PACKAGE_DIR - gang's annotations hold for a user: the built
# package (PACKAGE_DIR/gang, with its py.typed) is installed in a venv with
# mypy from PyPI, and mypy --strict must accept user_program.py and refuse
# each wrong use in wrong_program.py. Exit 77 (skipped) when PyPI cannot be
# reached.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pkg=$(cd "${1:?usage: check.sh PACKAGE_DIR}" && pwd)
venv=${GANG_TYPING_VENV:-$pkg/../typing-venv}
if [ ! -x "$venv/bin/mypy" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q mypy >"$venv.log" 2>&1 ||
    { cat "$venv.log"; echo "SKIP: could not install mypy from PyPI"; rm -rf "$venv"; exit 77; }
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site/gang"
cp -r "$pkg/gang" "$site/gang"
[ -f "$site/gang/py.typed" ] || { echo "FAIL: the package has no py.typed"; exit 1; }
cd "$here"
"$venv/bin/mypy" --version
if ! "$venv/bin/mypy" --strict --no-incremental user_program.py; then
  echo "FAIL: mypy --strict refuses a correct program using gang"
  exit 1
fi
out=$("$venv/bin/mypy" --strict --no-incremental wrong_program.py 2>&1) && {
  echo "FAIL: mypy --strict accepted wrong_program.py"; exit 1; }
want=$(grep -c '# error:' wrong_program.py)
got=$(echo "$out" | grep -c 'wrong_program.py:[0-9]*: error:' || true)
echo "$out"
if [ "$got" -ne "$want" ]; then
  echo "FAIL: mypy found $got errors in wrong_program.py, which has $want"
  exit 1
fi
for line in $(grep -n '# error:' wrong_program.py | cut -d: -f1); do
  echo "$out" | grep -q "wrong_program.py:$line: error:" ||
    { echo "FAIL: mypy did not refuse line $line"; exit 1; }
done
echo "ok: mypy --strict accepts user_program.py and refuses all $want wrong uses"
