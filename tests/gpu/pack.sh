#!/usr/bin/env bash
# tests/gpu/pack.sh - packs what a lent GPU machine runs, for a machine
# that cannot build gang itself (no Gloo headers there):
#
#   bash tests/gpu/pack.sh [BUILD_DIR] [OUT]     (default: build, build-device)
#
# OUT gets bin/ (test_nccl, test_chaos, gang-bench, gangrun, stripped),
# lib/ (libgang, its modules under lib/gang/, and every library they load
# from this machine, the C library and its loader included, so they run on
# an older distribution too) and run.sh (tests/gpu/run_packed.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build}
out=${2:-build-device}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/gang"
bins=("$build/tests/nccl/test_nccl" "$build/tests/test_chaos" "$build/gang-bench" "$build/gangrun")
for b in "${bins[@]}"; do cp "$b" "$out/bin/"; done
cp -L "$build/libgang.so.0" "$out/lib/"
cp "$build"/gang/libgang-*.so "$out/lib/gang/"
# Every library the binaries and modules load, except the kernel's vdso.
for f in "$out"/bin/* "$out"/lib/libgang.so.0 "$out"/lib/gang/*.so; do
  ldd "$f" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libgang.so*) ;;
    libcudart.so*|libnccl.so*|libcuda.so*) ;;  # the GPU machine's own
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/*.so* "$out"/lib/gang/*.so 2>/dev/null || true
cp tests/gpu/run_packed.sh "$out/run.sh"
du -sh "$out"
