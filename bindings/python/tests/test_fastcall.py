"""all_reduce's and broadcast's fast call (capi.fast_all_reduce and
capi.fast_broadcast, python_fastcall.i): it is taken for contiguous,
writable host buffers and torch tensors of a known dtype, gives what the
full path gives (the full path is the one taken with dtype= given), and
leaves everything else to the full path, whose errors stay as they were.
The torch tests skip without torch."""

import array
import os
import signal
import threading
import time

import numpy as np
import pytest

import gang
from gang import ReduceOperation as Op
from gang import _gang, capi
from multirank import run_ranks

NP_DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
             np.float16, np.float32, np.float64, np.bool_]
OPS = [Op.SUM, Op.PRODUCT, Op.MIN, Op.MAX, Op.MEAN]


class _Recorder:
    """Stands in for _gang's fast calls and records what each returned:
    None (done in C), a tuple (asynchronous, done in C) or NotImplemented
    (left to the full path), or the exception it raised."""

    def __init__(self):
        self.seen = []
        self._saved = _gang._fast_all_reduce, _gang._fast_broadcast

    def _wrap(self, fast):
        def call(*args):
            try:
                result = fast(*args)
            except BaseException as e:
                self.seen.append(e)
                raise
            self.seen.append(result)
            return result

        return call

    def __enter__(self):
        _gang._fast_all_reduce = self._wrap(self._saved[0])
        _gang._fast_broadcast = self._wrap(self._saved[1])
        return self

    def __exit__(self, *exc_info):
        _gang._fast_all_reduce, _gang._fast_broadcast = self._saved

    def last(self):
        return self.seen.pop() if self.seen else "not called"


def _outcome(call):
    """(error type, message), or None once call() returned."""
    try:
        call()
    except gang.GangError as e:
        return type(e), str(e)
    return None


def _same(a, b) -> bool:
    """Equal in dtype, shape and every element: numpy arrays (bitwise) or
    torch tensors."""
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a.dtype == b.dtype and a.equal(b)


def _taken(seen, outcome) -> bool:
    """Whether the fast call did the operation: returned None, or raised
    the error the operation ended with."""
    if outcome is None:
        return seen is None
    return isinstance(seen, gang.GangError) and (type(seen), str(seen)) == outcome


def _numpy_operand(dt, rank):
    """Values that tell signed from unsigned and integers from floats of the
    same size (a wrong dtype changes some result)."""
    i = (np.arange(6) + rank) % 3
    kind = np.dtype(dt).kind
    if kind == "b":
        return i == 0
    if kind == "u":
        return np.array([1, 2, np.iinfo(dt).max // 2 + 2], dtype=dt)[i]
    if kind == "i":
        return (i - 1).astype(dt)
    return (i - 0.5).astype(dt)


def _numpy_against_full_path(size):
    """Every numpy dtype and op, blocking and asynchronous, and broadcast:
    the fast call is taken, and x ends as the full path leaves a copy."""
    with gang.create(timeout=60) as g, _Recorder() as rec:
        r = g.rank
        for dt in NP_DTYPES:
            name = np.dtype(dt).name
            for op in OPS:
                fast = _numpy_operand(dt, r)
                full = fast.copy()
                got = _outcome(lambda: g.all_reduce(fast, op))
                assert _taken(rec.last(), got), (name, op, "the fast call was not taken")
                assert got == _outcome(lambda: g.all_reduce(full, op, dtype=name)), (name, op)
                assert rec.last() == "not called", "dtype= takes the full path"
                assert _same(fast, full), (name, op, fast, full)
            # asynchronous: a Work that holds a memoryview of x until done
            fast = _numpy_operand(dt, r)
            full = fast.copy()
            work = g.all_reduce(fast, Op.MAX, async_op=True)
            assert isinstance(work, gang.Work) and isinstance(rec.last(), tuple)
            assert isinstance(work._keep[0], memoryview) and work._keep[0].obj is fast
            assert work.wait() and work.result() is fast and work._keep is None
            g.all_reduce(full, Op.MAX, dtype=name)
            assert _same(fast, full), (name, fast, full)
            # broadcast from the last rank
            fast = _numpy_operand(dt, r)
            full = fast.copy()
            assert g.broadcast(fast, size - 1) is fast and rec.last() is None
            g.broadcast(full, size - 1, dtype=name)
            assert _same(fast, full) and _same(fast, _numpy_operand(dt, size - 1)), name

        # in a group the full path queues the operation; the fast call is
        # not tried there, and is again after the group
        x = np.full(2, r + 1.0)
        with g.group():
            g.all_reduce(x)
            with pytest.raises(gang.GangInvalidArgumentError, match="take no async_op"):
                g.all_reduce(x, async_op=True)
        assert rec.seen == [] and x.tolist() == [size * (size + 1) / 2] * 2
        g.all_reduce(x)
        assert rec.last() is None

        # a rank out of range fails in the library, with the same error
        x = np.zeros(3, dtype=np.int32)
        got = _outcome(lambda: g.broadcast(x, size))
        assert got is not None and got[0] is gang.GangInvalidArgumentError
        assert _taken(rec.last(), got)
        assert got == _outcome(lambda: g.broadcast(x, size, dtype="int32"))
    return True


def test_numpy_fast_call_matches_full_path():
    run_ranks(3, _numpy_against_full_path, 3)


def _blocking_and_interrupted():
    """A blocking fast call releases the GIL while it waits for its peer,
    and on the main thread Ctrl-C aborts it at once, as the SWIG wrappers
    do."""
    with gang.create(timeout=10) as g, _Recorder() as rec:
        x = np.ones(2)
        if g.rank == 1:
            time.sleep(0.5)  # rank 0 waits in all_reduce meanwhile
            g.all_reduce(x)
            time.sleep(3)  # and never joins rank 0's second one
            return True
        stamps, stop = [], []

        def spin():  # notes the time every 10 ms while it runs
            last = 0.0
            while not stop:
                now = time.monotonic()
                if now - last >= 0.01:
                    stamps.append(now)
                    last = now

        spinner = threading.Thread(target=spin)
        spinner.start()
        time.sleep(0.05)
        start = time.monotonic()
        g.all_reduce(x)
        end = time.monotonic()
        stop.append(True)
        spinner.join()
        assert rec.last() is None and x.tolist() == [2.0, 2.0]
        assert end - start > 0.2, "rank 1 came too early to tell"
        assert any(start + 0.05 < t < end - 0.05 for t in stamps), \
            "no other thread ran while the call waited: the GIL was held"

        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            g.all_reduce(x)
        took = time.monotonic() - start
        assert isinstance(rec.last(), KeyboardInterrupt)
        assert took < 3, f"Ctrl-C took {took:.1f} s to end the call"
    return True


def test_blocking_fast_call_releases_the_gil_and_takes_ctrl_c():
    run_ranks(2, _blocking_and_interrupted)


def test_buffers_the_fast_call_takes():
    """Every contiguous, writable buffer of a native format gang knows."""
    g = gang.FakeGang(0, 2)  # SUM doubles
    h = g._h
    for x in (bytearray(b"\x01\x02"), array.array("i", [1, -2]), array.array("d", [0.5]),
              memoryview(np.arange(4, dtype=np.float32)), np.arange(6.0).reshape(2, 3),
              np.array(3, dtype=np.int64), np.zeros(0, dtype=np.float32),
              np.arange(8, dtype=np.int16)[2:6], np.zeros((2, 3), order="F")[:, :1],
              np.arange(4, dtype="<i4"), np.arange(4, dtype="=u8")):
        want = np.array(x) * 2 if not isinstance(x, bytearray) else bytearray(b"\x02\x04")
        assert capi.fast_all_reduce(h, x, Op.SUM, False) is None, x
        assert np.array_equal(np.asarray(x), np.asarray(want)), (x, want)
        assert capi.fast_broadcast(h, x, 0, False) is None, x
    w = capi.fast_all_reduce(h, bytearray(3), 0, True)
    assert type(w) is tuple and isinstance(w[1], memoryview)


def test_fallbacks_raise_as_before():
    """What the fast call leaves to the full path, which raises as it did."""
    g = gang.FakeGang(0, 2)
    h = g._h
    x = np.arange(6, dtype=np.float64)
    readonly = np.ones(3)
    readonly.flags.writeable = False

    class DeviceMemory:  # device memory as CuPy describes it; never read
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3}

    refused = [
        (x[::2], gang.GangInvalidArgumentError, "must be C-contiguous"),
        (np.ones((2, 3), order="F"), gang.GangInvalidArgumentError, "must be C-contiguous"),
        (readonly, gang.GangInvalidArgumentError, "is read-only"),
        (b"12345678", gang.GangInvalidArgumentError, "is read-only"),
        (np.zeros(2, np.complex64), gang.GangTypeError, "has no gang dtype"),
        (np.zeros(2, np.uint16), gang.GangTypeError, "has no gang dtype"),
        (np.zeros(2, ">f8" if np.little_endian else "<f8"), gang.GangTypeError,
         "has no gang dtype"),
        ([1.0, 2.0], gang.GangTypeError, "expected a numpy array"),
        (3.0, gang.GangTypeError, "expected a numpy array"),
        (DeviceMemory(), gang.GangTypeError, "device memory on a CPU gang"),
    ]
    for obj, error, match in refused:
        assert capi.fast_all_reduce(h, obj, Op.SUM, False) is NotImplemented, obj
        assert capi.fast_all_reduce(h, obj, Op.SUM, True) is NotImplemented, obj
        assert capi.fast_broadcast(h, obj, 0, False) is NotImplemented, obj
        with pytest.raises(error, match=match):
            g.all_reduce(obj)
        with pytest.raises(error, match=match):
            g.broadcast(obj)

    # 16-bit floats numpy lacks go with dtype=, on the full path
    bits = np.full(2, 0x3F80, dtype=np.uint16)  # bfloat16 1.0
    g.all_reduce(bits, dtype="bfloat16")
    assert bits.tolist() == [0x4000] * 2

    # ops and roots that are not plain ints take the full path, which reads
    # names and numpy integers, and refuses the rest as before
    for op in ("max", np.int64(3), 9, -1, True, 2**70, None):
        assert capi.fast_all_reduce(h, x, op, False) is NotImplemented, op
    for root in (np.int64(0), True, 2**70, "0"):
        assert capi.fast_broadcast(h, x, root, False) is NotImplemented, root
    y = np.arange(3.0)
    assert g.all_reduce(y, "max") is y and g.all_reduce(y, "sum") is y
    assert y.tolist() == [0.0, 2.0, 4.0]
    for op in (9, True, None, np.int64(0)):
        with pytest.raises(gang.GangTypeError, match="is not a reduction"):
            g.all_reduce(y, op)
    g.broadcast(y, np.int64(0))
    with pytest.raises(gang.GangTypeError, match="source_rank must be an int"):
        g.broadcast(y, True)

    # a failure of the C call raises what the full path raises
    ints = np.arange(3, dtype=np.int32)
    got = _outcome(lambda: g.all_reduce(ints, Op.MEAN))
    assert got is not None and got[0] is gang.GangError and "cannot be averaged" in got[1]
    assert got == _outcome(lambda: g.all_reduce(ints, Op.MEAN, dtype="int32"))
    got = _outcome(lambda: g.broadcast(ints, 5))
    assert got is not None and got[0] is gang.GangInvalidArgumentError
    assert got == _outcome(lambda: g.broadcast(ints, 5, dtype="int32"))

    # anything but a gang handle
    work = capi.fast_all_reduce(h, x, Op.SUM, True)[0]  # a WorkHandle
    for handle in (None, 0, object(), work):
        assert capi.fast_all_reduce(handle, x, Op.SUM, False) is NotImplemented
    with pytest.raises(TypeError):
        capi.fast_all_reduce(h, x, Op.SUM)

    # a closed gang: the errors as before (the operand is looked at first)
    g.close()
    for obj, error, match in ((x, gang.GangInvalidArgumentError, "closed gang"),
                              (x[::2], gang.GangInvalidArgumentError, "must be C-contiguous"),
                              ([1], gang.GangTypeError, "expected a numpy array")):
        with pytest.raises(error, match=match):
            g.all_reduce(obj)
        with pytest.raises(error, match=match):
            g.broadcast(obj)
    assert g.closed and g._fast is None
    with pytest.raises(AttributeError, match="object has no attribute 'missing'"):
        g.missing  # noqa: B018


# ---- torch ---------------------------------------------------------------


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")


def _torch_dtypes(torch):
    return [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
            torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]


def _tensor_operand(torch, dt, rank):
    """As _numpy_operand (torch's only unsigned type is uint8)."""
    i = (torch.arange(6) + rank) % 3
    if dt is torch.bool:
        return i == 0
    if dt is torch.uint8:
        return torch.tensor([1, 2, 129], dtype=dt)[i]
    if not dt.is_floating_point:
        return (i - 1).to(dt)
    return (i - 0.5).to(dt)


def _torch_against_full_path(size):
    import torch

    with gang.create(timeout=60) as g, _Recorder() as rec:
        r = g.rank
        for dt in _torch_dtypes(torch):
            name = str(dt)[len("torch."):]
            # the first host tensor of a class and dtype teaches the fast call
            g.all_reduce(_tensor_operand(torch, dt, r), Op.MAX)
            rec.seen.clear()
            for op in OPS:
                fast = _tensor_operand(torch, dt, r)
                full = fast.clone()
                got = _outcome(lambda: g.all_reduce(fast, op))
                assert _taken(rec.last(), got), (name, op, "the fast call was not taken")
                assert got == _outcome(lambda: g.all_reduce(full, op, dtype=name)), (name, op)
                assert _same(fast, full), (name, op, fast, full)
            fast = _tensor_operand(torch, dt, r)
            full = fast.clone()
            work = g.all_reduce(fast, Op.SUM, async_op=True)
            assert isinstance(rec.last(), tuple) and work._keep[0] is fast
            assert work.wait() and work.result() is fast
            g.all_reduce(full, Op.SUM, dtype=name)
            assert _same(fast, full), (name, fast, full)
            fast = _tensor_operand(torch, dt, r).reshape(2, 3)
            full = fast.clone()
            assert g.broadcast(fast, 0) is fast and rec.last() is None
            g.broadcast(full, 0, dtype=name)
            assert _same(fast, full) and _same(fast, _tensor_operand(torch, dt, 0).reshape(2, 3))
        # parameters that require grad, as they are
        p = torch.nn.Parameter(torch.full((3,), r + 1.0))
        g.all_reduce(p)
        g.all_reduce(p)
        assert rec.seen[-1] is None and p.requires_grad
        assert p.tolist() == [(size * (size + 1) / 2) * size] * 3
    return True


def test_torch_fast_call_matches_full_path():
    _torch()
    run_ranks(3, _torch_against_full_path, 3)


def test_torch_fallbacks_raise_as_before():
    torch = _torch()
    g = gang.FakeGang(0, 2)
    h = g._h
    t = torch.arange(6.0)
    g.all_reduce(t.clone())  # learns torch.Tensor and float32
    assert capi.fast_all_reduce(h, t, Op.SUM, False) is None and t[1].item() == 2.0
    # a class the full path has not seen yet
    assert capi.fast_all_reduce(h, torch.nn.Parameter(t.clone()), Op.SUM, False) \
        is NotImplemented

    # a class that overrides in Python a method the fast call reads is left
    # to the full path, even once learned
    class Wrapped(torch.Tensor):
        def is_contiguous(self, *args, **kwargs):
            return super().is_contiguous(*args, **kwargs)

    w = torch.ones(2).as_subclass(Wrapped)
    capi.fast_learn_tensor(Wrapped, torch.float32, gang.DType.FLOAT32)
    assert capi.fast_all_reduce(h, w, Op.SUM, False) is NotImplemented
    g.all_reduce(w)
    assert w.tolist() == [2.0, 2.0]

    refused = [
        (torch.ones(2, 3).t(), gang.GangInvalidArgumentError, "must be C-contiguous"),
        (torch.arange(6.0)[::2], gang.GangInvalidArgumentError, "must be C-contiguous"),
        (torch.empty(3, device="meta"), gang.GangTypeError, "meta tensor"),
        (torch.zeros(2, dtype=torch.complex64), gang.GangTypeError, "has no gang dtype"),
    ]
    for obj, error, match in refused:
        assert capi.fast_all_reduce(h, obj, Op.SUM, False) is NotImplemented, obj
        assert capi.fast_broadcast(h, obj, 0, False) is NotImplemented, obj
        with pytest.raises(error, match=match):
            g.all_reduce(obj)
        with pytest.raises(error, match=match):
            g.broadcast(obj)
    ints = torch.arange(3, dtype=torch.int32)
    g.all_reduce(ints)
    got = _outcome(lambda: g.all_reduce(ints, Op.MEAN))
    assert got is not None and "cannot be averaged" in got[1]
    assert got == _outcome(lambda: g.all_reduce(ints, Op.MEAN, dtype="int32"))
