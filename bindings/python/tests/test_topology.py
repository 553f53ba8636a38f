"""Sub-gangs: split, create_gang, split_parallel and its fairseq2 forms,
the pure layout, and the launch environment."""

import numpy as np
import pytest

import gang
from multirank import run_ranks


def test_layout_is_pure():
    # gang.h's example: 8 ranks, tp = pp = dp = 2.
    assert gang.layout(8, "tp", 5, tp=2, pp=2) == [4, 5]
    assert gang.layout(8, "pp", 5, tp=2, pp=2) == [5, 7]
    assert gang.layout(8, gang.Axis.DP, 5, tp=2, pp=2) == [1, 5]
    assert gang.layout(8, "dp", 5, tp=2, pp=2, order="tp-cp-dp-pp") == [5, 7]
    assert gang.layout(4, "root", 3) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="must divide"):
        gang.layout(8, "tp", 0, tp=3)
    with pytest.raises(ValueError, match="axis"):
        gang.layout(8, "xy", 0)


def test_split_parallel_on_a_fake_gang():
    with gang.FakeGang(rank=5, size=8) as root:
        with gang.split_parallel(root, tp=2, pp=2) as gangs:
            assert (gangs.tp.size, gangs.pp.size, gangs.dp.size) == (2, 2, 2)
            assert (gangs.tp.rank, gangs.pp.rank, gangs.dp.rank) == (1, 0, 1)
            assert gangs.root is root and gangs.cp.size == 1
            assert gangs.tp.ranks == [4, 5]
        assert gangs.tp.closed and not root.closed  # closed with its Gangs
        with pytest.raises(ValueError, match="must divide"):
            gang.split_parallel(root, tp=3)


def _split_parallel():
    with gang.create() as root:
        r = root.rank
        with gang.split_parallel(root, tp=2) as gangs:
            assert gangs.tp.ranks == gang.layout(4, "tp", r, tp=2)
            assert gangs.dp.ranks == gang.layout(4, "dp", r, tp=2)
            assert gangs.tp.ranks == [r & ~1, r | 1] and gangs.dp.ranks == [r % 2, r % 2 + 2]
            # identical axes share one Gang; full-size axes are root itself
            assert gangs.dpcp is gangs.dp and gangs.mp is gangs.tp and gangs.sdp is gangs.dp
            assert gangs.pp.size == 1 and gangs.cp.size == 1
            x = np.array([r], dtype=np.int64)
            gangs.tp.all_reduce(x)
            assert x[0] == sum(gangs.tp.ranks)
            x = np.array([r], dtype=np.int64)
            gangs.dp.all_reduce(x)
            assert x[0] == sum(gangs.dp.ranks)
            assert "tp=2" in repr(gangs)

        with gang.split_parallel(root, sdp=2) as gangs:  # 2 shards x 2 replicas
            assert gangs.sdp.ranks == [r & ~1, r | 1] and gangs.rdp.ranks == [r % 2, r % 2 + 2]

        # MPI-style split: evens and odds, reversed by key; -1 joins none.
        half = root.split(r % 2, key=-r)
        assert half.size == 2 and half.ranks == sorted([r % 2, r % 2 + 2], reverse=True)
        x = np.ones(1)
        half.all_reduce(x)
        half.close()
        none = root.split(None if r == 0 else 1)
        assert (none is None) == (r == 0)
        if none is not None:
            assert none.size == 3
            none.close()

        # fairseq2's spellings: replicated over dp, then sharded over it
        gangs = gang.create_parallel_gangs(root, tensor_parallel_size=2)
        assert gangs.tp.size == 2 and gangs.dp.size == 2
        assert gangs.rdp is gangs.dp and gangs.sdp.size == 1
        fsdp = gang.create_fsdp_gangs(gangs)  # shard over the whole dp gang
        assert fsdp.sdp.size == 2 and fsdp.rdp.size == 1
        root.barrier()
        # their Gangs own root, as fairseq2's do: closing one closes it
        gangs.close()
        assert root.closed
        fsdp.close()


def test_split_parallel():
    run_ranks(4, _split_parallel)


def test_detect_env(monkeypatch):
    for name in ("GANG_RANK", "GANG_SIZE", "RANK", "WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GANG_RANK", "2")
    monkeypatch.setenv("GANG_SIZE", "4")
    monkeypatch.setenv("GANG_LOCAL_RANK", "0")
    monkeypatch.setenv("GANG_LOCAL_SIZE", "2")
    env = gang.detect_env()
    assert env["source"] == "gang"
    assert (env["rank"], env["size"], env["local_rank"], env["local_size"]) == (2, 4, 0, 2)
    monkeypatch.setenv("GANG_RANK", "9")
    with pytest.raises(ValueError, match="GANG_RANK"):
        gang.detect_env()
