"""libgang from Python through ctypes alone, without the SWIG package: the
way a program that cannot build an extension reaches gang. Loads
libgang.so.0 (GANG_TEST_LIBGANG names the build's copy), declares what it
calls, fills gang_options_t with gang_options_init_v and runs a 2-rank
all-reduce."""

import ctypes
import os

from multirank import run_ranks


class Options(ctypes.Structure):
    """gang_options_t as gang.h declares it (no implicit padding)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_char_p),
        ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("size", ctypes.c_int32),
        ("init_method", ctypes.c_char_p),
        ("store", ctypes.c_void_p),
        ("timeout_ms", ctypes.c_int64),
        ("name", ctypes.c_char_p),
        ("debug", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
    ]


GANG_FLOAT32, GANG_SUM, GANG_OK = 8, 0, 0


def _load():
    lib = ctypes.CDLL(os.environ.get("GANG_TEST_LIBGANG", "libgang.so.0"))
    lib.gang_version_number.restype = ctypes.c_uint
    lib.gang_version_string.restype = ctypes.c_char_p
    lib.gang_last_error.restype = ctypes.c_char_p
    lib.gang_options_init_v.argtypes = [ctypes.POINTER(Options), ctypes.c_size_t]
    lib.gang_create.argtypes = [ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
    lib.gang_rank.argtypes = lib.gang_size.argtypes = [ctypes.c_void_p]
    lib.gang_all_reduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.gang_destroy.argtypes = [ctypes.c_void_p]
    lib.gang_dtype_size.argtypes = [ctypes.c_int]
    return lib


def _all_reduce():
    lib = _load()
    opts = Options()
    lib.gang_options_init_v(ctypes.byref(opts), ctypes.sizeof(opts))
    assert opts.struct_size == ctypes.sizeof(Options) and opts.rank == -1 and opts.size == -1
    opts.timeout_ms = 30000  # rank, size, init_method: from GANG_* (run_ranks)
    g = ctypes.c_void_p()
    status = lib.gang_create(ctypes.byref(opts), ctypes.byref(g))
    assert status == GANG_OK, lib.gang_last_error().decode()
    rank, size = lib.gang_rank(g), lib.gang_size(g)
    x = (ctypes.c_float * 3)(*([rank + 1.0] * 3))
    status = lib.gang_all_reduce(g, x, x, 3, GANG_FLOAT32, GANG_SUM, None)
    assert status == GANG_OK, lib.gang_last_error().decode()
    assert list(x) == [size * (size + 1) / 2] * 3, list(x)
    assert lib.gang_destroy(g) == GANG_OK
    return rank


def test_version_through_ctypes():
    lib = _load()
    major, minor, patch = (int(p) for p in lib.gang_version_string().decode().split("."))
    assert lib.gang_version_number() == major * 10000 + minor * 100 + patch
    assert lib.gang_dtype_size(GANG_FLOAT32) == 4


def test_all_reduce_through_ctypes():
    results = run_ranks(2, _all_reduce)
    assert sorted(r.value for r in results) == [0, 1]
