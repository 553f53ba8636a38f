"""Data-parallel training that survives a lost rank, in Python with gang.

The same linear model as train_linear.py, on 4 ranks started by gangrun
with --replace-failed 1. At step 20 rank 2 kills itself (SIGKILL). The
others' all-reduce fails; they shrink the gang to the 3 survivors and go
on, each now drawing its batches from the shards of the ranks it stands in
for (the data is re-sharded over the survivors). Meanwhile gangrun starts a
replacement, the same program with GANG_JOIN=1 in its environment: it
calls gang.join(), and at a step boundary the survivors grow the gang back
to 4, broadcast the parameters and the step to it, and all 4 train to the
end. Every process checks that all end with the same parameters, that the
model found the true ones with a small loss, that the gang is 4 ranks
again, and that it shrank and grew once (or joined); it exits nonzero
otherwise, and so does gangrun.

Run it (from the source tree, after building into build/):

    PYTHONPATH=build/bindings/python build/gangrun --replace-failed 1 \\
        --nproc-per-node 4 -- /usr/bin/python3 examples/python/train_elastic.py
"""

import os
import signal
import sys
import time

import numpy as np

import gang

TRUE_W = np.array([1.5, -2.0, 0.5, 3.0])
TRUE_B = 0.7
SHARD, BATCH, STEPS, LR = 512, 32, 200, 0.1
RANKS, VICTIM, KILL_AT = 4, 2, 20
# The survivors look for a replacement every ADMIT_EVERY steps (a step
# boundary the program chooses, such as a checkpoint); at REGROW_BY the job
# wants its 4 ranks back, and they wait there if none has asked yet.
ADMIT_EVERY = 40
REGROW_BY = 2 * ADMIT_EVERY - 1


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


def train(g, params, first_step: int, victim: bool, events: dict) -> tuple:
    """Trains from first_step to STEPS; returns the last gang, the
    parameters and the last loss. events counts shrinks and grows."""
    step = first_step
    loss = float("nan")
    # The failed gang and the one grown out of are closed at the end, once
    # every rank is past the last step.
    old = []
    while step < STEPS:
        if victim and step == KILL_AT:
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
            events["shrinks"] += 1
            log(g, f"shrank to {g.size} ranks in {time.monotonic() - start:.2f} s; "
                   f"training on with shards {my_shards(g)}")
            continue  # the step again, on the survivors
        params -= LR * grad[:-1]
        loss = grad[-1]
        if g.size < RANKS and (step + 1) % ADMIT_EVERY == 0:
            # A step boundary: admit whoever asked to join.
            grown = g.grow()
            waited = time.monotonic()
            while grown is None and step == REGROW_BY and time.monotonic() - waited < 60:
                time.sleep(0.05)
                grown = g.grow()
            if grown is not None:
                old.append(g)
                g = grown
                events["grows"] += 1
                g.broadcast(params, 0)
                g.broadcast(np.array([step + 1.0]), 0)
                log(g, f"grew back to {g.size} ranks after step {step}")
        if step % 50 == 0 and g.rank == 0:
            log(g, f"step {step}: loss {loss:.5f}")
        step += 1
    g.barrier()
    for done in old:
        done.close()
    return g, params, loss


def check(g, params, loss: float, events: dict, expected: dict) -> int:
    everyone = g.all_gather_object(params.tolist())
    same = all(p == everyone[0] for p in everyone)
    found = np.allclose(params[:-1], TRUE_W, atol=0.02) and abs(params[-1] - TRUE_B) < 0.02
    converged = loss < 1e-3
    log(g, f"done on {g.size} ranks: parameters {'identical' if same else 'DIFFER'}, "
           f"w {np.round(params[:-1], 3).tolist()} b {params[-1]:.3f}, loss {loss:.5f}")
    ok = same and found and converged and g.size == RANKS and events == expected
    if not ok:
        log(g, f"FAILED: identical {same}, true model {found}, converged {converged}, "
               f"{g.size} ranks, events {events} (expected {expected})")
    return 0 if ok else 1


def rank_main() -> int:
    """A rank gangrun started: GANG_RANK and GANG_SIZE say which."""
    g = gang.create(timeout=10)
    if g.size != RANKS:
        log(g, f"wants {RANKS} ranks (gangrun --nproc-per-node {RANKS})")
        return 2
    victim = g.rank == VICTIM
    events = {"shrinks": 0, "grows": 0}
    params = np.zeros(TRUE_W.size + 1)
    g, params, loss = train(g, params, 0, victim, events)
    rc = check(g, params, loss, events, {"shrinks": 1, "grows": 1})
    g.close()
    return rc


def join_main() -> int:
    """A replacement gangrun started (GANG_JOIN=1): it joins the running
    gang and takes the parameters and the step from rank 0."""
    replaces = os.environ.get("GANG_REPLACES", "?")
    g = gang.join(timeout=60)
    params = np.zeros(TRUE_W.size + 1)
    g.broadcast(params, 0)
    step = np.zeros(1)
    g.broadcast(step, 0)
    log(g, f"joined at step {int(step[0])} in place of rank {replaces}")
    events = {"shrinks": 0, "grows": 0}
    g, params, loss = train(g, params, int(step[0]), False, events)
    rc = check(g, params, loss, events, {"shrinks": 0, "grows": 0})
    g.close()
    return rc


if __name__ == "__main__":
    if os.environ.get("GANG_JOIN") == "1":
        sys.exit(join_main())
    if "GANG_RANK" in os.environ:
        sys.exit(rank_main())
    print("train_elastic.py runs under gangrun, which starts its ranks and the "
          "replacement:\n  gangrun --replace-failed 1 --nproc-per-node 4 -- "
          f"{sys.executable} {sys.argv[0]}", file=sys.stderr)
    sys.exit(2)
