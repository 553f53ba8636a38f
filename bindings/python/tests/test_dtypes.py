"""Buffers and dtypes: the format-to-dtype mapping, float16, bfloat16 as
uint16 views, the checks that reject a buffer before any traffic, and gang's one
dtype table against gang.h, numpy and torch."""

import array
import os
import re

import numpy as np
import pytest

import gang
from gang import DType, capi
from gang import ReduceOperation as Op
from multirank import run_ranks

NUMPY_DTYPES = {
    np.int8: DType.INT8, np.uint8: DType.UINT8, np.int16: DType.INT16,
    np.int32: DType.INT32, np.uint32: DType.UINT32,
    np.int64: DType.INT64, np.uint64: DType.UINT64,
    np.float16: DType.FLOAT16, np.float32: DType.FLOAT32, np.float64: DType.FLOAT64,
}


def to_bf16_bits(values) -> np.ndarray:
    """float32 values (exact in bfloat16) as bfloat16 bits."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16_bits(bits) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("np_dtype", list(NUMPY_DTYPES))
def test_numpy_dtypes_map(np_dtype):
    from gang._buffers import view

    assert view(np.zeros(3, dtype=np_dtype))[1] is NUMPY_DTYPES[np_dtype]
    # A fake gang of 3 holding x everywhere: SUM is 3x, through the C library.
    x = np.array([1, 2, 3], dtype=np_dtype)
    with gang.FakeGang(rank=0, size=3) as g:
        g.all_reduce(x)
    np.testing.assert_array_equal(x, np.array([3, 6, 9], dtype=np_dtype))


@pytest.mark.parametrize("typecode,dtype", [
    ("b", DType.INT8), ("B", DType.UINT8), ("i", DType.INT32), ("I", DType.UINT32),
    ("l", DType.INT64), ("L", DType.UINT64), ("q", DType.INT64), ("Q", DType.UINT64),
    ("f", DType.FLOAT32), ("d", DType.FLOAT64),
])
def test_array_typecodes_map(typecode, dtype):
    from gang._buffers import view

    assert view(array.array(typecode, [1]))[1] is dtype


def test_explicit_dtype_and_rejections_single_process():
    from gang._buffers import view

    bits = np.zeros(4, dtype=np.uint16)
    assert view(bits, dtype="bfloat16")[1] is DType.BFLOAT16
    assert view(bits, dtype=DType.FLOAT16)[1] is DType.FLOAT16
    assert view(np.zeros(2, np.float32), dtype=np.float32)[1] is DType.FLOAT32
    with pytest.raises(TypeError, match="bfloat16"):
        view(bits)  # uint16 alone is ambiguous
    with pytest.raises(TypeError):
        view(np.zeros(2, np.float16), dtype="bfloat16")
    with pytest.raises(TypeError):
        view(np.zeros(2, np.float32), dtype="int32")
    assert view(np.zeros(2, np.int16))[1] is DType.INT16
    assert view(np.zeros(2, np.bool_))[1] is DType.BOOL
    with pytest.raises(gang.GangTypeError, match="bfloat16"):
        view(np.zeros(2, np.uint16))  # no uint16 dtype
    with pytest.raises(gang.GangTypeError, match=r"np\.asarray"):
        view([1.0, 2.0])
    with pytest.raises(TypeError):
        view([1.0, 2.0])  # lists have no buffer
    with pytest.raises(TypeError, match="unknown dtype"):
        view(bits, dtype="float8")
    with pytest.raises(gang.GangInvalidArgumentError, match=r"C-contiguous; pass np\.ascontiguousarray"):
        view(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(gang.GangInvalidArgumentError, match="read-only.*np.array"):
        view(b"abcd", writable=True)
    with pytest.raises(gang.GangInvalidArgumentError, match="read-only"):
        view(np.float32(1.0), writable=True)  # numpy scalars are read-only


def test_bool_reduces_as_or_and_and():
    x = np.array([True, False, True])
    with gang.FakeGang(rank=0, size=3) as g:
        g.all_reduce(x)  # or
        np.testing.assert_array_equal(x, [True, False, True])
        g.all_reduce(x, Op.MIN)  # and
        np.testing.assert_array_equal(x, [True, False, True])
        assert g.supports(Op.SUM, "bool") and not g.supports(Op.MEAN, np.bool_)
        with pytest.raises(gang.GangError, match="bool cannot be averaged"):
            g.all_reduce(x, Op.MEAN)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_integer_mean_refused(dtype):
    # torch refuses an integer mean too: SUM and divide says what is meant.
    x = np.arange(4, dtype=dtype)
    with gang.FakeGang(rank=1, size=2) as g:
        assert not g.supports(Op.MEAN, dtype) and g.supports(Op.SUM, dtype)
        for call in (lambda: g.all_reduce(x, Op.MEAN), lambda: g.reduce(x, "mean"),
                     lambda: g.reduce_scatter(x, Op.AVG),
                     lambda: g.reduce_scatterv(x, [1, 3], Op.MEAN)):
            with pytest.raises(gang.GangError, match="cannot be averaged.*GANG_SUM and divide") \
                    as info:
                call()
            assert info.value.status == capi.GANG_ERR_UNSUPPORTED
        np.testing.assert_array_equal(x, np.arange(4))
        g.all_reduce(x, Op.SUM)  # the gang is still usable
        np.testing.assert_array_equal(x, np.arange(4) * 2)


def _float16_bfloat16():
    with gang.create() as g:
        r, n = g.rank, g.size
        # float16, numpy's own type
        x = np.array([0.5, 1.0, 1.5], dtype=np.float16) * (r + 1)
        g.all_reduce(x)
        np.testing.assert_array_equal(x, np.array([0.5, 1.0, 1.5], np.float16) * (n * (n + 1) / 2))
        x = np.full(2, r - 0.5, dtype=np.float16)
        g.all_reduce(x, Op.MAX)
        np.testing.assert_array_equal(x, n - 1.5)
        # bfloat16 as a uint16 view with an explicit dtype
        bits = to_bf16_bits([1.0 + r, -2.0, 0.25 * (r + 1)])
        g.all_reduce(bits, dtype="bfloat16")
        np.testing.assert_array_equal(from_bf16_bits(bits),
                                      [n * (n + 1) / 2, -2.0 * n, 0.25 * n * (n + 1) / 2])
        bits = to_bf16_bits([3.0 * r])
        g.all_reduce(bits, Op.MIN, dtype=DType.BFLOAT16)
        assert from_bf16_bits(bits)[0] == 0.0
        # gathers keep the bits
        parts = g.all_gather_to_list(to_bf16_bits([r + 0.5]), dtype="bfloat16")
        assert [float(from_bf16_bits(p)[0]) for p in parts] == [p + 0.5 for p in range(n)]
        # integers wrap; there is no integer MEAN (refused before any traffic)
        x = np.full(2, 100, dtype=np.int8)
        g.all_reduce(x)
        np.testing.assert_array_equal(x, np.int8(np.int64(100 * n).astype(np.int8)))
        x = np.array([-1 if r == 0 else 0], dtype=np.int32)
        with pytest.raises(gang.GangError, match="int32 cannot be averaged") as info:
            g.all_reduce(x, Op.MEAN)
        assert info.value.status == capi.GANG_ERR_UNSUPPORTED
        assert x[0] == (-1 if r == 0 else 0)
        x = np.array([2**63 + r], dtype=np.uint64)
        g.all_reduce(x, Op.MAX)
        assert int(x[0]) == 2**63 + n - 1


def test_float16_bfloat16_and_integers():
    run_ranks(3, _float16_bfloat16)


def _rejected_before_traffic():
    with gang.create() as g:
        if g.rank == 0:
            f32, i32 = np.zeros(2, np.float32), np.zeros(2, np.int32)
            with pytest.raises(TypeError):
                g.all_gather(np.zeros(4, np.float32), i32)  # dtype mismatch
            with pytest.raises(TypeError):
                g.all_reduce(f32, dtype="bfloat16")
            with pytest.raises(TypeError):
                g.all_reduce(np.zeros(3, np.uint16))
            with pytest.raises(TypeError):
                g.all_reduce("not a buffer")
            with pytest.raises(ValueError, match="C-contiguous"):
                g.all_reduce(np.zeros((3, 3), np.float32)[::2])
            with pytest.raises(ValueError, match="read-only"):
                g.all_reduce(np.frombuffer(bytes(8), dtype=np.float32))
            with pytest.raises(ValueError, match="read-only"):
                g.broadcast(bytes(4))
            with pytest.raises(ValueError, match="elements"):
                g.all_gather(np.zeros(3, np.float32), f32)  # out too small
            with pytest.raises(ValueError):
                g.reduce_scatter(np.zeros(3, np.float32))  # not divisible by size 2
            # The library's own argument errors are ValueErrors too.
            with pytest.raises(gang.GangInvalidArgumentError) as info:
                g.broadcast(f32, source_rank=7)
            assert isinstance(info.value, ValueError)
            assert info.value.status == gang.capi.GANG_ERR_INVALID_ARGUMENT
            assert "out of range" in str(info.value)
        # Nothing above reached the wire: the ranks still agree.
        x = np.array([g.rank + 1.0])
        g.all_reduce(x)
        assert x[0] == 3.0
        g.barrier()


def test_rejected_before_traffic():
    run_ranks(2, _rejected_before_traffic)


# ---- one dtype table (gang/_dtypes.py's TABLE) against everyone else ----------

GANG_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                      "include", "gang", "gang.h")


def _header_dtypes():
    """gang.h's gang_dtype_t: {"INT8": 0, ...}, without GANG_DTYPE_FORCE_32BIT."""
    with open(GANG_H) as f:
        text = f.read()
    body = re.search(r"typedef enum gang_dtype \{(.*?)\} gang_dtype_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {name: int(value, 0) for name, value in re.findall(r"GANG_(\w+)\s*=\s*(\w+)", body)
            if name != "DTYPE_FORCE_32BIT"}


def test_the_dtype_table_is_gang_h():
    from gang._dtypes import TABLE

    assert {dt.name: int(dt) for dt in DType} == _header_dtypes()
    assert [row[0] for row in TABLE] == list(DType), "TABLE has one row per DType, in order"
    for dt, kind, size, names in TABLE:
        assert capi.gang_dtype_size(dt) == size, f"{dt.name}: the C library's size"
        assert names[0] == dt.name.lower()


def test_the_dtype_table_is_numpy():
    from gang._dtypes import TABLE, as_dtype

    for dt, kind, size, names in TABLE:
        if kind == "bf":
            continue  # numpy has none
        np_dtype = np.dtype(names[0])
        assert (np_dtype.kind, np_dtype.itemsize) == (kind, size), dt.name
        assert as_dtype(np_dtype) is dt
        from gang._buffers import view

        assert view(np.zeros(1, np_dtype))[1] is dt, f"{dt.name}: the buffer's format"


def test_the_dtype_table_is_torch():
    torch = pytest.importorskip("torch")
    from gang._dtypes import TABLE, find_dtype

    for dt, kind, size, names in TABLE:
        t_dtype = getattr(torch, names[0], None)
        if t_dtype is None:
            continue  # uint32, uint64 before torch 2.3
        assert torch.empty(0, dtype=t_dtype).element_size() == size, dt.name
        assert t_dtype.is_floating_point == (kind in ("f", "bf")), dt.name
        assert find_dtype(t_dtype) is dt
    assert find_dtype(torch.complex64) is None
