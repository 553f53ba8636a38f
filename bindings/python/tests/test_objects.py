"""Python objects (pickled through the byte collectives), dicts of arrays,
and the fairseq / fairseq2 helpers."""

import numpy as np
import pytest

import gang
from multirank import run_ranks


def _objects():
    with gang.create() as g:
        r, n = g.rank, g.size
        # fairseq2: broadcast_objects replaces the list's contents in place.
        source = 1 % n
        objs = [{"step": 7, "name": "cfg"}, (1, 2.5)] if r == source else [None]
        g.broadcast_objects(objs, source_rank=source)
        assert objs == [{"step": 7, "name": "cfg"}, (1, 2.5)]
        # vLLM: broadcast_object, all_gather_object, send/recv_object
        assert g.broadcast_object({"lr": 0.1} if r == 0 else None) == {"lr": 0.1}
        assert g.broadcast_object(b"x" * 100_000 if r == n - 1 else None, src=n - 1) == b"x" * 100_000
        assert g.all_gather_object(("rank", r, [r] * r)) == [("rank", p, [p] * p) for p in range(n)]
        if n > 1:
            if r == 0:
                g.send_object({"to": 1}, dst=1, tag=3)
            elif r == 1:
                assert g.recv_object(src=0, tag=3) == {"to": 1}
        # broadcast_tensor_dict: arrays of any dtype travel as raw buffers.
        if r == 0:
            d = {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                 "mask": np.array([True, False]),
                 "i16": np.array([-3, 4], dtype=np.int16),
                 "empty": np.zeros((0, 4)),
                 "step": 12, "tag": "train"}
        else:
            d = None
        got = g.broadcast_tensor_dict(d, src=0)
        assert list(got) == ["w", "mask", "i16", "empty", "step", "tag"]
        np.testing.assert_array_equal(got["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
        assert got["w"].dtype == np.float32 and got["mask"].dtype == np.bool_
        np.testing.assert_array_equal(got["i16"], [-3, 4])
        assert got["empty"].shape == (0, 4) and got["step"] == 12 and got["tag"] == "train"
        # fairseq2 helpers
        assert g.broadcast_flag(r == n - 1, source_rank=n - 1) is True
        assert gang.broadcast_flag(g, r == 0, source_rank=source) is (n == 1)
        assert g.all_sum(r + 0.5) == sum(p + 0.5 for p in range(n))
        assert gang.all_sum(g, 1) == n
        # fairseq helpers
        summed = gang.all_reduce_dict({"loss": float(r), "n": 1, "v": np.full(2, r)}, g)
        assert summed["loss"] == sum(range(n)) and summed["n"] == n
        np.testing.assert_array_equal(summed["v"], [sum(range(n))] * 2)
        assert gang.all_gather_list({"r": r}, g) == [{"r": p} for p in range(n)]
        with pytest.raises(ValueError, match="max_size"):
            gang.all_gather_list("x" * 100, g, max_size=10)
        g.barrier()


@pytest.mark.parametrize("size", [1, 3])
def test_objects(size):
    run_ranks(size, _objects)


def test_objects_on_a_fake_gang():
    with gang.FakeGang(rank=2, size=3) as g:
        assert g.all_gather_object("x") == ["x", "x", "x"]
        assert g.broadcast_object(5, src=2) == 5
        assert g.all_sum(2.0) == 6.0
