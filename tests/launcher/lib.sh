# Shared helpers for gangrun's shell tests. Source it after setting
#   GANGRUN (the gangrun binary) and, where used, PROG (launcher_allreduce).
# Every test exits 0 (pass), 1 (fail) or 77 (skip, with the reason).

set -u

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gangrun-test.XXXXXX")
cleanup_tmp() { rm -rf "$TMP"; }
trap cleanup_tmp EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

skip() {
  echo "SKIP: $*" >&2
  exit 77
}

note() { echo "--- $*" >&2; }

now() { date +%s.%N; }

# elapsed START: seconds since START (a `now` value), with decimals.
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# less_than X Y: whether X < Y (decimals).
less_than() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# alive PID: whether PID runs (a zombie counts as dead: the container's init
# may not reap what it inherits).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$state" != Z ]
}

# wait_files N PATTERN-PREFIX SECONDS: waits until N files PREFIX* exist.
wait_files() {
  local n=$1 prefix=$2 limit=$3 start
  start=$(now)
  while :; do
    # shellcheck disable=SC2086
    [ "$(ls $prefix* 2>/dev/null | wc -l)" -ge "$n" ] && return 0
    less_than "$(elapsed "$start")" "$limit" || return 1
    sleep 0.05
  done
}

# all_gone DIR SECONDS: every pid in DIR/pid.* is gone within SECONDS.
all_gone() {
  local dir=$1 limit=$2 start pid f
  start=$(now)
  for f in "$dir"/pid.*; do
    pid=$(cat "$f")
    while alive "$pid"; do
      less_than "$(elapsed "$start")" "$limit" || {
        echo "pid $pid ($(basename "$f")) is still running" >&2
        return 1
      }
      sleep 0.05
    done
  done
}

# expect_grep PATTERN FILE WHAT: fails unless FILE has a line matching the
# extended regex PATTERN.
expect_grep() {
  grep -Eq -- "$1" "$2" || {
    echo "--- $2:" >&2
    cat "$2" >&2
    fail "$3: no line matching /$1/"
  }
}

# A rank body for `sh -c` that records its pid in $DIR/pid.$GANG_RANK, then
# becomes `sleep`; SH_PREP runs first (e.g. trap '' TERM).
sleeper() {
  echo "$1 echo \$\$ > $2/pid.\$GANG_RANK; exec sleep ${3:-120}"
}
