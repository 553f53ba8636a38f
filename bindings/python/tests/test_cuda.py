"""CUDA gangs from Python: device memory through __cuda_array_interface__.

Runs where CUDA works: against the host double of CUDA and NCCL
(tests/nccl_double, whose "device memory" is host memory; CTest's
python.cuda_double sets it up) or a real GPU. Elsewhere every test skips
and says why.
"""

import ctypes
import os

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


class DeviceArray:
    """A device copy of a numpy array, described by __cuda_array_interface__
    (as torch CUDA tensors and CuPy arrays are)."""

    def __init__(self, cudart, host, readonly=False):
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

    def get(self):
        out = np.empty(self.shape, dtype=self.dtype)
        self._rt.cudaDeviceSynchronize()
        assert self._rt.cudaMemcpy(ctypes.c_void_p(out.ctypes.data), self._ptr,
                                   ctypes.c_size_t(out.nbytes), _MEMCPY_DEFAULT) == 0
        return out


def _collectives():
    rt = _cudart()
    with gang.create(device="cuda", timeout=60) as g:
        r, n = g.rank, g.size
        assert g.backend == "nccl" and g.device.startswith("cuda")

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
