"""One rank of test_torch_interop.py: torch.distributed and gang in the same
process (not a test by itself).

Under any launcher that sets torchrun's variables (torchrun, gangrun), it
initialises torch.distributed with gloo and init_method="env://", creates a
gang from the environment with gang.create(), all-reduces the same values
in both, checks that they agree, and shuts both down. Under torchrun gang
meets through the agent's TCPStore (torch://); under gangrun through
gangrun's store, while torch.distributed's rank 0 serves its own TCPStore
on the MASTER_PORT gangrun left unbound.

  --fail-once  rank 1 of the first attempt (TORCHELASTIC_RESTART_COUNT 0)
               exits 3 after its first all-reduces, for torchrun's elastic
               restart to start the job again
  --agent-keys check that gang's rendezvous keys are in torchrun's agent
               store, readable by PyTorch as gang/...
  --gang-only  leave torch.distributed out. For the elastic restart: torch
               2.15's own gloo group does not survive one reliably, since
               torchrun's agent keeps its store across attempts and its
               workers no longer prefix their keys with the attempt, so a
               rank may dial the address of a rank of the previous attempt
               (seen with pure torch.distributed programs too)

Prints "mixed rank R of N (attempt A): torch SUM, gang SUM" per rank (the
torch sum is the gang sum with --gang-only), and "mixed rank R: clean
shutdown" last.
"""
import argparse
import datetime
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import gang


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-once", action="store_true")
    parser.add_argument("--agent-keys", action="store_true")
    parser.add_argument("--gang-only", action="store_true")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    use_torch = not args.gang_only
    if use_torch:
        dist.init_process_group("gloo", init_method="env://",
                                timeout=datetime.timedelta(seconds=120))
    g = gang.create()
    if (g.rank, g.size) != (rank, world):
        sys.exit("gang rank %d of %d, torch rank %d of %d"
                 % (g.rank, g.size, rank, world))

    values = [float(rank + 1), 10.0 * (rank + 1), -0.5 * rank]
    a = np.array(values, dtype=np.float64)
    g.all_reduce(a)
    t = torch.tensor(values if use_torch else a, dtype=torch.float64)
    if use_torch:
        dist.all_reduce(t)
    if not np.array_equal(t.numpy(), a):
        sys.exit("rank %d: torch %s, gang %s disagree" % (rank, t.tolist(), a))
    want = world * (world + 1) / 2
    if a[0] != want:
        sys.exit("rank %d: sum %g, expected %g" % (rank, a[0], want))
    print("mixed rank %d of %d (attempt %d): torch %g, gang %g"
          % (rank, world, attempt, t[0].item(), a[0]), flush=True)

    if args.fail_once and attempt == 0 and rank == 1:
        print("mixed rank 1: failing on purpose (attempt 0)", flush=True)
        os._exit(3)

    if args.agent_keys:
        agent = dist.TCPStore(os.environ["MASTER_ADDR"],
                              int(os.environ["MASTER_PORT"]), is_master=False,
                              wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=30))
        joined = int(agent.get("gang/gang/root/joined"))
        if joined < world:
            sys.exit("gang's joined counter in the agent store is %d" % joined)

    # Both groups still work after each other's traffic.
    g.barrier()
    if use_torch:
        dist.barrier()
    g.close()
    if use_torch:
        dist.destroy_process_group()
    print("mixed rank %d: clean shutdown" % rank, flush=True)


if __name__ == "__main__":
    main()
