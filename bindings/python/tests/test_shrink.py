"""Gang.shrink: the survivors of a SIGKILLed rank go on in a new gang, and
train on: parameters stay identical on every survivor."""

import os
import signal
import time

import numpy as np
import pytest

import gang
from multirank import run_ranks

TIMEOUT = 10.0


def _survive():
    g = gang.create(timeout=TIMEOUT)
    w = np.zeros(8, dtype=np.float64)
    x = np.ones(16, dtype=np.float32)
    g.all_reduce(x)  # everyone is connected
    victim = g.size - 1
    if g.rank == victim:
        time.sleep(0.5)  # the others are in the all-reduce
        os.kill(os.getpid(), signal.SIGKILL)
    with pytest.raises(gang.GangError):
        g.all_reduce(x)
    start = time.monotonic()
    small = g.shrink()
    took = time.monotonic() - start
    name, size, rank = g.name, g.size, g.rank
    g.close()
    assert small.size == size - 1 and small.rank == rank, (small.size, small.rank)
    assert small.name == f"{name}/shrink1", small.name
    assert small.ranks == [r for r in range(size) if r != victim], small.ranks
    # Training goes on: a few averaged steps, the same on every survivor.
    for step in range(5):
        grad = np.full(8, float(small.rank + step), dtype=np.float64)
        small.all_reduce(grad, gang.ReduceOperation.MEAN)
        w -= 0.1 * grad
    everyone = small.all_gather_object(w.tolist())
    assert all(v == everyone[0] for v in everyone), everyone
    small.close()
    return took


def test_shrink_after_a_lost_rank():
    results = run_ranks(4, _survive, check=False)
    assert results[3].returncode == -signal.SIGKILL
    for r in results[:3]:
        assert r.returncode == 0, r.output
        print(f"rank {r.rank}: new gang {r.value * 1000:.0f} ms after the shrink began")


def _shrink_then_grow():
    """Ranks 0-3 train; rank 3 dies; 0-2 shrink and go on; rank 4 (a
    replacement) joins; the gang is 4 again, with identical parameters."""
    me = int(os.environ["GANG_RANK"])
    url = os.environ["GANG_INIT_METHOD"]
    if me == 4:
        time.sleep(1.5)  # the replacement starts after the loss
        g = gang.join(init_method=url, timeout=4 * TIMEOUT)
        assert (g.rank, g.size) == (3, 4), (g.rank, g.size)
        w = g.broadcast(np.zeros(8), 0)  # the parameters, from rank 0
    else:
        g = gang.create(rank=me, size=4, init_method=url, timeout=TIMEOUT)
        w = np.zeros(8)
        g.all_reduce(np.ones(4))
        if me == 3:
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGKILL)
        with pytest.raises(gang.GangError):
            g.all_reduce(np.ones(1 << 16))
        small = g.shrink()
        g.close()
        w += small.all_reduce(np.full(8, float(small.rank))) / small.size
        start = time.monotonic()
        grown = None
        while grown is None:
            assert time.monotonic() - start < 4 * TIMEOUT, "the replacement never joined"
            small.barrier()  # a training step
            grown = small.grow()
            time.sleep(0.05)
        small.close()
        g = grown
        g.broadcast(w, 0)
    # One more averaged step on 4 ranks; everyone ends with the same w.
    grad = np.full(8, float(g.rank + 1))
    g.all_reduce(grad, gang.ReduceOperation.MEAN)
    w -= 0.1 * grad
    everyone = g.all_gather_object(w.tolist())
    assert all(v == everyone[0] for v in everyone), everyone
    size = g.size
    g.close()
    return size


def test_shrink_then_grow_back():
    results = run_ranks(5, _shrink_then_grow, check=False)
    assert results[3].returncode == -signal.SIGKILL
    for r in results[:3] + results[4:]:
        assert r.returncode == 0, r.output
        assert r.value == 4
