"""Data-parallel training that survives a lost rank, in Python with gang.

The same linear model as train_linear.py, on 4 ranks. At step 20 one rank
is killed (SIGKILL). The others' all-reduce fails; they shrink the gang to
the 3 survivors and go on, each now drawing its batches from the shards
of the ranks it stands in for (the data is re-sharded over the survivors).
A replacement process is started (here by rank 0; a launcher would do it);
it asks to join, and at the next step boundary the survivors grow the gang
back to 4, broadcast the parameters to it, and all 4 train to the end. The
program checks that every rank ends with the same parameters, that the
model found the true ones, and that the gang is 4 ranks again; it exits
nonzero otherwise.

Run it (it starts its own 4 ranks, with a store of their own):

    PYTHONPATH=build/bindings/python /usr/bin/python3 examples/python/train_elastic.py
"""

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np

import gang

TRUE_W = np.array([1.5, -2.0, 0.5, 3.0])
TRUE_B = 0.7
SHARD, BATCH, STEPS, LR = 512, 32, 200, 0.1
RANKS, VICTIM, KILL_AT = 4, 2, 20


def make_shard(shard: int):
    rng = np.random.default_rng(1234 + shard)
    x = rng.uniform(-1.0, 1.0, size=(SHARD, TRUE_W.size))
    y = x @ TRUE_W + TRUE_B + rng.normal(0.0, 0.01, size=SHARD)
    return x, y


SHARDS = [make_shard(s) for s in range(RANKS)]


def gradient(params, step: int, shards):
    """The mean-squared-error gradient on a batch from each of `shards`."""
    grad = np.zeros(params.size + 1)  # w, b, and the loss last
    for s in shards:
        x, y = SHARDS[s]
        lo = (step * BATCH) % SHARD
        xb, yb = x[lo:lo + BATCH], y[lo:lo + BATCH]
        err = xb @ params[:-1] + params[-1] - yb
        grad[:-2] += 2 * xb.T @ err / BATCH
        grad[-2] += 2 * err.mean()
        grad[-1] += (err ** 2).mean()
    return grad / len(shards)


def my_shards(g) -> list:
    """The data shards this rank trains on: all of them dealt round-robin
    over the gang's ranks."""
    return [s for s in range(RANKS) if s % g.size == g.rank]


def log(g, text):
    print(f"[rank {g.rank}/{g.size}] {text}", flush=True)


def train(g, params, first_step: int, url: str) -> tuple:
    step = first_step
    replacement = None
    # Old gangs are failed or replaced, but kept until the end: rank 0's
    # first gang serves the job's store (tcp://), which joiners still need.
    old = []
    while step < STEPS:
        if step == KILL_AT and g.size == RANKS and g.rank == VICTIM:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            grad = gradient(params, step, my_shards(g))
            g.all_reduce(grad, gang.ReduceOperation.MEAN)
        except gang.GangError as e:
            log(g, f"step {step}: {type(e).__name__}: {str(e)[:100]}")
            start = time.monotonic()
            small = g.shrink()
            old.append(g)
            g = small
            log(g, f"shrank to {g.size} ranks in {time.monotonic() - start:.2f} s; "
                   f"training on with shards {my_shards(g)}")
            if g.rank == 0:
                replacement = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--join", url])
            continue  # the step again, on the survivors
        params -= LR * grad[:-1]
        if g.size < RANKS:  # a step boundary: admit whoever asked to join
            grown = g.grow()
            # The job wants its 4 ranks back by step KILL_AT + 50: wait there
            # for the replacement (it starts in about a second).
            waited = time.monotonic()
            while grown is None and step == KILL_AT + 50 and time.monotonic() - waited < 60:
                time.sleep(0.05)
                grown = g.grow()
            if grown is not None:
                old.append(g)
                g = grown
                g.broadcast(params, 0)
                g.broadcast(np.array([step + 1.0]), 0)
                log(g, f"grew back to {g.size} ranks after step {step}")
        if step % 50 == 0 and g.rank == 0:
            log(g, f"step {step}: loss {grad[-1]:.5f}")
        step += 1
    g.barrier()
    for done in old:
        done.close()
    return g, params, replacement


def check(g, params) -> int:
    everyone = g.all_gather_object(params.tolist())
    same = all(p == everyone[0] for p in everyone)
    found = np.allclose(params[:-1], TRUE_W, atol=0.02) and abs(params[-1] - TRUE_B) < 0.02
    log(g, f"done on {g.size} ranks: parameters {'identical' if same else 'DIFFER'}, "
           f"w {np.round(params[:-1], 3).tolist()} b {params[-1]:.3f}")
    return 0 if same and found and g.size == RANKS else 1


def rank_main(rank: int, url: str) -> int:
    g = gang.create(rank=rank, size=RANKS, init_method=url, timeout=10)
    params = np.zeros(TRUE_W.size + 1)
    g, params, replacement = train(g, params, 0, url)
    rc = check(g, params)
    g.close()
    if replacement is not None:
        rc |= replacement.wait(60)
    return rc


def join_main(url: str) -> int:
    g = gang.join(init_method=url, timeout=60)
    params = np.zeros(TRUE_W.size + 1)
    g.broadcast(params, 0)
    step = np.zeros(1)
    g.broadcast(step, 0)
    log(g, f"joined at step {int(step[0])}")
    g, params, _ = train(g, params, int(step[0]), url)
    rc = check(g, params)
    g.close()
    return rc


def launch() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), url])
             for r in range(RANKS)]
    # Reaped as they end, as a launcher does: a dead rank must not linger as
    # a zombie, which its peers on this host would take for alive.
    codes = [None] * RANKS
    deadline = time.monotonic() + 300
    while None in codes and time.monotonic() < deadline:
        codes = [c if c is not None else p.poll() for p, c in zip(procs, codes)]
        time.sleep(0.05)
    ok = all(c == 0 for r, c in enumerate(codes) if r != VICTIM) and \
        codes[VICTIM] == -signal.SIGKILL
    print(f"train_elastic: exit codes {codes} (rank {VICTIM} killed on purpose): "
          f"{'OK' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        sys.exit(rank_main(int(sys.argv[2]), sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "--join":
        sys.exit(join_main(sys.argv[2]))
    sys.exit(launch())
