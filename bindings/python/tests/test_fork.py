"""fork() never breaks the parent: a multiprocessing worker started with the
"fork" method (as DataLoader workers are) inherits the parent's gang, and
every call it makes with it fails at once with ValueError saying the gang
belongs to the parent process; closing it there only forgets it. The
parent's gang goes on, on gloo and on shm."""

import multiprocessing
import time

import numpy as np
import pytest

import gang
from multirank import run_ranks


def _in_worker(g, queue):
    """Runs in the forked worker: reports what each use of g did."""
    out = {}
    t0 = time.monotonic()
    try:
        g.all_reduce(np.ones(4, dtype=np.float32))
        out["all_reduce"] = "returned"
    except ValueError as e:
        out["all_reduce"] = str(e)
    try:
        g.barrier()
        out["barrier"] = "returned"
    except ValueError as e:
        out["barrier"] = str(e)
    g.close()  # forgets the handle here; the parent's gang is untouched
    out["seconds"] = time.monotonic() - t0
    queue.put(out)


def _fork_workers(backend):
    ctx = multiprocessing.get_context("fork")
    with gang.create(backend=backend, timeout=10) as g:
        x = np.ones(8, dtype=np.float32)
        g.all_reduce(x)
        assert x[0] == g.size
        for _ in range(2):
            queue = ctx.Queue()
            worker = ctx.Process(target=_in_worker, args=(g, queue))
            worker.start()
            out = queue.get(timeout=30)
            worker.join(30)
            assert worker.exitcode == 0, worker.exitcode
            for call in ("all_reduce", "barrier"):
                assert "belongs to process" in out[call], out
            assert out["seconds"] < 1.0, out
        # The parent's gang is untouched.
        y = np.full(8, 2.0, dtype=np.float32)
        g.all_reduce(y)
        assert (y == 2.0 * g.size).all(), y
        g.barrier()


@pytest.mark.parametrize("backend", ["gloo", "shm"])
def test_forked_worker_leaves_the_parents_gang_alone(backend):
    run_ranks(2, _fork_workers, backend, timeout=90)
