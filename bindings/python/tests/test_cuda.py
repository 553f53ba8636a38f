"""CUDA gangs from Python: device memory through __cuda_array_interface__,
each operation on its operands' stream and device.

Runs where CUDA works: against the host double of CUDA and NCCL
(tests/nccl_double, whose "device memory" is host memory; CTest's
python.cuda_double sets it up) or a real GPU. Elsewhere every test skips
and says why.
"""

import ctypes
import os
import threading
import time

import numpy as np
import pytest

import gang
from multirank import run_ranks

_MEMCPY_DEFAULT = 4


def _load_cudart():
    """(the CUDA runtime the NCCL module loads, None) or (None, why not)."""
    name = os.environ.get("GANG_CUDART_LIBRARY", "libcudart.so.13")
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        return None, f"{name} cannot be loaded ({e})"
    count = ctypes.c_int(0)
    err = lib.cudaGetDeviceCount(ctypes.byref(count))
    if err != 0 or count.value < 1:
        return None, f"no CUDA device is visible (cudaGetDeviceCount: error {err}, {count.value} devices)"
    return lib, None


def _cudart():
    return _load_cudart()[0]


def _skip_reason():
    why = _load_cudart()[1]
    return None if why is None else why + "; python.cuda_double runs these on the host double"


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


def _visible():
    """How many devices the CUDA runtime (or the double) shows; 0 without."""
    rt = _cudart()
    count = ctypes.c_int(0)
    if rt is None or rt.cudaGetDeviceCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


# In a rank process (run_ranks sets GANG_RANK) on a machine with fewer GPUs
# than ranks, the ranks share them, each posing as a host of its own to NCCL
# (NCCL's socket transport on lo): a functional check of real NCCL. NCCL
# reads these when the rank first calls it. GANG_TEST_GPU_SHARE=0 forbids it.
if ("GANG_RANK" in os.environ and os.environ.get("GANG_TEST_GPU_SHARE") != "0"
        and 0 < _visible() < int(os.environ.get("GANG_SIZE", "1"))):
    os.environ["NCCL_HOSTID"] = f"gang-test-rank-{os.environ['GANG_RANK']}"
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")


class _Device:
    """CuPy's description of an array's device (ndarray.device.id)."""

    def __init__(self, index):
        self.id = index


class DeviceArray:
    """A device copy of a numpy array, described by __cuda_array_interface__
    (as torch CUDA tensors and CuPy arrays are). Without `stream` the
    interface has no stream field (the legacy default stream); with one, it
    names that stream (None: no synchronisation asked for). `device`, if
    given, is told the way CuPy tells it."""

    _NO_STREAM = object()

    def __init__(self, cudart, host, readonly=False, stream=_NO_STREAM, device=None):
        self._rt = cudart
        self.dtype, self.shape = host.dtype, host.shape
        self._ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(self._ptr), ctypes.c_size_t(max(host.nbytes, 1))) == 0
        host = np.ascontiguousarray(host)
        assert cudart.cudaMemcpy(self._ptr, ctypes.c_void_p(host.ctypes.data),
                                 ctypes.c_size_t(host.nbytes), _MEMCPY_DEFAULT) == 0
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "strides": None,
            "data": (self._ptr.value, readonly), "version": 3,
        }
        if stream is not DeviceArray._NO_STREAM:
            self.__cuda_array_interface__["stream"] = stream
        if device is not None:
            self.device = _Device(device)

    @property
    def ptr(self):
        return self._ptr

    def get(self):
        out = np.empty(self.shape, dtype=self.dtype)
        self._rt.cudaDeviceSynchronize()
        assert self._rt.cudaMemcpy(ctypes.c_void_p(out.ctypes.data), self._ptr,
                                   ctypes.c_size_t(out.nbytes), _MEMCPY_DEFAULT) == 0
        return out


def _collectives():
    rt = _cudart()
    with gang.create(device="cuda", timeout=60) as g:
        _on_gang_device(rt, g)
        r, n = g.rank, g.size
        assert g.backend == "nccl" and str(g.device).startswith("cuda")

        for dt in (np.float32, np.float64, np.int64, np.float16, np.uint8):
            x = DeviceArray(rt, np.full(5, r + 1, dtype=dt))
            assert g.all_reduce(x) is x
            np.testing.assert_array_equal(x.get(), np.full(5, n * (n + 1) // 2, dtype=dt))

        # bfloat16 bits in a 16-bit integer array: 1.0 is 0x3f80, 2.0 0x4000.
        x = DeviceArray(rt, np.full(4, 0x3F80, dtype=np.uint16))
        g.all_reduce(x, dtype="bfloat16")
        np.testing.assert_array_equal(x.get(), np.full(4, 0x4000 if n == 2 else 0x3F80))

        x = DeviceArray(rt, np.arange(6, dtype=np.int32).reshape(2, 3) * (r + 1))
        g.broadcast(x, source_rank=n - 1)
        np.testing.assert_array_equal(x.get(), np.arange(6).reshape(2, 3) * n)

        x = DeviceArray(rt, np.full(3, r, dtype=np.int64))
        out = DeviceArray(rt, np.zeros((n, 3), dtype=np.int64))
        g.all_gather(out, x)
        np.testing.assert_array_equal(out.get(), np.repeat(np.arange(n), 3).reshape(n, 3))

        work = g.all_reduce(x, async_op=True)
        work.wait()
        np.testing.assert_array_equal(x.get(), np.full(3, n * (n - 1) // 2))

        # None is the legacy default stream.
        g.set_cuda_stream(None)
        y = DeviceArray(rt, np.ones(2, dtype=np.float32))
        g.all_reduce(y)
        np.testing.assert_array_equal(y.get(), np.full(2, n))

        # Host memory on a CUDA gang, and outputs gang would have to allocate.
        with pytest.raises(TypeError, match="needs device memory"):
            g.all_reduce(np.ones(2, dtype=np.float32))
        with pytest.raises(TypeError, match="cannot allocate device memory"):
            g.all_gather_to_list(x)
        with pytest.raises(ValueError, match="read-only"):
            g.all_reduce(DeviceArray(rt, np.ones(2, dtype=np.float32), readonly=True))
        # Objects still travel (over the CPU control channel).
        assert g.broadcast_object({"step": r}, 0) == {"step": 0}
    return True


def test_collectives_on_device_memory():
    run_ranks(2, _collectives)


def _cpu_refuses_device_memory():
    rt = _cudart()
    with gang.create(timeout=30) as g:
        with pytest.raises(TypeError, match="device memory on a CPU gang"):
            g.all_reduce(DeviceArray(rt, np.ones(2, dtype=np.float32)))


def test_cpu_gang_refuses_device_memory():
    run_ranks(1, _cpu_refuses_device_memory)


# ---- streams: each operation goes on its operands' stream ------------------

_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _on_gang_device(rt, g):
    """Makes the gang's GPU this thread's, so the test's memory and streams
    are made there (the strict double checks)."""
    index = int(str(g.device).split(":")[1])
    assert rt.cudaSetDevice(index) == 0


def _new_stream(rt):
    stream = ctypes.c_void_p()
    assert rt.cudaStreamCreate(ctypes.byref(stream)) == 0
    return stream


def _late_input():
    """The input is written on a stream of its own after a slow task there;
    the all-reduce, ordered on that stream, reads it only once written."""
    rt = _cudart()
    with gang.create(device="cuda", timeout=60) as g:
        _on_gang_device(rt, g)
        r, n = g.rank, g.size
        stream = _new_stream(rt)
        slow = _HOST_FN(lambda _: time.sleep(0.2))
        host = np.full(1000, r + 1, dtype=np.float32)
        x = DeviceArray(rt, np.zeros(1000, dtype=np.float32), stream=stream.value)
        assert rt.cudaLaunchHostFunc(stream, slow, None) == 0
        assert rt.cudaMemcpyAsync(x.ptr, ctypes.c_void_p(host.ctypes.data),
                                  ctypes.c_size_t(host.nbytes), _MEMCPY_DEFAULT, stream) == 0
        g.all_reduce(x)
        assert rt.cudaStreamSynchronize(stream) == 0
        np.testing.assert_array_equal(x.get(), np.full(1000, n * (n + 1) // 2))
        assert rt.cudaStreamDestroy(stream) == 0
    return True


def test_input_written_late_on_its_stream():
    run_ranks(2, _late_input)


_HOST_FNS = []  # callbacks live as long as the rank: a stream may still be in one


def _held(rt, stream):
    """Holds `stream` with a task that runs until the returned event is set."""
    gate = threading.Event()
    hold = _HOST_FN(lambda _: gate.wait(60))
    _HOST_FNS.append(hold)
    assert rt.cudaLaunchHostFunc(stream, hold, None) == 0
    return gate


def _explicit_stream_wins():
    rt = _cudart()
    with gang.create(device="cuda", timeout=60) as g:
        _on_gang_device(rt, g)
        n = g.size
        busy, free = _new_stream(rt), _new_stream(rt)
        x = DeviceArray(rt, np.ones(4, dtype=np.float32), stream=busy.value)

        # Chosen: the operand's stream, held, does not hold the operation.
        g.set_cuda_stream(free.value)
        gate = _held(rt, busy)
        try:
            work = g.all_reduce(x, async_op=True)
            assert work.wait(timeout=30), "the operation waited for the operand's stream"
        finally:
            gate.set()
        np.testing.assert_array_equal(x.get(), np.full(4, n))

        # "auto": the operation follows the operand's stream again.
        g.set_cuda_stream("auto")
        gate = _held(rt, busy)
        try:
            work = g.all_reduce(x, async_op=True)
            assert not work.wait(timeout=0.3), "the operation ran before its operand's stream"
        finally:
            gate.set()
        assert work.wait(timeout=30)
        np.testing.assert_array_equal(x.get(), np.full(4, n * n))

        # The stream is handed to the library only when it changes.
        calls = []
        real = gang.capi.gang_set_cuda_stream
        gang.capi.gang_set_cuda_stream = lambda h, s: (calls.append(s), real(h, s))[1]
        try:
            for _ in range(3):
                g.all_reduce(x)
            g.all_reduce(DeviceArray(rt, np.ones(1, dtype=np.float32)))  # legacy default
            g.all_reduce(DeviceArray(rt, np.ones(1, dtype=np.float32), stream=None))
        finally:
            gang.capi.gang_set_cuda_stream = real
        assert calls == [None], calls

        # A sub-gang keeps a chosen stream.
        g.set_cuda_stream(free.value)
        sub = g.split(0)
        with sub:
            gate = _held(rt, busy)
            try:
                assert sub.all_reduce(x, async_op=True).wait(timeout=30)
            finally:
                gate.set()
        rt.cudaDeviceSynchronize()
        for s in (busy, free):
            assert rt.cudaStreamDestroy(s) == 0
    return True


def _stream_completion():
    """With stream completion a blocking all-reduce behind a held stream
    returns before the stream runs it; the result is right once it has."""
    rt = _cudart()
    with gang.create(device="cuda", timeout=60) as g:
        _on_gang_device(rt, g)
        n = g.size
        s = _new_stream(rt)
        x = DeviceArray(rt, np.ones(4, dtype=np.float32), stream=s.value)
        with pytest.raises(gang.GangInvalidArgumentError, match="'host' or 'stream'"):
            g.set_cuda_completion("device")
        g.set_cuda_completion("stream")
        gate = _held(rt, s)
        g.all_reduce(x)  # returns while the stream is held
        gate.set()
        assert rt.cudaStreamSynchronize(s) == 0
        np.testing.assert_array_equal(x.get(), np.full(4, n))
        g.set_cuda_completion("host")
        g.all_reduce(x)
        np.testing.assert_array_equal(x.get(), np.full(4, n * n))
    return True


def test_stream_completion_returns_before_the_device():
    run_ranks(2, _stream_completion)


def test_explicit_stream_wins_until_auto():
    run_ranks(2, _explicit_stream_wins)


def _devices():
    rt = _cudart()
    with gang.create(device="cuda:1", timeout=60) as g:
        _on_gang_device(rt, g)
        assert str(g.device) == "cuda:1"
        other = DeviceArray(rt, np.ones(2, dtype=np.float32), device=2)
        with pytest.raises(gang.GangInvalidArgumentError,
                           match=r"x is on cuda:2, the gang on cuda:1"):
            g.all_reduce(other)
        out = DeviceArray(rt, np.zeros((g.size, 2), dtype=np.float32), device=0)
        with pytest.raises(gang.GangInvalidArgumentError,
                           match=r"out is on cuda:0, the gang on cuda:1"):
            g.all_gather(out, DeviceArray(rt, np.ones(2, dtype=np.float32), device=1))
        # Its own device, and memory that does not tell, are taken.
        x = DeviceArray(rt, np.ones(2, dtype=np.float32), device=1)
        g.all_reduce(x)
        np.testing.assert_array_equal(x.get(), np.full(2, g.size))

        # Two operands on two streams: refused while following them.
        a, b = _new_stream(rt), _new_stream(rt)
        with pytest.raises(gang.GangInvalidArgumentError, match="one operation runs on one"):
            g.all_gather(DeviceArray(rt, np.zeros((g.size, 2), dtype=np.float32), stream=a.value),
                         DeviceArray(rt, np.ones(2, dtype=np.float32), stream=b.value))
        g.barrier()
    return True


@pytest.mark.skipif(0 < _visible() < 3, reason=f"the case names cuda:0 to cuda:2; {_visible()} "
                    "device(s) visible (the double shows 4)")
def test_operands_on_another_device_are_refused():
    run_ranks(2, _devices)


def test_interface_streams():
    """__cuda_array_interface__'s stream field as gang reads it."""
    from gang._buffers import view

    def stream_of(**fields):
        cai = {"shape": (2,), "typestr": "<f4", "data": (4096, False), "version": 3}
        cai.update(fields)
        obj = type("Device", (), {"__cuda_array_interface__": cai})()
        return view(obj, device=True)[0].stream

    assert stream_of() == 0               # no field: the legacy default stream
    assert stream_of(stream=None) is None  # no synchronisation asked for
    assert stream_of(stream=1) == 0       # legacy default
    assert stream_of(stream=2) == 2       # per-thread default
    assert stream_of(stream=0x7f00) == 0x7f00
    with pytest.raises(TypeError, match="not an int"):
        stream_of(stream="s")


class _FakeCudaTensor:
    """Just enough of a CUDA tensor for gang to read: torch itself needs a
    GPU for one, and the rule under test is which stream gang asks for."""

    __module__ = "torch.fake"

    class dtype:
        name = "float32"
        is_floating_point = True

    is_cuda, is_meta, shape = True, False, (4,)

    def __init__(self, device):
        self._device = device

    def is_contiguous(self):
        return True

    def element_size(self):
        return 4

    def data_ptr(self):
        return 4096

    def get_device(self):
        return self._device


def test_tensor_stream_is_torchs_current_stream(monkeypatch):
    """A CUDA tensor is ordered on torch's current stream on its device."""
    from gang import _buffers

    asked = []

    class Stream:
        def __init__(self, index):
            asked.append(index)
            self.cuda_stream = 0x5000 + index

    monkeypatch.setattr(_buffers, "_current_stream", Stream)
    v = _buffers.view(_FakeCudaTensor(3), writable=True, device=True)[0]
    assert (v.stream, v.device, asked) == (0x5003, 3, [3])
