#!/usr/bin/env bash
# examples/ffi/run.sh BUILD_DIR LANGUAGE - builds the LANGUAGE example
# (python, luajit, rust, java, pascal) against BUILD_DIR's libgang and runs
# it as 2 ranks under gangrun. Exit 77 (skipped), saying why, when the
# language's toolchain is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR LANGUAGE}" && pwd)
lang=${2:?usage: run.sh BUILD_DIR LANGUAGE}
lib=$build/libgang.so.0
work=$(mktemp -d /tmp/gang-ffi.XXXXXX)
trap 'rm -rf "$work"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
need() { command -v "$1" >/dev/null 2>&1 || skip "$1 not found (Debian: $2)"; }

case $lang in
  python)
    need python3 python3
    cmd=(python3 "$here/allreduce.py" "$lib") ;;
  luajit)
    need luajit luajit
    cmd=(luajit "$here/allreduce.lua" "$lib") ;;
  rust)
    need rustc rustc
    rustc --edition 2018 -O -L "$build" "$here/allreduce.rs" -o "$work/allreduce" >"$work/build.log" 2>&1 ||
      { cat "$work/build.log"; exit 1; }
    cmd=("$work/allreduce") ;;
  java)
    need javac default-jdk-headless
    jna=/usr/share/java/jna.jar
    [ -f "$jna" ] || skip "$jna not found (Debian: libjna-java)"
    javac -cp "$jna" -d "$work" "$here/AllReduce.java" >"$work/build.log" 2>&1 ||
      { cat "$work/build.log"; exit 1; }
    cmd=(java -cp "$jna:$work" AllReduce "$lib") ;;
  pascal)
    need fpc fp-compiler
    fpc -Fl"$build" -FE"$work" -o"$work/allreduce" "$here/allreduce.pas" >"$work/build.log" 2>&1 ||
      { cat "$work/build.log"; exit 1; }
    cmd=("$work/allreduce") ;;
  *)
    echo "unknown language $lang: python, luajit, rust, java or pascal"
    exit 2 ;;
esac
LD_LIBRARY_PATH=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  timeout 120 "$build/gangrun" --nproc-per-node 2 -- "${cmd[@]}"
