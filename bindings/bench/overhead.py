"""Times a blocking 8-byte all-reduce (one float64, SUM) through the Python
binding. Run it on 2 ranks (see bindings/bench_overhead.sh); rank 0 prints
the mean time per call in microseconds, or with GANG_BENCH_MEDIAN set the
median of the calls' times (over TCP, a few calls of milliseconds would
swamp the mean). With GANG_BENCH_FAKE set it times a fake gang of 2 instead
(one process, no traffic): the cost of the call itself. GANG_BENCH_BACKEND
names the backend (default: auto). With GANG_BENCH_TORCH set the operand is
a torch tensor instead of a numpy array.

    python3 overhead.py [iterations [warmup]]
"""

import os
import sys
import time

import numpy as np

import gang


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    fake = os.environ.get("GANG_BENCH_FAKE")
    backend = os.environ.get("GANG_BENCH_BACKEND") or "auto"
    with (gang.FakeGang(0, 2) if fake else gang.create(backend=backend)) as g:
        if os.environ.get("GANG_BENCH_TORCH"):
            import torch

            x = torch.ones(1, dtype=torch.float64)
        else:
            x = np.ones(1, dtype=np.float64)
        for _ in range(warmup):
            g.all_reduce(x)
        g.barrier()
        if os.environ.get("GANG_BENCH_MEDIAN"):
            clock, times = time.perf_counter, []
            for _ in range(iters):
                t = clock()
                g.all_reduce(x)
                times.append(clock() - t)
            per_call = sorted(times)[iters // 2]
        else:
            start = time.perf_counter()
            for _ in range(iters):
                g.all_reduce(x)
            per_call = (time.perf_counter() - start) / iters
        if g.rank == 0:
            print(f"python {iters} calls: {per_call * 1e6:.3f} us/call")


if __name__ == "__main__":
    main()
