#!/usr/bin/env bash
# tests/gpu/run.sh - everything that needs a GPU, in one command, for a
# machine that has one (and CUDA 12/13 with NCCL):
#
#   bash tests/gpu/run.sh [BUILD_DIR]     (default: build-gpu)
#
# Configures and builds gang there, runs every GPU-labelled test against the
# real CUDA runtime and NCCL (ctest -L gpu: nccl.gpu.*, python.cuda_gpu),
# gang.torch's CUDA cases (test_torch_backend.py --cuda),
# gang-bench's busbw tables on the GPUs (all-reduce, all-gather,
# reduce-scatter, broadcast, all-to-all; 8 B to 1 GiB), then nccl-tests'
# all_reduce_perf if it is on PATH (or in $NCCL_TESTS_DIR),
# for a figure to set beside gang's. Without a GPU it says so and exits 0:
# every GPU test skips, saying why. With fewer GPUs than a case has ranks,
# its ranks share them, each a host of its own to NCCL (NCCL_HOSTID; NCCL's
# socket transport on lo): every case runs (GANG_TEST_GPU_SHARE=0 skips
# those instead). On one GPU the tables are also run with 2 ranks sharing
# it: a functional check of real NCCL, never a speed figure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build-gpu}

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
fi
echo "== GPUs visible: $gpus"
[ "$gpus" -gt 0 ] && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" >/dev/null || exit 1

echo "== ctest -L gpu"
ctest --test-dir "$build" -L gpu --output-on-failure
rc=$?
echo "== why GPU tests skipped (if any):"
grep -hE "skipped: " "$build/Testing/Temporary/LastTest.log" | sort | uniq -c || true

if [ "$gpus" -eq 0 ]; then
  echo "no GPU: the GPU tests above skipped; nothing else to run"
  exit "$rc"
fi

# gang.torch on CUDA tensors (tests/torch/cuda_worker.py's cases), with the
# Python whose torch sees the GPUs ($GANG_TORCH_PYTHON, else python3):
# gang_torch is built for it first.
py=${GANG_TORCH_PYTHON:-$(command -v python3 || true)}
if [ -n "$py" ] && "$py" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "== gang.torch on CUDA tensors ($py)"
  "$py" tests/torch/test_torch_backend.py --cuda "$build" || rc=1
else
  echo "== gang.torch on CUDA tensors: skipped (no Python whose torch sees a GPU; set GANG_TORCH_PYTHON)"
fi

# gang's own busbw tables (nccl-tests' columns), one rank per GPU.
for coll in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  echo "== gang-bench --device cuda -t $coll, $gpus rank(s), 8 B to 1 GiB"
  "$build/gangrun" --nproc-per-node "$gpus" -- \
    "$build/gang-bench" --device cuda -t "$coll" -b 8 -e 1G -f 4 -n 20 -w 5 || rc=1
done

if [ "$gpus" -eq 1 ]; then
  # Two ranks on one GPU, each posing as its own host to NCCL: the bytes go
  # through NCCL's socket transport on loopback, so these are a functional
  # check (every result checked), not figures.
  for coll in all_reduce all_gather reduce_scatter broadcast all_to_all; do
    echo "== gang-bench --device cuda -t $coll, 2 ranks SHARING the GPU (functional check, not a figure)"
    NCCL_SOCKET_IFNAME=lo "$build/gangrun" --nproc-per-node 2 -- \
      bash -c 'NCCL_HOSTID=gang-bench-$LOCAL_RANK exec "$0" "$@"' "$build/gang-bench" \
      --device cuda -t "$coll" -b 8 -e 16M -f 16 -n 5 -w 1 || rc=1
  done
fi

perf=$(command -v all_reduce_perf || true)
[ -z "$perf" ] && [ -n "${NCCL_TESTS_DIR:-}" ] && perf="$NCCL_TESTS_DIR/all_reduce_perf"
if [ -n "$perf" ] && [ -x "$perf" ]; then
  echo "== nccl-tests all_reduce_perf, $gpus GPU(s), 8 B to 1 GiB"
  "$perf" -b 8 -e 1G -f 4 -g "$gpus"
else
  echo "== nccl-tests' all_reduce_perf not found (PATH or NCCL_TESTS_DIR): skipped"
fi
exit "$rc"
