"""torch tensors in every collective, through DLPack and without copies:
every gang dtype with torch's names (bfloat16, bool and int16 included),
parameters that require grad, results in the caller's type. Runs with
whatever torch the interpreter has (Debian's python3-torch in CI) and skips,
saying so, without one."""

import numpy as np
import pytest

import gang
from gang import ReduceOperation as Op
from multirank import run_ranks

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]


def test_dtype_names_and_views():
    from gang._buffers import view

    for dt in DTYPES:
        t = torch.zeros(3, dtype=dt)
        v, got, n = view(t, writable=True)
        assert n == 3 and got.name.lower() == str(dt)[len("torch."):], (dt, got)
        assert int(v) == t.data_ptr(), "a view, not a copy"
        assert gang.DType[got.name] is gang._buffers.as_dtype(dt)
    # a parameter needs no .detach(); a slice shares its storage
    p = torch.nn.Parameter(torch.ones(4))
    assert int(view(p, writable=True)[0]) == p.data_ptr()
    base = torch.arange(8.0)
    assert int(view(base[4:])[0]) == base.data_ptr() + 16


class _DLPackOnly:
    """A producer known to gang only through DLPack (as JAX or CuPy arrays
    are), here lending a torch tensor's memory."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_dlpack_producers():
    from gang._buffers import view

    for dt in [torch.float32, torch.bfloat16, torch.int16, torch.uint8, torch.float64]:
        t = torch.arange(6, dtype=dt).reshape(2, 3)
        v, got, n = view(_DLPackOnly(t), writable=True)
        assert (int(v), n, v.shape) == (t.data_ptr(), 6, (2, 3))
        assert got is gang._buffers.as_dtype(dt)
    t = torch.ones(3, dtype=torch.bfloat16)
    with gang.FakeGang(rank=0, size=4) as g:
        g.all_reduce(_DLPackOnly(t))
    assert t.tolist() == [4.0, 4.0, 4.0]
    with pytest.raises(gang.GangInvalidArgumentError, match="contiguous"):
        view(_DLPackOnly(torch.zeros(3, 3).t()))


def test_rejections_say_the_fix():
    from gang._buffers import view

    with pytest.raises(gang.GangInvalidArgumentError, match=r"contiguous\(\)"):
        view(torch.zeros(4, 4).t())
    with pytest.raises(gang.GangTypeError, match="needs device memory"):
        view(torch.zeros(2), device=True)  # a CPU tensor for a CUDA gang
    with pytest.raises(TypeError):  # a GangTypeError is a TypeError
        view(torch.zeros(2, dtype=torch.complex64))


META_HOLDS_NO_DATA = "meta tensor .*holds no data"


def test_meta_tensors_are_refused():
    # A meta tensor has a shape and a dtype but no memory (its data_ptr is
    # 0): every collective says so as a TypeError, before any traffic.
    m = torch.empty(4, 2, device="meta")
    real = torch.zeros(4, 2)
    with gang.FakeGang(rank=0, size=2) as g:
        calls = {
            "all_reduce": lambda: g.all_reduce(m),
            "reduce": lambda: g.reduce(m, dst=0),
            "broadcast": lambda: g.broadcast(m),
            "all_gather out": lambda: g.all_gather(torch.empty(8, 2, device="meta"), real),
            "all_gather x": lambda: g.all_gather(torch.zeros(8, 2), m),
            "all_gather_to_list": lambda: g.all_gather_to_list([m, m], real),
            "all_gatherv": lambda: g.all_gatherv(m),
            "gather": lambda: g.gather(m),
            "scatter": lambda: g.scatter(m, src=0),
            "reduce_scatter": lambda: g.reduce_scatter(m),
            "reduce_scatterv": lambda: g.reduce_scatterv(m, [1, 3]),
            "all_to_all": lambda: g.all_to_all(real, m),
            "all_to_allv": lambda: g.all_to_allv(m, [2, 2], [2, 2]),
            "send": lambda: g.send(m, dst=1),
            "recv": lambda: g.recv(m, src=1),
            "all_sum": lambda: gang.all_sum(g, torch.empty((), device="meta")),
        }
        for name, call in calls.items():
            with pytest.raises(gang.GangTypeError, match=META_HOLDS_NO_DATA):
                call()
        g.all_reduce(real)  # still usable
    # an empty meta tensor is refused too, though it has nothing to send
    with gang.FakeGang(rank=0, size=2) as g:
        with pytest.raises(TypeError, match=META_HOLDS_NO_DATA):
            g.all_reduce(torch.empty(0, device="meta"))


def _meta_in_tensor_dict():
    with gang.create() as g:
        if g.rank == 0:
            with pytest.raises(gang.GangTypeError, match=META_HOLDS_NO_DATA):
                g.broadcast_tensor_dict({"w": torch.empty(3, device="meta")}, src=0)
            g.broadcast_tensor_dict({"w": torch.arange(3.0), "n": 1}, src=0)
        else:
            # Nothing of the refused dict was sent: the next one arrives.
            got = g.broadcast_tensor_dict(None, src=0)
            assert got["w"].tolist() == [0.0, 1.0, 2.0] and got["n"] == 1


def test_meta_tensor_in_broadcast_tensor_dict():
    run_ranks(2, _meta_in_tensor_dict)


def test_fake_gang_in_place_and_caller_types():
    with gang.FakeGang(rank=1, size=3) as g:
        x = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
        assert g.all_reduce(x) is x
        assert x.tolist() == [3.0, 6.0]
        b = torch.tensor([True, False])
        g.all_reduce(b, Op.MAX)
        assert b.dtype == torch.bool and b.tolist() == [True, False]
        out = torch.empty(3, 2, dtype=torch.int16)
        g.all_gather(out, torch.tensor([-7, 9], dtype=torch.int16))
        assert out.tolist() == [[-7, 9]] * 3
        parts = [torch.zeros(2) for _ in range(3)]
        assert g.all_gather_to_list(parts, torch.tensor([0.5, 1.5])) is parts
        assert all(p.tolist() == [0.5, 1.5] for p in parts)
        gathered = g.gather(torch.ones(2, 2), dst=1)
        assert isinstance(gathered, torch.Tensor) and gathered.shape == (3, 2, 2)
        assert gang.all_sum(g, torch.tensor(2.0)).item() == 6.0


def _ranks_body():
    with gang.create() as g:
        r, n = g.rank, g.size
        total = n * (n + 1) // 2
        # every dtype, in place, the tensor itself returned
        for dt in DTYPES:
            if dt == torch.bool:
                x = torch.tensor([r == 0, True, False])
                assert g.all_reduce(x, Op.SUM) is x
                assert x.tolist() == [True, True, False], x
                x = torch.tensor([r == 0, True, False])
                g.all_reduce(x, Op.MIN)
                assert x.tolist() == [False, True, False], x
                continue
            x = torch.full((2, 3), r + 1, dtype=dt)
            g.all_reduce(x)
            assert (x == total).all(), (dt, x)
        # a parameter that requires grad, as torch.distributed takes it
        p = torch.nn.Parameter(torch.full((4,), float(r)))
        p.grad = torch.full((4,), float(r + 1))
        g.all_reduce(p.grad, "mean")
        g.broadcast(p, source_rank=1)
        assert p.requires_grad and (p.detach() == 1.0).all() and (p.grad == (n + 1) / 2).all()
        # gathers come back as tensors of the caller's shape and dtype
        rows = torch.full((n, 2), r, dtype=torch.bfloat16)
        out = g.all_gatherv(rows[: r + 1])  # r + 1 rows from rank r
        assert out[:, 0].tolist() == [float(p) for p in range(n) for _ in range(p + 1)]
        x = torch.full((2, 2), r, dtype=torch.bfloat16)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
        assert out.shape == (n * (n + 1) // 2, 2)
        parts = [torch.empty(2, 2, dtype=torch.bfloat16) for _ in range(n)]
        g.all_gather_to_list(parts, x)
        assert [int(t[0, 0]) for t in parts] == list(range(n))
        chunk = g.reduce_scatter(torch.ones(n * 2, 3, dtype=torch.int16))
        assert chunk.shape == (2, 3) and (chunk == n).all()
        # vLLM's broadcast_tensor_dict: tensors travel raw, any dtype
        d = {"h": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "mask": torch.tensor(
            [True, False]), "step": 7} if r == 0 else None
        got = g.broadcast_tensor_dict(d, src=0)
        assert got["h"].dtype == torch.bfloat16 and got["h"].shape == (2, 3)
        assert got["h"].flatten().tolist() == list(range(6)) and got["mask"].tolist() == [
            True, False] and got["step"] == 7
        # numpy and torch side by side, fairseq2's helpers
        assert gang.all_sum(g, torch.tensor(float(r))).item() == n * (n - 1) / 2
        a = np.full(2, r, dtype=np.int16)
        g.all_reduce(a, Op.MAX)
        assert (a == n - 1).all()
        assert gang.broadcast_flag(g, r == 1, source_rank=1) is True


def test_tensors_on_three_ranks():
    run_ranks(3, _ranks_body)


def test_torch_stays_optional(tmp_path):
    """The package imports and works where torch cannot be imported."""
    import subprocess
    import sys

    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    code = ("import gang, numpy as np\n"
            "x = np.ones(2, np.float32)\n"
            "with gang.FakeGang(size=2) as g: g.all_reduce(x)\n"
            "assert (x == 2).all()\n"
            "print(gang.get_default_device())\n")
    env = dict(__import__("os").environ)
    env["PYTHONPATH"] = f"{tmp_path}:{env.get('PYTHONPATH', '')}"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpu"
