#!/usr/bin/env python3
"""One rank of a test of gang's torch.distributed backend (gang.torch).

Usage: python backend_worker.py CASE   (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in the environment, as torchrun sets them)

Every case checks what it gets and exits non-zero, saying why, when it is
wrong; test_torch_backend.py launches the ranks and reads the exit codes.
Expected values are computed on each rank from every rank's input (each
rank can make any rank's input), or by the same program on gloo in the
same processes, never hard-coded.
"""
import datetime
import functools
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as dist_c10d

import gang.torch  # noqa: F401  registers "gang"

RANK = int(os.environ["RANK"])
SIZE = int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=60)


def fail(what):
    print(f"FAIL rank {RANK}: {what}", flush=True)
    sys.stdout.flush()
    os._exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def same(got, want, what, tol=0.0):
    if got.dtype != want.dtype or got.shape != want.shape:
        fail(f"{what}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
    if tol and (got.is_floating_point() or got.is_complex()):
        ok = torch.allclose(got.double() if not got.is_complex() else got,
                            want.double() if not want.is_complex() else want,
                            rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        fail(f"{what}: got {got.flatten()[:8].tolist()}..., want {want.flatten()[:8].tolist()}...")


# ---- inputs every rank can make for every rank -----------------------------

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


def make(r, dtype, n=5, shape=None):
    """Rank r's input: small values (1..3), so sums and products of up to 4
    ranks are exact in every dtype."""
    base = (torch.arange(n, dtype=torch.int64) * (r + 1) + r) % 3 + 1
    if dtype == torch.bool:
        t = (base % 2) == 0
    elif dtype.is_complex:
        t = torch.complex(base.double(), (base + r).double()).to(dtype)
    else:
        t = base.to(dtype)
    return t.reshape(shape) if shape is not None else t


def reduce_all(inputs, op):
    """The c10d reduction op of the list of tensors, in their dtype."""
    dtype = inputs[0].dtype
    if op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        fn = {dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
              dist.ReduceOp.BXOR: torch.bitwise_xor}[op]
        return functools.reduce(fn, inputs)
    wide = torch.stack([t.to(torch.complex128 if dtype.is_complex else torch.float64)
                        for t in inputs])
    if op == dist.ReduceOp.SUM:
        out = wide.sum(0)
    elif op == dist.ReduceOp.AVG:
        out = wide.mean(0)
    elif op == dist.ReduceOp.PRODUCT:
        out = wide.prod(0)
    elif op == dist.ReduceOp.MIN:
        out = wide.min(0).values
    elif op == dist.ReduceOp.MAX:
        out = wide.max(0).values
    else:
        raise AssertionError(op)
    if dtype == torch.bool:
        return out != 0
    return out.to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return [dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.BAND,
                dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
    if dtype.is_complex:
        return [dist.ReduceOp.SUM, dist.ReduceOp.AVG]
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype.is_floating_point:
        ops.append(dist.ReduceOp.AVG)
    else:
        ops += [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
    return ops


def tol(dtype):
    return {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-6)


def done(work, async_op):
    """Waits for an async op's work (checking it is a Work), else nothing."""
    if async_op:
        check(work is not None, "async_op=True returned no Work")
        check(work.wait(), "Work.wait() returned False")
        fut = work.get_future()
        check(fut.done(), "the future of a waited Work is not done")
    else:
        check(work is None, "a blocking call returned a Work")


# ---- case: every entry point ---------------------------------------------------

def check_sparse():
    """all_reduce of sparse COO tensors sums them (as gloo does): each rank
    has an entry of its own and one every rank shares, with dense rows (a
    sparse embedding's gradient); then rank 0 with no entries at all."""
    idx = torch.tensor([[RANK, SIZE + 1]], dtype=torch.long)
    for dtype in (torch.float32, torch.float64, torch.int64):
        val = torch.stack([torch.full((3,), RANK + 1, dtype=dtype),
                           torch.full((3,), 2, dtype=dtype)])
        t = torch.sparse_coo_tensor(idx, val, (SIZE + 2, 3))
        dist.all_reduce(t)
        want = torch.zeros(SIZE + 2, 3, dtype=dtype)
        for r in range(SIZE):
            want[r] += r + 1
            want[SIZE + 1] += 2
        check(t.is_sparse, "all_reduce of a sparse tensor left it dense")
        same(t.to_dense(), want, f"sparse all_reduce {dtype}")
    if RANK == 0:
        t = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, 2), (SIZE, 2))
    else:
        t = torch.sparse_coo_tensor([[RANK]], torch.ones(1, 2), (SIZE, 2))
    dist.all_reduce(t)
    want = torch.ones(SIZE, 2)
    want[0] = 0
    same(t.to_dense(), want, "sparse all_reduce with no entries on rank 0")
    _raises(lambda: dist.all_reduce(torch.sparse_coo_tensor(idx, torch.ones(2, 3), (SIZE + 2, 3)),
                                    op=dist.ReduceOp.MAX),
            RuntimeError, "sums only", "sparse all_reduce with MAX")


def case_ops():
    dist.init_process_group("gang", timeout=TIMEOUT)
    check(dist.get_backend() == "gang", f"backend {dist.get_backend()}")
    pg_backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    check(pg_backend.getBackendName() == "gang" if hasattr(pg_backend, "getBackendName")
          else True, "getBackendName")
    dtypes = FLOATS + INTS + [torch.bool, torch.complex64]
    for async_op in (False, True):
        for dtype in dtypes:
            for op in ops_for(dtype):
                for n in (5, 3000):
                    t = make(RANK, dtype, n)
                    done(dist.all_reduce(t, op=op, async_op=async_op), async_op)
                    want = reduce_all([make(r, dtype, n) for r in range(SIZE)], op)
                    same(t, want, f"all_reduce {op} {dtype} n={n} async={async_op}", tol(dtype))
                root = SIZE - 1
                t = make(RANK, dtype)
                done(dist.reduce(t, root, op=op, async_op=async_op), async_op)
                if RANK == root:
                    same(t, reduce_all([make(r, dtype) for r in range(SIZE)], op),
                         f"reduce {op} {dtype}", tol(dtype))
            check_movement(dtype, async_op)
            check_reduce_scatter(dtype, async_op)
        check_premul(async_op)
        check_uneven(async_op)
    check_coalesced()
    check_sparse()
    check_p2p()
    check_objects()
    check_noncontiguous()
    check_errors()
    dist.barrier()
    t0 = time.monotonic()
    dist.barrier()
    check(time.monotonic() - t0 < 5, "a barrier took over 5 s")
    dist.destroy_process_group()
    print(f"ops: rank {RANK}/{SIZE}: ok", flush=True)


def check_movement(dtype, async_op):
    what = f"{dtype} async={async_op}"
    root = SIZE // 2
    t = make(RANK, dtype, shape=(5, 1))
    done(dist.broadcast(t, root, async_op=async_op), async_op)
    same(t, make(root, dtype, shape=(5, 1)), f"broadcast {what}")

    outs = [torch.zeros(5, dtype=dtype) for _ in range(SIZE)]
    done(dist.all_gather(outs, make(RANK, dtype), async_op=async_op), async_op)
    for r in range(SIZE):
        same(outs[r], make(r, dtype), f"all_gather[{r}] {what}")

    out = torch.zeros(SIZE * 5, dtype=dtype)
    done(dist.all_gather_into_tensor(out, make(RANK, dtype), async_op=async_op), async_op)
    same(out, torch.cat([make(r, dtype) for r in range(SIZE)]), f"all_gather_into_tensor {what}")

    outs = [torch.zeros(5, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
    done(dist.gather(make(RANK, dtype), outs, dst=root, async_op=async_op), async_op)
    if RANK == root:
        for r in range(SIZE):
            same(outs[r], make(r, dtype), f"gather[{r}] {what}")

    out = torch.zeros(5, dtype=dtype)
    ins = [make(r + 10, dtype) for r in range(SIZE)] if RANK == root else None
    done(dist.scatter(out, ins, src=root, async_op=async_op), async_op)
    same(out, make(RANK + 10, dtype), f"scatter {what}")

    # all_to_all_single: rank r sends chunk p (2 rows) to p.
    inp = torch.cat([make(RANK * 10 + p, dtype, 2) for p in range(SIZE)])
    out = torch.zeros(2 * SIZE, dtype=dtype)
    done(dist.all_to_all_single(out, inp, async_op=async_op), async_op)
    same(out, torch.cat([make(p * 10 + RANK, dtype, 2) for p in range(SIZE)]),
         f"all_to_all_single {what}")

    # with split sizes: rank r sends p+1 rows of 3 to rank p.
    def rows(src, dst):
        return make(src * 10 + dst, dtype, 3 * (dst + 1), shape=(dst + 1, 3))
    inp = torch.cat([rows(RANK, p) for p in range(SIZE)])
    out = torch.zeros((SIZE * (RANK + 1), 3), dtype=dtype)
    done(dist.all_to_all_single(out, inp, [RANK + 1] * SIZE, [p + 1 for p in range(SIZE)],
                                async_op=async_op), async_op)
    want = torch.cat([make(p * 10 + RANK, dtype, 3 * (RANK + 1), shape=(RANK + 1, 3))
                      for p in range(SIZE)])
    same(out, want, f"all_to_all_single with splits {what}")

    # alltoall with lists of different sizes.
    ins = [make(RANK * 10 + p, dtype, p + 1) for p in range(SIZE)]
    outs = [torch.zeros(RANK + 1, dtype=dtype) for _ in range(SIZE)]
    done(dist.all_to_all(outs, ins, async_op=async_op), async_op)
    for p in range(SIZE):
        same(outs[p], make(p * 10 + RANK, dtype, RANK + 1), f"all_to_all[{p}] {what}")


def check_reduce_scatter(dtype, async_op):
    for op in ops_for(dtype):
        what = f"{op} {dtype} async={async_op}"
        inp = make(RANK, dtype, 4 * SIZE)
        out = torch.zeros(4, dtype=dtype)
        done(dist.reduce_scatter_tensor(out, inp, op=op, async_op=async_op), async_op)
        want = reduce_all([make(r, dtype, 4 * SIZE) for r in range(SIZE)], op)
        same(out, want[RANK * 4:(RANK + 1) * 4], f"reduce_scatter_tensor {what}", tol(dtype))
        same(inp, make(RANK, dtype, 4 * SIZE), f"reduce_scatter_tensor left its input {what}")

        ins = list(make(RANK, dtype, 4 * SIZE).chunk(SIZE))
        out = torch.zeros(4, dtype=dtype)
        done(dist.reduce_scatter(out, ins, op=op, async_op=async_op), async_op)
        same(out, want[RANK * 4:(RANK + 1) * 4], f"reduce_scatter {what}", tol(dtype))


def check_premul(async_op):
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = make(RANK, dtype)
        op = dist._make_nccl_premul_sum(0.5)
        done(dist.all_reduce(t, op=op, async_op=async_op), async_op)
        want = reduce_all([make(r, dtype) for r in range(SIZE)], dist.ReduceOp.SUM) * 0.5
        same(t, want.to(dtype), f"all_reduce PREMUL_SUM(0.5) {dtype}", tol(dtype))
        inp = make(RANK, dtype, 2 * SIZE)
        out = torch.zeros(2, dtype=dtype)
        done(dist.reduce_scatter_tensor(out, inp, op=dist._make_nccl_premul_sum(2.0),
                                        async_op=async_op), async_op)
        want = reduce_all([make(r, dtype, 2 * SIZE) for r in range(SIZE)], dist.ReduceOp.SUM) * 2
        same(out, want[RANK * 2:(RANK + 1) * 2].to(dtype), f"reduce_scatter PREMUL_SUM {dtype}",
             tol(dtype))


def check_uneven(async_op):
    """all_gather and reduce_scatter with a different size per rank."""
    outs = [torch.zeros(r + 1) for r in range(SIZE)]
    done(dist.all_gather(outs, make(RANK, torch.float32, RANK + 1), async_op=async_op), async_op)
    for r in range(SIZE):
        same(outs[r], make(r, torch.float32, r + 1), f"uneven all_gather[{r}]")
    ins = [make(RANK * 10 + p, torch.float32, p + 1) for p in range(SIZE)]
    out = torch.zeros(RANK + 1)
    done(dist.reduce_scatter(out, ins, async_op=async_op), async_op)
    want = reduce_all([make(r * 10 + RANK, torch.float32, RANK + 1) for r in range(SIZE)],
                      dist.ReduceOp.SUM)
    same(out, want, "uneven reduce_scatter")


def check_coalesced():
    ts = [make(RANK, torch.float32, 3), make(RANK, torch.float32, 2, shape=(2, 1)),
          make(RANK, torch.float32, 7)]
    dist.all_reduce_coalesced(ts)
    for i, (dtype, n) in enumerate([(torch.float32, 3), (torch.float32, 2), (torch.float32, 7)]):
        ts[i] = ts[i].reshape(-1)
        same(ts[i], reduce_all([make(r, dtype, n) for r in range(SIZE)], dist.ReduceOp.SUM),
             f"all_reduce_coalesced[{i}]")
    ins = [make(RANK, torch.float32, 2), make(RANK, torch.float32, 3)]
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(SIZE)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(SIZE):
        same(outs[r][0], make(r, torch.float32, 2), f"all_gather_coalesced[{r}][0]")
        same(outs[r][1], make(r, torch.float32, 3), f"all_gather_coalesced[{r}][1]")
    for async_ops in (False, True):
        outs = [torch.zeros(SIZE * 3), torch.zeros(SIZE * 2, dtype=torch.int64)]
        with dist._coalescing_manager(async_ops=async_ops) as cm:
            dist.all_gather_into_tensor(outs[0], make(RANK, torch.float32, 3))
            dist.all_gather_into_tensor(outs[1], make(RANK, torch.int64, 2))
        if async_ops:
            cm.wait()
        same(outs[0], torch.cat([make(r, torch.float32, 3) for r in range(SIZE)]),
             "all_gather_into_tensor coalesced [0]")
        same(outs[1], torch.cat([make(r, torch.int64, 2) for r in range(SIZE)]),
             "all_gather_into_tensor coalesced [1]")
        outs = [torch.zeros(2), torch.zeros(3)]
        ins = [make(RANK, torch.float32, 2 * SIZE), make(RANK, torch.float32, 3 * SIZE)]
        with dist._coalescing_manager(async_ops=async_ops) as cm:
            dist.reduce_scatter_tensor(outs[0], ins[0])
            dist.reduce_scatter_tensor(outs[1], ins[1])
        if async_ops:
            cm.wait()
        for i, n in enumerate((2, 3)):
            want = reduce_all([make(r, torch.float32, n * SIZE) for r in range(SIZE)],
                              dist.ReduceOp.SUM)
            same(outs[i], want[RANK * n:(RANK + 1) * n], f"reduce_scatter_tensor coalesced [{i}]")


def check_p2p():
    if SIZE < 2:
        return
    nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    # Blocking, ordered so that it cannot deadlock.
    got = torch.zeros(4)
    if RANK % 2 == 0:
        dist.send(make(RANK, torch.float32, 4), nxt, tag=3)
        dist.recv(got, prv, tag=3)
    else:
        dist.recv(got, prv, tag=3)
        dist.send(make(RANK, torch.float32, 4), nxt, tag=3)
    same(got, make(prv, torch.float32, 4), "send/recv")
    # Both directions at once, large, with tags told apart.
    big = 1 << 20
    a, b = torch.zeros(big), torch.zeros(8)
    reqs = [dist.isend(make(RANK, torch.float32, big), nxt, tag=1),
            dist.isend(make(RANK + 5, torch.float32, 8), nxt, tag=2),
            dist.irecv(b, prv, tag=2), dist.irecv(a, prv, tag=1)]
    for w in reqs:
        w.wait()
    same(a, make(prv, torch.float32, big), "isend/irecv tag 1")
    same(b, make(prv + 5, torch.float32, 8), "isend/irecv tag 2")
    ops = [dist.P2POp(dist.isend, make(RANK, torch.int64, 6), nxt),
           dist.P2POp(dist.irecv, got6 := torch.zeros(6, dtype=torch.int64), prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(got6, make(prv, torch.int64, 6), "batch_isend_irecv")
    # Other calls coalesced (c10d's manager, as FSDP and pipeline schedules
    # use it): issued together at the end, the manager's work the group's.
    x, y = make(RANK, torch.float32, 7), make(RANK, torch.int32, 3)
    with dist_c10d._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        dist.broadcast(x, src=0)
        dist.broadcast(y, src=SIZE - 1)
        dist.send(make(RANK + 20, torch.float32, 2), nxt)
        dist.irecv(got2 := torch.zeros(2), prv)
    cm.wait()
    same(x, make(0, torch.float32, 7), "a coalesced broadcast from 0")
    same(y, make(SIZE - 1, torch.int32, 3), "a coalesced broadcast from the last rank")
    same(got2, make(prv + 20, torch.float32, 2), "a coalesced send and receive")
    # Receives from any source (dist.recv without src returns the sender),
    # blocking and with irecv: every other rank sends rank 0 two messages.
    if RANK == 0:
        seen = {}
        for i in range(2 * (SIZE - 1)):
            t = torch.zeros(5)
            if i % 2 == 0:
                src = dist.recv(t, tag=11)
            else:
                w = dist.irecv(t, tag=11)
                w.wait()
                src = w._source_rank()
            check(0 < src < SIZE, f"recv from any source: sender {src}")
            k = seen.get(src, 0)
            same(t, make(src + 10 * k, torch.float32, 5), f"message {k} of rank {src}")
            seen[src] = k + 1
        check(seen == {r: 2 for r in range(1, SIZE)}, f"senders {seen}")
    else:
        for k in range(2):
            dist.send(make(RANK + 10 * k, torch.float32, 5), 0, tag=11)
    dist.barrier()


def check_objects():
    objs = [{"rank": RANK}] if RANK == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    check(objs == [{"rank": 0}], f"broadcast_object_list {objs}")
    gathered = [None] * SIZE
    dist.all_gather_object(gathered, ("r", RANK))
    check(gathered == [("r", r) for r in range(SIZE)], f"all_gather_object {gathered}")


def check_noncontiguous():
    t = make(RANK, torch.float32, 12, shape=(3, 4)).t()
    check(not t.is_contiguous(), "the test's tensor is contiguous")
    dist.all_reduce(t)
    want = reduce_all([make(r, torch.float32, 12, shape=(3, 4)).t() for r in range(SIZE)],
                      dist.ReduceOp.SUM)
    same(t, want, "all_reduce of a transposed tensor")
    t = make(RANK, torch.float32, 12, shape=(3, 4)).t()
    dist.broadcast(t, 0)
    same(t, make(0, torch.float32, 12, shape=(3, 4)).t(), "broadcast of a transposed tensor")


def check_errors():
    """Bad arguments raise RuntimeError, as gloo's do (not ValueError)."""
    for dtype, op in ((torch.int32, dist.ReduceOp.AVG), (torch.float32, dist.ReduceOp.BAND)):
        try:
            dist.all_reduce(make(RANK, dtype), op=op)
            fail(f"{op} of {dtype} was accepted")
        except RuntimeError as e:
            check(type(e) is RuntimeError, f"{op} of {dtype}: {type(e).__name__}, not RuntimeError")
            check(str(op).split(".")[-1] in str(e), f"{op} of {dtype}: {e}")


# ---- case: init methods ---------------------------------------------------------

class LateStore(dist.Store):
    """A store whose wait for gang's keys, when one is missing, raises as a
    wait that ran out does, but only once the keys are there: the moment
    just after a short wait gave up, made certain."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.gave_up = 0

    def set(self, key, value):
        self.inner.set(key, value)

    def get(self, key):
        return self.inner.get(key)

    def add(self, key, value):
        return self.inner.add(key, value)

    def check(self, keys):
        return self.inner.check(keys)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()

    def wait(self, keys, timeout=None):
        if self.inner.check(keys) or not any("gang/" in k for k in keys):
            self.inner.wait(keys) if timeout is None else self.inner.wait(keys, timeout)
            return
        self.inner.wait(keys)
        self.gave_up += 1
        raise dist.DistStoreError("wait timeout (the keys came a moment later)")


def case_init():
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    tmp = os.environ["GANG_TEST_TMP"]

    def once(how, **kw):
        dist.init_process_group(**kw)
        t = make(RANK, torch.float32)
        dist.all_reduce(t)
        same(t, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
             f"all_reduce after init by {how}")
        g = dist.new_group(list(range(SIZE))[::-1] if SIZE > 1 else [0], backend="gang")
        t = make(RANK, torch.float32)
        dist.all_reduce(t, group=g)
        same(t, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
             f"all_reduce on new_group after init by {how}")
        dist.destroy_process_group()
        print(f"init: {how}: rank {RANK}: ok", flush=True)

    once("env://", backend="gang", timeout=TIMEOUT)
    once("tcp://", backend="gang", init_method=f"tcp://{addr}:{port + 1}", rank=RANK,
         world_size=SIZE, timeout=TIMEOUT)
    once("file://", backend="gang", init_method=f"file://{tmp}/rendezvous", rank=RANK,
         world_size=SIZE, timeout=TIMEOUT)
    store = dist.TCPStore(addr, port + 2, SIZE, RANK == 0, timeout=TIMEOUT)
    once("store=", backend="gang", store=dist.PrefixStore("job", store), rank=RANK,
         world_size=SIZE, timeout=TIMEOUT)
    # A store whose waits for gang's keys give up just as the key comes (a
    # short wait that ran out a moment early): the wait is done, not failed.
    late = LateStore(store)
    once("store= whose waits give up as the key comes", backend="gang",
         store=dist.PrefixStore("late", late), rank=RANK, world_size=SIZE, timeout=TIMEOUT)
    check(late.gave_up > 0, "no wait of gang's gave up, so none was tested")
    # The timeout reaches gang.
    dist.init_process_group("gang", timeout=datetime.timedelta(seconds=7))
    check(abs(gang.torch.gang_of().timeout - 7.0) < 1e-6,
          f"gang's timeout {gang.torch.gang_of().timeout} s, init_process_group's 7 s")
    # A subgroup that leaves ranks out; the others get NON_GROUP_MEMBER.
    if SIZE > 2:
        members = [r for r in range(SIZE) if r % 2 == 0]
        g = dist.new_group(members)
        if RANK in members:
            t = make(RANK, torch.float32)
            dist.all_reduce(t, group=g)
            same(t, reduce_all([make(r, torch.float32) for r in members], dist.ReduceOp.SUM),
                 "all_reduce on the even ranks' group")
        else:
            check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member got a group")
    dist.destroy_process_group()
    if torch.__version__ < (2, 15):  # earlier c10d binds accelerators only
        print(f"init: rank {RANK}: ok (no CPU device_id on torch {torch.__version__})",
              flush=True)
        return
    # Bound to a device: c10d splits the default group's backend (gang's
    # split, no new rendezvous).
    dist.init_process_group("gang", timeout=TIMEOUT, device_id=torch.device("cpu", 0))
    if SIZE > 1:
        g = dist.new_group([0, 1])
        if RANK < 2:
            t = make(RANK, torch.float32)
            dist.all_reduce(t, group=g)
            same(t, reduce_all([make(r, torch.float32) for r in (0, 1)], dist.ReduceOp.SUM),
                 "all_reduce on a split group")
            child = gang.torch.gang_of(g)
            check("split" in child.name, f"the group's gang {child.name!r} is not a split")
    dist.destroy_process_group()
    print(f"init: split: rank {RANK}: ok", flush=True)


# ---- case: a mixed backend string ----------------------------------------------

def case_mixed():
    dist.init_process_group("cpu:gang,cuda:gloo", timeout=TIMEOUT)
    t = make(RANK, torch.float32)
    dist.all_reduce(t)
    same(t, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce on cpu:gang")
    check(gang.torch.gang_of().size == SIZE, "the CPU backend is not gang")
    dist.destroy_process_group()
    print(f"mixed: rank {RANK}: ok", flush=True)



# ---- case: DDP on gang against DDP on gloo -------------------------------------

def _model(seed, unused=False):
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)]
    model = torch.nn.Sequential(*layers)
    if unused:
        model.extra = torch.nn.Linear(4, 4)  # never used in forward
    return model


def _batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def _train(ddp, steps, no_sync=False):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(steps):
        opt.zero_grad()
        if no_sync:
            with ddp.no_sync():
                x, y = _batch(step + 100, RANK)
                torch.nn.functional.mse_loss(ddp(x), y).backward()
        x, y = _batch(step, RANK)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in ddp.module.parameters()]


def case_ddp():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gang", timeout=TIMEOUT)
    gloo = dist.new_group(backend="gloo")
    configs = {
        "plain": {},
        "find_unused_parameters": {"find_unused_parameters": True, "unused": True},
        "no_sync": {"no_sync": True},
        "fp16_compress_hook": {"hook": default_hooks.fp16_compress_hook},
        "static_graph": {"static_graph": True},
        "small buckets": {"bucket_cap_mb": 0.001},
    }
    for name, cfg in configs.items():
        results = []
        for group in (gloo, None):
            kw = {k: v for k, v in cfg.items() if k in ("find_unused_parameters",
                                                        "static_graph", "bucket_cap_mb")}
            ddp = DDP(_model(7, cfg.get("unused", False)), process_group=group, **kw)
            if "hook" in cfg:
                ddp.register_comm_hook(group if group is not None else
                                       dist.group.WORLD, cfg["hook"])
            results.append(_train(ddp, 6, cfg.get("no_sync", False)))
        for a, b in zip(*results):
            same(b, a, f"DDP {name}: a parameter on gang vs gloo", 1e-4)
        start = _model(7, cfg.get("unused", False))
        moved = any(not torch.equal(p, q) for p, q in zip(results[1], start.parameters()))
        check(moved, f"DDP {name}: training did not change the parameters")
        print(f"ddp: {name}: rank {RANK}: same as gloo", flush=True)
    dist.destroy_process_group()


# ---- case: FSDP2 on gang against one process ------------------------------------

def case_fsdp():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gang", timeout=TIMEOUT)
    mesh = init_device_mesh("cpu", (SIZE,))
    model = _model(3)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    ref = _model(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(4):
        opt.zero_grad()
        ref_opt.zero_grad()
        x, y = _batch(step, RANK)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        # The reference sees every rank's batch; FSDP averages the ranks' gradients.
        loss = sum(torch.nn.functional.mse_loss(ref(bx), by)
                   for bx, by in (_batch(step, r) for r in range(SIZE))) / SIZE
        loss.backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        same(p.full_tensor().detach(), q.detach(), f"FSDP parameter {name}", 1e-5)
    dist.destroy_process_group()
    print(f"fsdp: rank {RANK}: matches one process", flush=True)


# ---- case: DeviceMesh ------------------------------------------------------------

def case_mesh():
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gang", timeout=TIMEOUT)
    mesh = init_device_mesh("cpu", (2, SIZE // 2), mesh_dim_names=("dp", "tp"))
    layout = torch.arange(SIZE).reshape(2, SIZE // 2)
    row, col = (layout == RANK).nonzero()[0].tolist()
    for dim, members in (("dp", layout[:, col].tolist()), ("tp", layout[row, :].tolist())):
        group = mesh[dim].get_group()
        got = dist.get_process_group_ranks(group)
        check(got == members, f"mesh {dim}: ranks {got}, want {members}")
        t = make(RANK, torch.float32)
        dist.all_reduce(t, group=group)
        same(t, reduce_all([make(r, torch.float32) for r in members], dist.ReduceOp.SUM),
             f"all_reduce over mesh[{dim!r}]")
        out = torch.zeros(len(members) * 5)
        dist.all_gather_into_tensor(out, make(RANK, torch.float32), group=group)
        same(out, torch.cat([make(r, torch.float32) for r in members]),
             f"all_gather over mesh[{dim!r}]")
    dist.destroy_process_group()
    print(f"mesh: rank {RANK}: ok", flush=True)


# ---- case: a lost peer ------------------------------------------------------------

def case_failure():
    dist.init_process_group("gang", timeout=TIMEOUT)
    t = make(RANK, torch.float32, 1000)
    dist.all_reduce(t)
    victim = SIZE - 1
    if RANK == victim:
        # Killed mid-collective: a large all-reduce is under way.
        dist.all_reduce(make(RANK, torch.float32, 1 << 22), async_op=True)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    for async_op in (False, True):
        try:
            w = dist.all_reduce(make(RANK, torch.float32, 1 << 22 if not async_op else 10),
                                async_op=async_op)
            if async_op:
                w.wait()
            fail(f"an all-reduce with rank {victim} dead completed (async={async_op})")
        except dist.DistBackendError as e:
            took = time.monotonic() - start
            check(took < 30, f"the lost peer was reported after {took:.1f} s")
            check(str(victim) in str(e), f"the error does not name rank {victim}: {e}")
            print(f"failure: rank {RANK}: DistBackendError after {took:.1f} s: "
                  f"{str(e)[:160]}", flush=True)
    os._exit(0)  # the group cannot be shut down in order any more


# ---- case: ranks calling different collectives -----------------------------------

def case_mismatch():
    dist.init_process_group("gang", timeout=TIMEOUT)
    try:
        if RANK == 0:
            dist.all_reduce(make(RANK, torch.float32))
        else:
            dist.broadcast(make(RANK, torch.float32), 0)
        fail("mismatched collectives completed")
    except dist.DistBackendError as e:
        check("mismatch" in str(e).lower(), f"not gang's mismatch error: {e}")
        print(f"mismatch: rank {RANK}: {str(e)[:200]}", flush=True)
    os._exit(0)


# ---- case: fairseq2-style code on a default group that is gang --------------------

def case_fairseq2():
    from fairseq2.device import Device
    from fairseq2.gang import FakeGang, ProcessGroupGang, ReduceOperation, create_parallel_gangs
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gang", timeout=TIMEOUT)
    world = dist.group.WORLD
    root = ProcessGroupGang.from_process_group(world, Device("cpu"))
    check(root.rank == RANK and root.size == SIZE, f"root {root.rank}/{root.size}")
    check(root.device.type == "cpu", f"root.device {root.device!r}")
    check(root.supports_process_group, "root.supports_process_group is False")
    check(root.as_process_group() is world, "root.as_process_group() is not the default group")
    gangs = create_parallel_gangs(root, tp_size=2)
    dp_members = [r for r in range(SIZE) if r % 2 == RANK % 2]
    check(gangs.dp.size == len(dp_members) and gangs.rdp.size == gangs.dp.size
          and gangs.sdp.size == 1, f"dp/rdp/sdp sizes {gangs.dp.size}/{gangs.rdp.size}/"
                                   f"{gangs.sdp.size}")
    # Averaging over rdp averages over every data-parallel rank.
    t = make(RANK, torch.float32)
    gangs.rdp.all_reduce(t, ReduceOperation.MEAN)
    same(t, reduce_all([make(r, torch.float32) for r in dp_members], dist.ReduceOp.AVG),
         "MEAN over gangs.rdp", 1e-6)
    # The dp gang as a torch process group: collectives, bookkeeping, DDP.
    pg = gangs.dp.as_process_group()
    check(gangs.dp.as_process_group() is pg, "as_process_group() made a second group")
    check(dist.get_world_size(pg) == len(dp_members), "get_world_size(dp group)")
    check(dist.get_rank(pg) == dp_members.index(RANK), "get_rank(dp group)")
    t = make(RANK, torch.float32)
    dist.all_reduce(t, group=pg)
    same(t, reduce_all([make(r, torch.float32) for r in dp_members], dist.ReduceOp.SUM),
         "dist.all_reduce on gangs.dp.as_process_group()")
    gloo_dp = dist.new_group(backend="gloo")  # every rank creates every group
    gloo_groups = [dist.new_group(m, backend="gloo") for m in ([0, 2], [1, 3])]
    results = []
    for group in (gloo_groups[RANK % 2], pg):
        ddp = DDP(_model(11), process_group=group)
        results.append(_train(ddp, 3))
    for a, b in zip(*results):
        same(b, a, "DDP on gangs.dp.as_process_group() vs gloo", 1e-4)
    # A gang of a group on another backend, met through that group's store.
    other = ProcessGroupGang.from_process_group(gloo_dp)
    t = make(RANK, torch.float32)
    other.all_reduce(t)
    same(t, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce on the gang of a gloo group")
    check(other.as_process_group() is gloo_dp, "the gloo group's gang forgot its group")
    other.close()
    fake = FakeGang(Device("cpu"), rank=0, size=1)
    check(not fake.supports_process_group, "FakeGang supports a process group")
    gangs.close()
    dist.destroy_process_group()
    print(f"fairseq2: rank {RANK}: ok", flush=True)


# ---- case: Ctrl-C -------------------------------------------------------------

def case_interrupt():
    """Rank 0, blocked in an all-reduce rank 1 joins 3 s late, gets Ctrl-C
    at 0.5 s: KeyboardInterrupt at once, as in gang's own API (the gang is
    aborted; rank 1 then sees DistBackendError)."""
    import threading

    dist.init_process_group("gang", timeout=TIMEOUT)
    dist.barrier()
    if RANK == 0:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        try:
            dist.all_reduce(make(RANK, torch.float32))
            fail("the all-reduce completed")
        except KeyboardInterrupt:
            took = time.monotonic() - start
            check(took < 2.5, f"KeyboardInterrupt after {took:.1f} s")
            print(f"interrupt: rank 0: KeyboardInterrupt after {took:.2f} s", flush=True)
    else:
        time.sleep(3)
        try:
            dist.all_reduce(make(RANK, torch.float32))
            fail("the all-reduce with an aborted peer completed")
        except dist.DistBackendError as e:
            print(f"interrupt: rank 1: {str(e)[:160]}", flush=True)
    os._exit(0)


# ---- case: what c10d's callers expect of a backend --------------------------

def _monitored_barrier(group, timeout, wait_all_ranks=False):
    """dist.monitored_barrier where torch lets a backend other than gloo
    run it (2.15 asks only for a CPU backend), else the group's own."""
    if torch.__version__ >= (2, 15):
        dist.monitored_barrier(group, timeout=timeout, wait_all_ranks=wait_all_ranks)
    else:
        group.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def _raises(fn, kind, pattern, what):
    """fn() raises `kind` whose message matches `pattern` (a regex)."""
    import re
    try:
        fn()
    except kind as e:
        check(re.search(pattern, str(e)) is not None, f"{what}: {str(e)[:300]!r} does not "
                                                      f"match {pattern!r}")
        return e
    except Exception as e:  # noqa: BLE001 - the wrong type is the failure
        fail(f"{what}: {type(e).__name__} ({str(e)[:200]}), not {kind.__name__}")
    fail(f"{what}: nothing raised")


def case_c10d():
    """On 3 ranks: the group's name, polling a Work, monitored barriers that
    name the ranks that did not come, a barrier's timeout in the words
    PyTorch's own tests match."""
    dist.init_process_group("gang", timeout=TIMEOUT)
    world = dist.group.WORLD
    check(world.name() == "gang", f"ProcessGroup.name() is {world.name()!r}")
    # A Work polled until done: is_completed() turns True, result() is the
    # output, exception() None.
    t = make(RANK, torch.float32, 1 << 16)
    work = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 30
    while not work.is_completed():
        check(time.monotonic() < deadline, "is_completed() stayed False for 30 s")
        time.sleep(0.001)
    check(work.is_success(), "is_success() is False")
    if torch.__version__ >= (2, 15):  # 2.8's binding cannot return it for any backend
        check(work.exception() is None, f"exception() is {work.exception()!r}")
    check(len(work.result()) == 1 and work.result()[0] is t or
          torch.equal(work.result()[0], t), "result() is not the output")
    same(t, reduce_all([make(r, torch.float32, 1 << 16) for r in range(SIZE)],
                       dist.ReduceOp.SUM), "the polled all_reduce")
    # Monitored barriers, each on a fresh group (one that failed keeps the
    # unanswered messages of the ranks that did not come).
    timeout = datetime.timedelta(seconds=2)
    _monitored_barrier(dist.new_group(), timeout)
    _monitored_barrier(dist.new_group(), timeout, wait_all_ranks=True)
    for missing, wait_all in (([1], False), ([1, 2], True)):
        group = dist.new_group()
        if RANK == 0:
            ranks = ", ".join(str(r) for r in missing)
            word = "Rank" if len(missing) == 1 else "Ranks"
            start = time.monotonic()
            _raises(lambda: _monitored_barrier(group, timeout, wait_all), RuntimeError,
                    f"{word} {ranks} failed to pass monitoredBarrier",
                    f"monitored_barrier with {missing} missing")
            took = time.monotonic() - start
            check(took < 5, f"the monitored barrier failed after {took:.1f} s")
        elif RANK not in missing:
            _raises(lambda: _monitored_barrier(group, timeout, wait_all), RuntimeError,
                    f"Rank {RANK} successfully reached monitoredBarrier, but received "
                    f"errors while waiting for send/recv from rank 0",
                    "monitored_barrier on a rank that came")
        dist.barrier()
    # A timeout of 0 is taken as given, as gloo takes it: rank 0 gives up at
    # once in gloo's words (PyTorch's test_monitored_barrier_gloo_rank_0_timeout).
    group = dist.new_group()
    if RANK == 0:
        start = time.monotonic()
        _raises(lambda: _monitored_barrier(group, datetime.timedelta(seconds=0)), RuntimeError,
                "Rank 0 timed out in monitoredBarrier", "monitored_barrier with a timeout of 0")
        check(time.monotonic() - start < 1, "a monitored barrier with a timeout of 0 waited")
    dist.barrier()
    # A barrier only rank 0 enters times out at the group's timeout, saying
    # so in the words PyTorch's test_barrier_timeout_* match.
    group = dist.new_group(timeout=datetime.timedelta(seconds=1))
    if RANK == 0:
        start = time.monotonic()
        e = _raises(lambda: dist.barrier(group), dist.DistBackendError,
                    " (Timed out|closed|timeout) ", "a barrier nobody else entered")
        took = time.monotonic() - start
        check(0.9 < took < 5, f"the barrier timed out after {took:.2f} s, not ~1 s")
        print(f"c10d: rank 0: barrier timeout: {str(e)[:160]}", flush=True)
    dist.barrier()
    print(f"c10d: rank {RANK}: ok", flush=True)
    os._exit(0)  # the timed-out group cannot be shut down in order


# ---- case: DDP's PowerSGD hook, whose callbacks issue collectives -------------------

def case_powersgd():
    """PowerSGD's comm hook all-reduces inside the callbacks of the bucket's
    future (then() chains that wait on collectives): training goes on and
    ends where the same hook on gloo ends."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gang", timeout=TIMEOUT)
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (gloo, dist.group.WORLD):
        ddp = DDP(_model(7), process_group=group, bucket_cap_mb=0.001)
        state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                       start_powerSGD_iter=2, use_error_feedback=True,
                                       warm_start=True, random_seed=3)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        start = time.monotonic()
        results.append(_train(ddp, 6))
        took = time.monotonic() - start
        check(took < 60, f"6 PowerSGD steps took {took:.1f} s")
    for got, want in zip(results[1], results[0]):
        same(got, want, "PowerSGD on gang vs gloo", 1e-5)
    dist.destroy_process_group()
    print(f"powersgd: rank {RANK}: ok", flush=True)


# ---- case: TORCH_DISTRIBUTED_DEBUG=DETAIL -----------------------------------------

def case_detail():
    """With TORCH_DISTRIBUTED_DEBUG=DETAIL c10d wraps the backend to check
    every collective against the other ranks' (it asks the backend's
    name): collectives, object collectives on a subgroup, and a mismatch
    reported by the wrapper."""
    check(os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL", "not run in DETAIL mode")
    dist.init_process_group("gang", timeout=TIMEOUT)
    check(dist.get_debug_level() == dist.DebugLevel.DETAIL, "debug level is not DETAIL")
    t = make(RANK, torch.float32)
    dist.all_reduce(t)
    same(t, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce in DETAIL mode")
    sub = dist.new_group(list(range(SIZE)))
    gathered = [None] * SIZE
    dist.all_gather_object(gathered, {"rank": RANK}, group=sub)
    check(gathered == [{"rank": r} for r in range(SIZE)], f"all_gather_object {gathered}")
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    dist.barrier()
    dist.destroy_process_group()
    print(f"detail: rank {RANK}: ok", flush=True)


# ---- case: DDP until Ctrl-C (run under torchrun by test_torch_backend.py) ------------

def case_ddp_until_interrupted():
    """Trains until interrupted; says how it ended. A rank whose peer was
    interrupted first may see that peer leave (an operation fails) before
    its own Ctrl-C is handled, as on gloo: its KeyboardInterrupt follows."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group(os.environ.get("GANG_TEST_BACKEND", "gang"), timeout=TIMEOUT)
    ddp = DDP(_model(3), bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    step = 0
    first = ""
    try:
        try:
            while True:
                opt.zero_grad()
                x, y = _batch(step, RANK)
                torch.nn.functional.mse_loss(ddp(x), y).backward()
                opt.step()
                step += 1
                if step == 3:  # one write: the ranks share torchrun's output
                    os.write(1, f"ddp_until_interrupted: rank {RANK}: training\n".encode())
        except Exception as e:  # noqa: BLE001 - the KeyboardInterrupt must follow
            first = f" after {type(e).__name__}"
            # In short naps: a Ctrl-C that came while this rank was in C++
            # (its peer's loss failed the call first) is pending, and Python
            # raises it after a call returns, not in the middle of one sleep.
            for _ in range(200):
                time.sleep(0.05)
            print(f"ddp_until_interrupted: rank {RANK}: no KeyboardInterrupt after "
                  f"{type(e).__name__} at step {step}: {str(e)[:200]}", flush=True)
            raise
    except KeyboardInterrupt:
        print(f"ddp_until_interrupted: rank {RANK}: KeyboardInterrupt at step {step}{first}",
              flush=True)


# ---- case: a lost rank, then training on with the survivors ---------------------

def case_shrink():
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gang", timeout=datetime.timedelta(seconds=20))
    victim = SIZE - 1
    ddp = DDP(_model(5))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    step = 0
    try:
        for step in range(10):
            if step == 2 and RANK == victim:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == 2:
                time.sleep(0.3)  # the victim is gone
            opt.zero_grad()
            x, y = _batch(step, RANK)
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        fail("training went on with a rank dead")
    except (dist.DistBackendError, RuntimeError) as e:
        check(step == 2, f"the failure surfaced at step {step}")
        print(f"shrink: rank {RANK}: step {step} failed: {str(e)[:120]}", flush=True)
    start = time.monotonic()
    pg = gang.torch.shrink()
    took = time.monotonic() - start
    check(pg.size() == SIZE - 1 and pg.rank() == RANK, f"group {pg.rank()}/{pg.size()}")
    check(dist.get_world_size(pg) == SIZE - 1, "get_world_size of the survivors' group")
    model = ddp.module
    ddp = DDP(model, process_group=pg)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    before = [p.detach().clone() for p in model.parameters()]
    for step in range(3, 6):
        opt.zero_grad()
        x, y = _batch(step, RANK)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [None] * (SIZE - 1)
    dist.all_gather_object(everyone, mine, group=pg)
    for r, theirs in enumerate(everyone):
        same(theirs, mine, f"survivor {r}'s parameters after shrinking")
    check(any(not torch.equal(a, b) for a, b in zip(before, model.parameters())),
          "training on the survivors' group changed nothing")
    print(f"shrink: rank {RANK}: the survivors' group after {took:.2f} s; trained on", flush=True)
    os._exit(0)


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
