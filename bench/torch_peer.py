"""torch.distributed's gloo as a peer for bench/two_hosts.sh: times
dist.all_reduce (float32 sum) from MIN to MAX bytes, FACTOR apart, and
prints "size_bytes time_us" lines on rank 0: for each size the median over
ITERS calls of each rank's time, the largest over ranks, as gang-bench
reports. Rank and size from gangrun's GANG_RANK and GANG_SIZE; rendezvous
at tcp://MASTER (host:port); GLOO_SOCKET_IFNAME picks the interface.

  gangrun ... -- python bench/torch_peer.py MIN MAX FACTOR ITERS WARMUP MASTER
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    lo, hi, factor, iters, warmup = (int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                                     int(sys.argv[4]), int(sys.argv[5]))
    rank, size = int(os.environ["GANG_RANK"]), int(os.environ["GANG_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://{sys.argv[6]}", rank=rank,
                            world_size=size)
    nbytes = lo
    while nbytes <= hi:
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        times = []
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        med = torch.tensor([statistics.median(times) * 1e6], dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(nbytes, f"{med.item():.1f}", flush=True)
        nbytes = int(nbytes * factor)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
