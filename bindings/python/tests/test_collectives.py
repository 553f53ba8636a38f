"""Every collective on 1 to 4 real ranks, blocking and asynchronous."""

import array

import numpy as np
import pytest

import gang
from gang import ReduceOperation as Op
from multirank import run_ranks


def _collectives(size):
    with gang.create(timeout=60) as g:
        r, n = g.rank, g.size
        assert (r, n) == (g.rank, size) and str(g.device) == "cpu" and g.backend == "shm"
        everyone = np.arange(n)

        # all_reduce, every op, in place; returns its argument.
        x = np.full(3, r + 1, dtype=np.float32)
        assert g.all_reduce(x) is x
        np.testing.assert_array_equal(x, np.full(3, n * (n + 1) / 2))
        for op, want in [(Op.MAX, n), (Op.MIN, 1), (Op.PRODUCT, np.prod(everyone + 1)),
                         (Op.MEAN, (n + 1) / 2), (Op.AVG, (n + 1) / 2)]:
            x = np.full(2, r + 1, dtype=np.float64)
            g.all_reduce(x, op)
            np.testing.assert_allclose(x, want)

        # reduce: the result at dst; other ranks' buffers are left alone.
        x = np.full(4, r + 1, dtype=np.int64)
        g.reduce(x, Op.SUM, dst=n - 1)
        np.testing.assert_array_equal(x, n * (n + 1) // 2 if r == n - 1 else r + 1)

        # broadcast
        x = np.arange(5, dtype=np.int32) * (r + 1)
        g.broadcast(x, source_rank=n - 1)
        np.testing.assert_array_equal(x, np.arange(5) * n)

        # all_gather into a 2-D out, and to a list; in place.
        out = np.empty((n, 2), dtype=np.uint8)
        g.all_gather(out, np.array([r, 2 * r], dtype=np.uint8))
        np.testing.assert_array_equal(out, np.stack([everyone, 2 * everyone], axis=1))
        parts = g.all_gather_to_list(np.full((2, 2), r, dtype=np.float32))
        assert len(parts) == n and all(p.shape == (2, 2) for p in parts)
        assert [int(p[0, 0]) for p in parts] == list(range(n))
        inplace = np.zeros((n, 3), dtype=np.float64)
        inplace[r] = r
        g.all_gather(inplace, inplace[r])
        np.testing.assert_array_equal(inplace[:, 0], everyone)

        # all_gatherv: rank p contributes p+1 rows; sizes given or learned.
        mine = np.full((r + 1, 2), r, dtype=np.int64)
        sizes = [p + 1 for p in range(n)]
        for got in (g.all_gatherv(mine, sizes), g.all_gatherv(mine)):
            assert got.shape == (sum(sizes), 2)
            np.testing.assert_array_equal(got[:, 0], np.repeat(everyone, sizes))

        # gather / scatter
        got = g.gather(np.array([r, r], dtype=np.float32), dst=0)
        if r == 0:
            np.testing.assert_array_equal(got, np.repeat(everyone, 2).reshape(n, 2))
        else:
            assert got is None
        chunk = np.empty(3, dtype=np.int32)
        source = np.arange(3 * n, dtype=np.int32) if r == n - 1 else None
        g.scatter(chunk, source, src=n - 1)
        np.testing.assert_array_equal(chunk, np.arange(3 * r, 3 * r + 3))

        # reduce_scatter: rank r gets the sum of every rank's row block r.
        x = np.tile(np.arange(n, dtype=np.float32)[:, None], (1, 3)) + r
        got = g.reduce_scatter(x)
        assert got.shape == (1, 3)
        np.testing.assert_array_equal(got, n * r + n * (n - 1) / 2)
        # reduce_scatterv: row counts 1, 2, 3, ...
        sizes = [p + 1 for p in range(n)]
        x = np.ones(sum(sizes), dtype=np.int32) * (r + 1)
        got = g.reduce_scatterv(x, sizes, Op.MAX)
        np.testing.assert_array_equal(got, np.full(r + 1, n))

        # all_to_all: chunk p of rank r is 10*r + p; rank r receives 10*p + r.
        out = np.empty(2 * n, dtype=np.int64)
        g.all_to_all(out, np.repeat(10 * r + everyone, 2))
        np.testing.assert_array_equal(out, np.repeat(10 * everyone + r, 2))
        # all_to_allv: rank r sends p+1 copies of r to rank p.
        send = np.concatenate([np.full(p + 1, r) for p in range(n)]).astype(np.int32)
        got = g.all_to_allv(send, [p + 1 for p in range(n)], [r + 1] * n)
        np.testing.assert_array_equal(got, np.repeat(everyone, r + 1))

        # send/recv around the ring: a group lets every rank send first.
        if n > 1:
            incoming = np.empty(4, dtype=np.float64)
            with g.group():
                g.send(np.full(4, r, dtype=np.float64))
                g.recv(incoming)
            np.testing.assert_array_equal(incoming, (r - 1) % n)
            # default peers: next and previous rank; explicit tags
            if r == 0:
                g.send(np.arange(3, dtype=np.uint32), dst=n - 1, tag=7)
            elif r == n - 1:
                np.testing.assert_array_equal(g.recv(np.empty(3, np.uint32), src=0, tag=7),
                                              np.arange(3))
            # recv_any: every other rank sends rank 0 its rank; rank 0 learns
            # the senders from the messages' arrival, not from a list.
            if r == 0:
                senders = set()
                for _ in range(n - 1):
                    got = np.empty(2, np.int64)
                    src = g.recv_any(got, tag=9)
                    np.testing.assert_array_equal(got, [src, src * 3])
                    senders.add(src)
                assert senders == set(range(1, n))
            else:
                g.send(np.array([r, r * 3], np.int64), dst=0, tag=9)

        # async collectives return a Work; its result is the output.
        x = np.ones(1000, dtype=np.float32)
        work = g.all_reduce(x, async_op=True)
        assert isinstance(work, gang.Work)
        assert work.result() is x and work.is_completed() and work.wait(timeout=0)
        np.testing.assert_array_equal(x, n)
        g.barrier(async_op=True).wait()
        g.barrier()

        # counts of zero are still collectives
        g.all_reduce(np.empty(0, dtype=np.float32))

        # other buffer kinds: bytearray, array.array, memoryview
        b = bytearray([r + 1] * 4)
        g.all_reduce(b)
        assert list(b) == [n * (n + 1) // 2] * 4
        a = array.array("d", [r] * 3)
        g.all_reduce(a, Op.MAX)
        assert list(a) == [n - 1] * 3
        parts = g.all_gather_to_list(array.array("i", [r, r]))
        assert [list(p) for p in parts] == [[p, p] for p in range(n)]
        m = memoryview(np.full(4, r, dtype=np.int64)).cast("B").cast("q")
        g.broadcast(m)
        assert list(m) == [0] * 4


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_collectives(size):
    run_ranks(size, _collectives, size)


def _rank_helpers():
    with gang.create() as g:
        r, n = g.rank, g.size
        assert g.ranks == list(range(n))
        assert (g.first_rank, g.last_rank) == (0, n - 1)
        assert (g.next_rank, g.prev_rank) == ((r + 1) % n, (r - 1) % n)
        assert (g.is_first_rank, g.is_last_rank) == (r == 0, r == n - 1)
        # On a sub-gang the helpers speak root ranks.
        odd = g.create_gang([1, 3])
        if r in (1, 3):
            assert odd.ranks == [1, 3] and odd.rank == [1, 3].index(r)
            assert (odd.first_rank, odd.last_rank, odd.next_rank) == (1, 3, 3 if r == 1 else 1)
            odd.close()
        else:
            assert odd is None
        g.barrier()  # rank 0 serves the store: it stays until the others are done


def test_rank_helpers():
    run_ranks(4, _rank_helpers)


def test_fake_gang():
    with gang.FakeGang(rank=1, size=3) as g:
        assert (g.rank, g.size, g.backend, g.name) == (1, 3, "fake", "root")
        x = np.array([1.0, 2.0])
        assert g.all_reduce(x) is x and list(x) == [3.0, 6.0]
        g.all_reduce(x, Op.MEAN)
        assert list(x) == [3.0, 6.0]
        assert [list(p) for p in g.all_gather_to_list(np.array([7, 8]))] == [[7, 8]] * 3
        chunk = np.empty(2, dtype=np.int32)
        g.scatter(chunk, np.arange(6, dtype=np.int32), src=1)
        assert list(chunk) == [2, 3]
        assert list(g.reduce_scatter(np.arange(6, dtype=np.int64))) == [6, 9]
        work = g.all_reduce(np.ones(3, dtype=np.float32), async_op=True)
        assert work.wait() and list(work.result()) == [3.0, 3.0, 3.0]
        assert repr(g).startswith("<gang.Gang 'root' rank=1 size=3")
        sub = g.create_gang([0, 1])
        assert (sub.rank, sub.size) == (1, 2)
        sub.close()
    assert repr(g) == "<gang.Gang closed>"
