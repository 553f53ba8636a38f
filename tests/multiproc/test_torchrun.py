#!/usr/bin/env python3
"""torchrun interop: gang beside torch.distributed, through torchrun's store.

Usage: test_torchrun.py TORCHRUN_RANK   (TORCHRUN_RANK: the built helper,
tests/multiproc/torchrun_rank.c)

1. The torch:// store against a TCPStore this script serves: what PyTorch
   sets, gang reads (and the other way round), add, wait, delete, timeouts.
2. A real torchrun job of 2 processes. Each runs a PyTorch program that
   initialises torch.distributed (gloo, env://) and all-reduces, and the gang
   C helper, which creates a gang from the torchrun environment and
   all-reduces. torchrun's agent already serves its TCPStore on MASTER_PORT,
   so gang must be its client and never bind that port; the worker then
   finds gang's rendezvous keys in the agent's store.
3. A rank pointed at a wrong master address fails within the store timeout,
   naming the address.

Needs Debian's python3-torch: exits 77 (skipped) without it.
"""
import datetime
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77


def find_torch():
    """Imports torch, or re-runs this script with a Python that has it."""
    try:
        import torch.distributed  # noqa: F401
        return
    except ImportError:
        pass
    # Debian's python3-torch lives in the system Python, which may not be
    # the python3 first on PATH.
    for python in ("/usr/bin/python3",):
        if os.path.realpath(python) == os.path.realpath(sys.executable):
            continue
        if os.access(python, os.X_OK) and subprocess.run(
                [python, "-c", "import torch.distributed"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            os.execv(python, [python] + sys.argv)
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch)")
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def part_store(helper):
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
    store.set("gang/from_torch", b"hi")
    store.add("gang/counter", 5)
    url = "torch://127.0.0.1:%d" % store.port
    r = subprocess.run([helper, "store", url], timeout=120)
    check(r.returncode == 0, "torchrun_rank store %s exited %d" % (url, r.returncode))
    check(store.get("gang/to_torch") == b"pong", "gang's key seen from PyTorch")
    check(store.get("gang/counter") == b"7", "gang's add seen from PyTorch")
    print("part 1: torch:// store against TCPStore: ok", flush=True)


def worker(helper):
    """One torchrun worker: torch.distributed, then gang, then both agree."""
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=120))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    check(t.item() == world * (world + 1) / 2, "torch all_reduce gave %s" % t.item())
    print("torch rank %d of %d: sum %g" % (rank, world, t.item()), flush=True)

    r = subprocess.run([helper, "gang"], timeout=180)
    check(r.returncode == 0, "rank %d: torchrun_rank gang exited %d" % (rank, r.returncode))

    # gang rendezvoused through the agent's store: its counter is there,
    # under gang's prefix, next to torch.distributed's keys.
    agent = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
    joined = agent.get("gang/gang/root/joined")
    check(int(joined) >= world, "gang's joined counter in the agent store is %r" % joined)
    dist.barrier()
    dist.destroy_process_group()
    print("worker %d: ok" % rank, flush=True)


def part_torchrun(helper):
    port = free_port()
    env = dict(os.environ)
    env["GLOO_SOCKET_IFNAME"] = "lo"  # torch's gloo; gang finds loopback itself
    env["GANG_TIMEOUT_MS"] = "60000"
    env.pop("GANG_INIT_METHOD", None)
    # Debian's torchrun 1.13 on Python 3.11 cannot parse its default
    # --redirects/--tee of "0", nor "3" (iterating an IntFlag yields only its
    # single-bit members there), so tee the workers' stdout ("1") through
    # log files to the console; their stderr reaches it directly.
    log_dir = tempfile.mkdtemp(prefix="gang-torchrun-")
    cmd = [sys.executable, "-m", "torch.distributed.run",
           "--nnodes=1", "--nproc_per_node=2", "--max_restarts=0",
           "--master_addr=127.0.0.1", "--master_port=%d" % port,
           "--redirects=1", "--tee=1", "--log_dir=%s" % log_dir,
           os.path.abspath(__file__), "--worker", helper]
    start = time.time()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=240, universal_newlines=True)
    sys.stdout.write(r.stdout)
    shutil.rmtree(log_dir, ignore_errors=True)
    check(r.returncode == 0, "torchrun exited %d" % r.returncode)
    for rank in (0, 1):
        check("torch rank %d of 2: sum 3" % rank in r.stdout, "torch rank %d's line" % rank)
        check("gang rank %d of 2: sum 30" % rank in r.stdout, "gang rank %d's line" % rank)
        check("worker %d: ok" % rank in r.stdout, "worker %d finished" % rank)
    print("part 2: torchrun job with torch.distributed and gang: ok (%.1f s)"
          % (time.time() - start), flush=True)


def part_wrong_master(helper):
    # A port that refuses connections: bound, not listening.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        env = dict(os.environ)
        env.update({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                    "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True",
                    "GANG_TIMEOUT_MS": "2000"})
        env.pop("GANG_INIT_METHOD", None)
        start = time.time()
        r = subprocess.run([helper, "gang"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60, universal_newlines=True)
        took = time.time() - start
    check(r.returncode != 0, "a rank with a wrong master address succeeded")
    check("127.0.0.1:%d" % port in r.stdout and "MASTER_ADDR" in r.stdout,
          "the message names the address and MASTER_ADDR: %r" % r.stdout)
    check(took < 20, "it took %.1f s, far past the 2 s store timeout" % took)
    print("part 3: wrong master fails in %.1f s: %s" % (took, r.stdout.strip().splitlines()[-1]),
          flush=True)


def main():
    find_torch()
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        return
    if len(sys.argv) != 2:
        print("usage: test_torchrun.py TORCHRUN_RANK", file=sys.stderr)
        sys.exit(2)
    helper = os.path.abspath(sys.argv[1])
    part_store(helper)
    part_torchrun(helper)
    part_wrong_master(helper)
    print("test_torchrun: all parts passed")


if __name__ == "__main__":
    main()
