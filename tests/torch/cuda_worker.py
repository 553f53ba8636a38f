#!/usr/bin/env python3
"""One rank of a test of gang's torch.distributed backend on CUDA tensors.

Usage: python cuda_worker.py CASE   (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in the environment)

Runs on a real GPU or on the host double of CUDA and NCCL
(tests/nccl_double: test_torch_backend.py --cuda-double preloads its CUDA
runtime and points gang's NCCL module at its NCCL). The double runs no
kernels, so the cases move data only with copies (CPU to device and back,
device to device) and gang's collectives: inputs are made on the CPU and
copied over, results copied back and compared with what every rank
computes from every rank's input. A case that finds a wrong result or a
wait where none belongs says so and exits 1.

Streams are held the way a program's device work holds them, with a host
function on the stream (libc's usleep, queued by cudaLaunchHostFunc: no
Python runs on the stream's thread), so a test can tell a call that waits
for the device from one that does not.

Cases:
  ops      every collective gang runs on the device, blocking and async,
           on the caller's stream and a side stream, inputs written by
           copies still queued when the call is made
  stream   a blocking call and Work.wait() return while the caller's stream
           is held; is_completed() turns true once the device is done; the
           result is what follows the held work; GANG_TORCH_SYNC=1 waits
  future   get_future() is CUDA-aware: then() callbacks see the result, and
           a callback may issue a collective and wait for it
  graph    a step with collectives captured into a CUDA graph, launched
           three times on new inputs
  ddp      DDP on a model whose steps run no kernel: its buckets' gradients
           all-reduced in stream order through a comm hook
  lazy     without device_id the device's gang is made by the first call
           (which waits for the device, as NCCL's first collective does);
           tensors of two devices in one call are refused
  failure  a rank killed: the others' next calls raise DistBackendError
"""
import ctypes
import ctypes.util
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import gang.torch  # noqa: F401  registers "gang"
from backend_worker import check, fail, reduce_all  # the CPU cases' own
from backend_worker import make as cpu_make
from backend_worker import same as cpu_same

RANK = int(os.environ["RANK"])
SIZE = int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=60)
# How long a host function holds a stream, and how long a call that does not
# wait for it may take at most (a loaded 2-core machine included).
HOLD_S = 1.0
QUICK_S = 0.4


def same(got, want, what):
    """got (on the device) equals want, exactly."""
    cpu_same(got.cpu(), want, what)


def device():
    return torch.device("cuda", RANK % torch.cuda.device_count())


def init(**kwargs):
    torch.cuda.set_device(device())
    dist.init_process_group("gang", timeout=TIMEOUT, **kwargs)


def make(r, dtype, n=6):
    """Rank r's input (backend_worker's, 6 elements by default)."""
    return cpu_make(r, dtype, n)


def on_device(t, stream=None):
    """t copied to the device on the current stream (or `stream`) from
    pinned memory, without waiting: the copy is still queued when the next
    call is made, so a call that does not wait for the stream reads what
    was there before."""
    pinned = t.pin_memory()
    out = torch.empty(t.shape, dtype=t.dtype, device=device())
    with torch.cuda.stream(stream or torch.cuda.current_stream()):
        out.copy_(pinned, non_blocking=True)
    return out


# ---- holding a stream -------------------------------------------------------

def _runtime():
    """The CUDA runtime torch loaded (the double's, where preloaded), with
    the graph calls typed."""
    major = torch.version.cuda.split(".")[0]
    rt = ctypes.CDLL(f"libcudart.so.{major}", mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    p, vp = ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p
    rt.cudaStreamBeginCapture.argtypes = [vp, ctypes.c_int]
    rt.cudaStreamEndCapture.argtypes = [vp, p]
    rt.cudaGraphInstantiate.argtypes = [p, vp, ctypes.c_ulonglong]
    rt.cudaGraphLaunch.argtypes = [vp, vp]
    rt.cudaGraphExecDestroy.argtypes = [vp]
    rt.cudaGraphDestroy.argtypes = [vp]
    return rt


_cudart = None
_usleep = None


def hold(stream, seconds):
    """Queues a host function on `stream` that sleeps `seconds`."""
    global _cudart, _usleep
    if _cudart is None:
        _cudart = _runtime()
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        _usleep = ctypes.cast(libc.usleep, ctypes.c_void_p)
        _cudart.cudaLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.c_void_p]
    err = _cudart.cudaLaunchHostFunc(ctypes.c_void_p(stream.cuda_stream), _usleep,
                                     ctypes.c_void_p(int(seconds * 1e6)))
    check(err == 0, f"cudaLaunchHostFunc failed ({err})")


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


# ---- cases ------------------------------------------------------------------

def done(work, async_op):
    if async_op:
        check(work is not None, "async_op=True returned no Work")
        check(work.wait(), "Work.wait() returned False")
    else:
        check(work is None, "a blocking call returned a Work")


def check_collectives(async_op, stream):
    what = f"async={async_op} stream={'side' if stream else 'current'}"
    ctx = torch.cuda.stream(stream) if stream else torch.cuda.stream(torch.cuda.current_stream())
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                  torch.int32, torch.int8, torch.uint8):
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
        if dtype.is_floating_point:
            ops.append(dist.ReduceOp.AVG)
        for op in ops:
            x = on_device(make(RANK, dtype), stream)
            with ctx:
                done(dist.all_reduce(x, op=op, async_op=async_op), async_op)
                got = x.cpu()
            want = reduce_all([make(r, dtype) for r in range(SIZE)], op)
            if dtype in (torch.float16, torch.bfloat16) and op == dist.ReduceOp.AVG:
                check(torch.allclose(got.double(), want.double(), atol=1e-2),
                      f"all_reduce AVG {dtype} {what}: {got.tolist()} vs {want.tolist()}")
            else:
                same(got, want, f"all_reduce {op} {dtype} {what}")
        root = SIZE - 1
        x = on_device(make(RANK, dtype), stream)
        with ctx:
            done(dist.reduce(x, root, async_op=async_op), async_op)
            if RANK == root:
                same(x, reduce_all([make(r, dtype) for r in range(SIZE)], dist.ReduceOp.SUM),
                     f"reduce {dtype} {what}")
        x = on_device(make(RANK, dtype), stream)
        with ctx:
            done(dist.broadcast(x, src=root, async_op=async_op), async_op)
            same(x, make(root, dtype), f"broadcast {dtype} {what}")
        x = on_device(make(RANK, dtype), stream)
        with ctx:
            out = torch.empty(6 * SIZE, dtype=dtype, device=device())
            done(dist.all_gather_into_tensor(out, x, async_op=async_op), async_op)
            same(out, torch.cat([make(r, dtype) for r in range(SIZE)]),
                 f"all_gather_into_tensor {dtype} {what}")
            outs = [torch.empty(6, dtype=dtype, device=device()) for _ in range(SIZE)]
            done(dist.all_gather(outs, x, async_op=async_op), async_op)
            for r in range(SIZE):
                same(outs[r], make(r, dtype), f"all_gather [{r}] {dtype} {what}")
        x = on_device(make(RANK, dtype, 6 * SIZE), stream)
        with ctx:
            out = torch.empty(6, dtype=dtype, device=device())
            done(dist.reduce_scatter_tensor(out, x, async_op=async_op), async_op)
            full = reduce_all([make(r, dtype, 6 * SIZE) for r in range(SIZE)], dist.ReduceOp.SUM)
            same(out, full[6 * RANK:6 * (RANK + 1)], f"reduce_scatter_tensor {dtype} {what}")
            out = torch.empty(6 * SIZE, dtype=dtype, device=device())
            done(dist.all_to_all_single(out, x, async_op=async_op), async_op)
            want = torch.cat([make(r, dtype, 6 * SIZE)[6 * RANK:6 * (RANK + 1)]
                              for r in range(SIZE)])
            same(out, want, f"all_to_all_single {dtype} {what}")
    # Uneven all-to-all: rank r sends r + 1 elements to each peer.
    x = on_device(torch.arange(SIZE * (RANK + 1), dtype=torch.float32) + 100 * RANK, stream)
    with ctx:
        out = torch.empty(sum(r + 1 for r in range(SIZE)), dtype=torch.float32, device=device())
        done(dist.all_to_all_single(out, x, output_split_sizes=[r + 1 for r in range(SIZE)],
                                    input_split_sizes=[RANK + 1] * SIZE, async_op=async_op),
             async_op)
        want = torch.cat([(torch.arange(SIZE * (r + 1), dtype=torch.float32) + 100 * r)
                          [RANK * (r + 1):(RANK + 1) * (r + 1)] for r in range(SIZE)])
        same(out, want, f"uneven all_to_all_single {what}")
    # Point to point around the ring, even ranks sending first: NCCL runs
    # a gang's sends and receives in issue order, one at a time, unless
    # they are coalesced.
    if SIZE > 1:
        x = on_device(make(RANK, torch.float32), stream)
        got = torch.empty(6, dtype=torch.float32, device=device())
        with ctx:
            send = lambda: dist.isend(x, (RANK + 1) % SIZE)  # noqa: E731
            recv = lambda: dist.irecv(got, (RANK - 1) % SIZE)  # noqa: E731
            for post in ((send, recv) if RANK % 2 == 0 else (recv, send)):
                post().wait()
            same(got, make((RANK - 1) % SIZE, torch.float32), f"send/recv {what}")
        # Every rank sends first, in one batch: it meets only coalesced.
        x = on_device(make(RANK, torch.float64) * 2, stream)
        got = torch.empty(6, dtype=torch.float64, device=device())
        with ctx:
            ops = [dist.P2POp(dist.isend, x, (RANK + 1) % SIZE),
                   dist.P2POp(dist.irecv, got, (RANK - 1) % SIZE)]
            reqs = dist.batch_isend_irecv(ops)
            if async_op:
                for req in reqs:
                    req.wait()
            else:
                reqs[-1].wait()
            same(got, make((RANK - 1) % SIZE, torch.float64) * 2, f"batch_isend_irecv {what}")


def case_ops():
    init(device_id=device())
    check(dist.get_backend() == "gang", f"backend {dist.get_backend()}")
    side = torch.cuda.Stream()
    for async_op in (False, True):
        for stream in (None, side):
            check_collectives(async_op, stream)
    dist.destroy_process_group()
    print(f"cuda ops: rank {RANK}/{SIZE}: ok", flush=True)


def case_stream():
    init(device_id=device())
    stream = torch.cuda.current_stream()
    # A blocking call behind held work returns at once; its input is what
    # the held stream writes after the hold.
    dist.barrier()
    hold(stream, HOLD_S)
    x = on_device(make(RANK, torch.float32))
    _, took = timed(lambda: dist.all_reduce(x))
    check(took < QUICK_S, f"a blocking all_reduce behind {HOLD_S} s of held work took "
                          f"{took:.3f} s: it waited for the device")
    same(x, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce behind held work")
    # Work.wait() orders the stream and returns; is_completed() follows the
    # device.
    dist.barrier()
    hold(stream, HOLD_S)
    x = on_device(make(RANK, torch.float32))
    work, took = timed(lambda: dist.all_reduce(x, async_op=True))
    check(took < QUICK_S, f"an async all_reduce took {took:.3f} s to return")
    check(not work.is_completed(), "is_completed() before the held stream ran")
    _, took = timed(work.wait)
    check(took < QUICK_S, f"Work.wait() behind held work took {took:.3f} s: a host wait")
    deadline = time.monotonic() + 30
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.01)
    check(work.is_completed(), "is_completed() never turned true")
    check(work.exception() is None, f"the work failed: {work.exception()}")
    same(x, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "async all_reduce behind held work")
    # Many calls in flight at once, each behind the one before.
    x = on_device(torch.ones(8))
    hold(stream, 0.2)
    works = [dist.all_reduce(x, async_op=True) for _ in range(4)]
    for w in works:
        w.wait()
    same(x, torch.full((8,), float(SIZE ** 4)), "four all_reduces in a row")
    dist.destroy_process_group()
    print(f"cuda stream: rank {RANK}/{SIZE}: ok", flush=True)


def case_sync():
    """GANG_TORCH_SYNC=1: a blocking call waits on the host for the device."""
    check(os.environ.get("GANG_TORCH_SYNC") == "1", "run with GANG_TORCH_SYNC=1")
    init(device_id=device())
    dist.barrier()
    hold(torch.cuda.current_stream(), HOLD_S)
    x = on_device(make(RANK, torch.float32))
    _, took = timed(lambda: dist.all_reduce(x))
    check(took > HOLD_S / 2, f"with GANG_TORCH_SYNC=1 the call returned after {took:.3f} s, "
                             f"before the held work ({HOLD_S} s) ran")
    same(x, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce with GANG_TORCH_SYNC=1")
    dist.destroy_process_group()
    print(f"cuda sync: rank {RANK}/{SIZE}: ok", flush=True)


def case_future():
    init(device_id=device())
    want = reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM)
    dist.barrier()
    hold(torch.cuda.current_stream(), HOLD_S / 2)
    x = on_device(make(RANK, torch.float32))
    fut = dist.all_reduce(x, async_op=True).get_future()
    seen = []
    # A callback reads the result in stream order (a device-to-host copy
    # on the stream the future synchronised) and issues a collective of its
    # own and waits for it, as DDP's comm hooks do.
    def then(f):
        t = f.value()[0]
        seen.append(t.cpu())
        return dist.all_reduce(t, async_op=True).get_future().wait()[0]
    chained = fut.then(then)
    result, took = timed(chained.wait)
    check(took < QUICK_S + HOLD_S, f"the chained future took {took:.3f} s")
    same(seen[0], want, "the future's value in its callback")
    same(result, want * SIZE, "the collective issued in the callback")
    same(x, want * SIZE, "the tensor after both")
    dist.destroy_process_group()
    print(f"cuda future: rank {RANK}/{SIZE}: ok", flush=True)


def case_lazy():
    init()  # no device_id: the device's gang is made on first use
    x = on_device(make(RANK, torch.float32))
    dist.all_reduce(x)
    same(x, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "the first all_reduce (it makes the device's gang)")
    cpu = make(RANK, torch.float32)
    dist.all_reduce(cpu)  # the CPU gang beside it
    same(cpu, reduce_all([make(r, torch.float32) for r in range(SIZE)], dist.ReduceOp.SUM),
         "a CPU all_reduce on the same group")
    try:
        dist.all_reduce_coalesced([make(RANK, torch.float32), x])
    except RuntimeError as e:
        check("one device" in str(e), f"tensors of two devices: {e}")
    else:
        fail("an all_reduce_coalesced of a CPU and a CUDA tensor was not refused")
    sub = dist.new_group(list(range(SIZE)))
    y = on_device(make(RANK, torch.int64))
    dist.all_reduce(y, group=sub)
    same(y, reduce_all([make(r, torch.int64) for r in range(SIZE)], dist.ReduceOp.SUM),
         "all_reduce on a subgroup's device gang")
    dist.destroy_process_group()
    print(f"cuda lazy: rank {RANK}/{SIZE}: ok", flush=True)


def case_graph():
    """A step captured into a CUDA graph (the runtime's capture, on a side
    stream, as torch.cuda.graph does it) with a blocking and an async
    all_reduce through the backend; each launch runs them again on what
    the buffer holds then."""
    init(device_id=device())
    rt = _runtime()
    stream = torch.cuda.Stream()
    x = on_device(make(RANK, torch.float32))
    y = torch.empty(6, dtype=torch.float32, device=device())
    torch.cuda.synchronize()
    graph, exec_ = ctypes.c_void_p(), ctypes.c_void_p()
    with torch.cuda.stream(stream):
        check(rt.cudaStreamBeginCapture(stream.cuda_stream, 2) == 0, "cudaStreamBeginCapture")
        dist.all_reduce(x)
        work = dist.all_reduce(x, async_op=True)
        work.wait()  # joins the backend's stream back into the capture
        y.copy_(x)
        err = rt.cudaStreamEndCapture(stream.cuda_stream, ctypes.byref(graph))
        check(err == 0, f"cudaStreamEndCapture failed ({err}): the backend's stream was left "
                        "out of the capture or not joined back")
    check(rt.cudaGraphInstantiate(ctypes.byref(exec_), graph, 0) == 0, "cudaGraphInstantiate")
    for launch in range(3):
        inputs = [make(r, torch.float32) + 10 * launch for r in range(SIZE)]
        with torch.cuda.stream(stream):
            x.copy_(inputs[RANK].pin_memory(), non_blocking=True)
            check(rt.cudaGraphLaunch(exec_, stream.cuda_stream) == 0, "cudaGraphLaunch")
            got = y.cpu()
        want = reduce_all(inputs, dist.ReduceOp.SUM) * SIZE
        same(got, want, f"launch {launch} of the captured step")
    rt.cudaGraphExecDestroy(exec_)
    rt.cudaGraphDestroy(graph)
    dist.destroy_process_group()
    print(f"cuda graph: rank {RANK}/{SIZE}: ok", flush=True)


class _Copies(torch.nn.Module):
    """A model whose forward and backward run no kernel: its output is a
    copy of its parameter (a device-to-device copy), and a copy's backward
    passes the gradient through."""

    def __init__(self, n):
        super().__init__()
        self.p = torch.nn.Parameter(on_device(torch.arange(n, dtype=torch.float32)))
        torch.cuda.synchronize()

    def forward(self, x):
        del x
        return self.p.clone()


def case_ddp():
    """DDP on CUDA tensors: its parameter broadcast and shape check at
    construction, its reducer's buckets all-reduced through a comm hook
    (the default one divides by the world size, a kernel), every step's
    gradient the sum of every rank's. On the double nothing else can run
    (no kernels), so the model is a copy of its parameter and the loss's
    gradient is given; on a GPU it is the same program."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    init(device_id=device())
    n = 1000
    model = DDP(_Copies(n), device_ids=[device()], bucket_cap_mb=0.001,
                gradient_as_bucket_view=True)

    def summed(state, bucket):
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(
            lambda f: f.value()[0])

    model.register_comm_hook(None, summed)
    for step in range(3):
        out = model(torch.empty(1, device=device()))
        grad = on_device(torch.full((n,), float(RANK + 1 + 10 * step)))
        out.backward(grad)
        want = torch.full((n,), float(sum(r + 1 + 10 * step for r in range(SIZE))))
        same(model.module.p.grad, want, f"step {step}: the reduced gradient")
        model.module.p.grad = None
    dist.destroy_process_group()
    print(f"cuda ddp: rank {RANK}/{SIZE}: ok", flush=True)


def case_failure():
    init(device_id=device())
    x = on_device(torch.ones(4))
    dist.all_reduce(x)
    same(x, torch.full((4,), float(SIZE)), "all_reduce before the failure")
    dist.barrier()
    if RANK == SIZE - 1:
        os.kill(os.getpid(), 9)
    start = time.monotonic()
    try:
        for _ in range(100):
            dist.all_reduce(x)
            x.cpu()
            time.sleep(0.05)
    except dist.DistBackendError as e:
        took = time.monotonic() - start
        check(took < 30, f"the failure took {took:.1f} s to surface")
        print(f"cuda failure: rank {RANK}: DistBackendError after {took:.2f} s: "
              f"{str(e).splitlines()[0][:160]}", flush=True)
        os._exit(0)
    fail("100 all_reduces with a rank gone all succeeded")


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    CASES[sys.argv[1]]()
