"""Times a blocking 8-byte all-reduce (one float64, SUM) through the Python
binding. Run it on 2 ranks (see bindings/bench_overhead.sh); rank 0 prints
the mean time per call in microseconds. With GANG_BENCH_FAKE set it times a
fake gang of 2 instead (one process, no traffic): the cost of the call itself.

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
    with (gang.FakeGang(0, 2) if fake else gang.create()) as g:
        x = np.ones(1, dtype=np.float64)
        for _ in range(warmup):
            g.all_reduce(x)
        g.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            g.all_reduce(x)
        elapsed = time.perf_counter() - start
        if g.rank == 0:
            print(f"python {iters} calls: {elapsed * 1e6 / iters:.3f} us/call")


if __name__ == "__main__":
    main()
