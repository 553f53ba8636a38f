"""The layout after a lost rank: layout_after_loss against cases worked out
by hand, and split_after_loss on survivors of a SIGKILLed rank."""

import os
import signal
import time

import numpy as np
import pytest

import gang
from multirank import run_ranks

TIMEOUT = 10.0


def test_layout_after_loss_by_hand():
    # gang.h's example: 8 ranks, tp=2, rank 3 lost.
    after = gang.layout_after_loss(8, [0, 1, 2, 4, 5, 6, 7], tp=2)
    assert after == gang.LayoutAfterLoss(tp=2, pp=1, cp=1, dp=3, ep=1, sdp=None, order=None,
                                         active=[0, 1, 4, 5, 6, 7], spares=[2])
    assert after.degrees == dict(tp=2, pp=1, cp=1, ep=1, dp=3, sdp=None, order=None)
    # The new layout of the active ranks: new rank i was old rank active[i].
    assert [after.active[r] for r in gang.layout(6, "dp", 1, **after.degrees)] == [1, 5, 7]

    # Megatron's order, 12 ranks tp=2 pp=2 dp=3 (rank = tp + 2*dp + 6*pp),
    # rank 3 lost: replica {2,3,8,9} is broken; survivors in any order.
    survivors = [r for r in reversed(range(12)) if r != 3]
    after = gang.layout_after_loss(12, survivors, tp=2, pp=2, order="tp-cp-dp-pp")
    assert (after.dp, after.active, after.spares) == (2, [0, 1, 4, 5, 6, 7, 10, 11], [2, 8, 9])
    assert after.order == "tp-cp-dp-pp"
    # The default order puts replicas in blocks: [0..3] is the broken one.
    after = gang.layout_after_loss(12, survivors, tp=2, pp=2)
    assert (after.dp, after.active, after.spares) == (2, list(range(4, 12)), [0, 1, 2])

    # An explicit sdp (and ep) must still divide dp*cp: more replicas go.
    after = gang.layout_after_loss(8, [r for r in range(8) if r != 5], sdp=2)
    assert (after.dp, after.sdp, after.active, after.spares) == (6, 2, [0, 1, 2, 3, 4, 6], [7])
    after = gang.layout_after_loss(8, [r for r in range(8) if r != 2], ep=4, dp=-1, sdp=-1)
    assert (after.dp, after.sdp, after.active, after.spares) == (4, None, [0, 1, 3, 4], [5, 6, 7])

    # Nothing lost: the same layout.
    after = gang.layout_after_loss(4, range(4), tp=2)
    assert (after.dp, after.active, after.spares) == (2, [0, 1, 2, 3], [])


def test_layout_after_loss_refuses():
    with pytest.raises(gang.GangInvalidArgumentError, match="no data-parallel replica"):
        gang.layout_after_loss(4, [0, 3], tp=2)
    with pytest.raises(gang.GangInvalidArgumentError, match="survivors.*twice"):
        gang.layout_after_loss(4, [0, 1, 1])
    with pytest.raises(gang.GangInvalidArgumentError, match="survivors.*out of range"):
        gang.layout_after_loss(4, [4])
    with pytest.raises(gang.GangInvalidArgumentError, match="must divide"):
        gang.layout_after_loss(6, [0], tp=4)


def _split_after_loss():
    g = gang.create(timeout=TIMEOUT)
    x = np.ones(16, dtype=np.float32)
    g.all_reduce(x)  # everyone is connected
    if g.rank == 3:
        time.sleep(0.5)  # the others are in the all-reduce
        os.kill(os.getpid(), signal.SIGKILL)
    with pytest.raises(gang.GangError):
        g.all_reduce(x)
    small = g.shrink()
    # 4 ranks, tp=2: replicas [0,1] [2,3]; rank 3 lost leaves [0,1], 2 spare.
    gangs = gang.split_after_loss(g, small, tp=2)
    rank = g.rank
    g.close()
    if rank == 2:
        assert gangs is None
    else:
        with gangs:
            assert gangs.root.ranks == [0, 1] and gangs.root.rank == rank
            assert gangs.tp is gangs.root and gangs.dp.size == 1
            assert gangs._config["dp"] == 1
            y = gangs.tp.all_reduce(np.array([rank + 1], dtype=np.int64))
            assert y[0] == 3, y
        assert gangs.root.closed and gangs.tp.closed
    small.barrier()  # the spare is still in the shrunk gang
    small.close()
    return rank


def test_split_after_loss():
    results = run_ranks(4, _split_after_loss, check=False)
    assert results[3].returncode == -signal.SIGKILL
    for r in results[:3]:
        assert r.returncode == 0, r.output
