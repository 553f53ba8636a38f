#!/usr/bin/env bash
# run_packed.sh - on a lent GPU machine, from the repository root, what
# tests/gpu/pack.sh packed into build-device/:
#
#   bash build-device/run.sh [chaos-seconds]
#
# 1. every nccl.gpu case of test_nccl against the machine's CUDA runtime
#    and NCCL (from its PyTorch's site-packages/nvidia), ranks sharing its
#    GPU(s) as hosts of their own to NCCL (GANG_TEST_GPU_SHARE=1);
# 2. the fault-schedule test at width: three runs side by side, up to 16
#    ranks each, for the seconds given (default 300).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
chaos_s=${1:-300}
nproc; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
py=$(command -v python3 || true)
nv=$("$py" -c 'import nvidia, os; print(os.path.dirname(nvidia.__file__) if nvidia.__file__ else list(nvidia.__path__)[0])' 2>/dev/null || true)
nccl_dir=$(dirname "$(find "$nv" -name 'libnccl.so.2' 2>/dev/null | head -1)" 2>/dev/null || true)
cudart_dir=$(dirname "$(find "$nv" -name 'libcudart.so.13' 2>/dev/null | head -1)" 2>/dev/null || true)
echo "nvidia: $nv; nccl: $nccl_dir; cudart: $cudart_dir"
libpath="$here/lib:$nccl_dir:$cudart_dir"
# The packed loader and C library, so binaries built on a newer
# distribution run here.
run() { "$here/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$@"; }
run "$here/bin/test_chaos" --schedules 0 >/dev/null 2>&1 || echo "cannot run the packed binaries"

echo "== chaos at width: 3 runs side by side, up to 16 ranks, ${chaos_s} s (in the background)"
for seed in 1 2 3; do
  GANG_LOG_LEVEL=error timeout "$chaos_s" \
    "$here/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$here/bin/test_chaos" \
    --schedules 1000 --max-ranks 16 --seed "$seed" > "/tmp/chaos_$seed.log" 2>&1 &
done

echo "== nccl.gpu cases, ranks sharing the GPU (30 s each at most)"
for c in matrix_1 matrix_2 matrix_3 matrix_4 stream group split remote_error hang notice abort \
         unavailable late_input device_guard in_progress teardown capture pooled completion \
         completion_device_work \
         shrink gang_shrink; do
  start=$(date +%s%N)
  GANG_LOG_LEVEL=error GANG_TEST_GPU_SHARE=1 timeout 30 \
    "$here/lib/ld-linux-x86-64.so.2" --library-path "$libpath" "$here/bin/test_nccl" "test_$c" \
    > "/tmp/nccl_$c.log" 2>&1
  rc=$?
  printf '%-14s rc=%d %6d ms %s\n' "$c" "$rc" $(( ($(date +%s%N) - start) / 1000000 )) \
    "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) \]' "/tmp/nccl_$c.log" | head -1)"
  [ "$rc" -ne 0 ] && grep -E "rank [0-9]+\]|skipped:|error|Error" "/tmp/nccl_$c.log" | head -6
done

wait
for seed in 1 2 3; do
  echo "chaos seed $seed: $(grep -c '^chaos: ok' /tmp/chaos_$seed.log) schedules ok, $(grep -c 'chaos: FAILED' /tmp/chaos_$seed.log) failed"
  grep -E "chaos: FAILED" "/tmp/chaos_$seed.log" | head -5
done
if [ -n "${OUT:-}" ]; then cp /tmp/nccl_*.log /tmp/chaos_*.log "$OUT/" 2>/dev/null; fi
