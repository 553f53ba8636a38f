#!/usr/bin/env bash
# The job's directory is private, and nothing planted there is followed.
#   - by default gangrun makes a fresh one (mkdtemp, mode 0700) that no one
#     can guess from its pid, and removes it when nothing was written there;
#   - a --log-dir that another user owns or may write to is refused, saying
#     which and how to fix it, and a link planted in it is never followed
#     (as root: the directory belongs to nobody);
#   - in a --log-dir of the user's own, a link planted where --tee's log
#     goes fails the launch, saying why (launcher.dump plants one where a
#     flight-recorder dump goes).
#   test_jobdir.sh GANGRUN PROG
GANGRUN=$1
PROG=$2
. "$(dirname "$0")/lib.sh"

# 1. The default directory.
"$GANGRUN" --nproc-per-node 1 -- sh -c \
  'd=$(dirname "$GANG_FLIGHT_RECORDER"); stat -c "%a %u %n" "$d"' >"$TMP/out" 2>"$TMP/err" ||
  fail "the job failed: $(cat "$TMP/err")"
read -r mode owner dir <"$TMP/out"
note "the job's directory: $mode $owner $dir"
[ "$mode" = 700 ] || fail "the job's directory has mode $mode, not 700"
[ "$owner" = "$(id -u)" ] || fail "the job's directory belongs to uid $owner"
case "$(basename "$dir")" in
  gangrun-[0-9]*-??????) ;;
  *) fail "the job's directory is named $dir, not gangrun-<pid>-<random>" ;;
esac
[ ! -e "$dir" ] || fail "the empty job directory $dir was left behind"

# 2. Another user's --log-dir, with a link planted in it.
victim="$TMP/victim"
echo original >"$victim"
chmod 600 "$victim"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  theirs="$TMP/theirs"
  mkdir -m 0777 "$theirs"
  ln -s "$victim" "$theirs/rank-0.log"
  ln -s "$victim" "$theirs/flight-0.txt"
  chown -h nobody "$theirs" "$theirs/rank-0.log" "$theirs/flight-0.txt"
  chmod 0777 "$theirs"
  "$GANGRUN" --nproc-per-node 1 --tee --log-dir "$theirs" -- "$PROG" \
    >"$TMP/out" 2>"$TMP/err" && fail "gangrun used a --log-dir that belongs to nobody"
  note "$(grep -m1 'log-dir' "$TMP/err")"
  grep -q "belongs to nobody" "$TMP/err" || fail "the refusal does not say whose: $(cat "$TMP/err")"
  [ "$(cat "$victim")" = original ] || fail "the planted link was followed"
  chown nobody "$theirs"
  chmod 0777 "$theirs"
  chown root "$theirs"
  "$GANGRUN" --nproc-per-node 1 --tee --log-dir "$theirs" -- "$PROG" \
    >"$TMP/out" 2>"$TMP/err" && fail "gangrun used a --log-dir everyone may write to"
  grep -q "chmod go-w" "$TMP/err" || fail "the refusal does not say how to fix it: $(cat "$TMP/err")"
else
  note "not root (or no user nobody): another user's directory is not tried"
fi

# 3. A link planted in a directory of the user's own, where --tee's log
# goes. (Where a flight-recorder dump goes: launcher.dump.)
mine="$TMP/mine"
mkdir -m 0700 "$mine"
ln -s "$victim" "$mine/rank-0.log"
"$GANGRUN" --nproc-per-node 1 --tee --log-dir "$mine" -- "$PROG" >"$TMP/out" 2>"$TMP/err" &&
  fail "--tee wrote through a planted link"
grep -q "symbolic link" "$TMP/err" || fail "--tee does not say why: $(cat "$TMP/err")"
[ "$(cat "$victim")" = original ] || fail "--tee followed the planted link"
echo "PASS"
