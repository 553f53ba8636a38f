"""Buffers: how Python objects become gang's (pointer, count, dtype).

Any object with the buffer protocol works: numpy arrays, bytearray,
array.array, memoryview. The dtype comes from the buffer's format character;
16-bit floats whose type Python lacks (bfloat16, or float16 without numpy)
travel as uint16/int16 views with an explicit ``dtype=``.
"""

import array
import enum
import sys

from . import capi

try:  # numpy is optional; outputs mirror numpy inputs when it is there.
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


class DType(enum.IntEnum):
    """Element types (gang_dtype_t)."""

    INT8 = capi.GANG_INT8
    UINT8 = capi.GANG_UINT8
    INT32 = capi.GANG_INT32
    UINT32 = capi.GANG_UINT32
    INT64 = capi.GANG_INT64
    UINT64 = capi.GANG_UINT64
    FLOAT16 = capi.GANG_FLOAT16
    BFLOAT16 = capi.GANG_BFLOAT16
    FLOAT32 = capi.GANG_FLOAT32
    FLOAT64 = capi.GANG_FLOAT64

    @property
    def itemsize(self) -> int:
        return capi.gang_dtype_size(self)


# (kind, itemsize) -> dtype; kind is "i" signed, "u" unsigned, "f" float.
_BY_KIND = {
    ("i", 1): DType.INT8,
    ("u", 1): DType.UINT8,
    ("i", 4): DType.INT32,
    ("u", 4): DType.UINT32,
    ("i", 8): DType.INT64,
    ("u", 8): DType.UINT64,
    ("f", 2): DType.FLOAT16,
    ("f", 4): DType.FLOAT32,
    ("f", 8): DType.FLOAT64,
}
_KINDS = {
    "b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
    "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
    "e": "f", "f": "f", "d": "f",
}
_NATIVE_PREFIXES = "@=" + ("<" if sys.byteorder == "little" else ">!")

_NAMES = {
    "int8": DType.INT8, "uint8": DType.UINT8,
    "int32": DType.INT32, "uint32": DType.UINT32,
    "int64": DType.INT64, "uint64": DType.UINT64,
    "float16": DType.FLOAT16, "half": DType.FLOAT16, "fp16": DType.FLOAT16,
    "bfloat16": DType.BFLOAT16, "bf16": DType.BFLOAT16,
    "float32": DType.FLOAT32, "float": DType.FLOAT32, "fp32": DType.FLOAT32,
    "float64": DType.FLOAT64, "double": DType.FLOAT64, "fp64": DType.FLOAT64,
}

_HINT = (
    " (gang takes int8, uint8, int32, uint32, int64, uint64, float16, "
    "float32 and float64 buffers; pass bfloat16 as a uint16 view with "
    "dtype='bfloat16')"
)


def _kind(fmt: str, itemsize: int):
    """(kind, itemsize) of a native single-element format; None otherwise."""
    if fmt[:1] in _NATIVE_PREFIXES:
        fmt = fmt[1:]
    kind = _KINDS.get(fmt)
    return None if kind is None else (kind, itemsize)


# format string -> DType or None; a format fixes its itemsize. Filled lazily.
_BY_FORMAT = {}


def _natural_dtype(mv: memoryview):
    """The DType a buffer's format stands for; None if gang has none."""
    try:
        return _BY_FORMAT[mv.format]
    except KeyError:
        dt = _BY_FORMAT[mv.format] = _BY_KIND.get(_kind(mv.format, mv.itemsize))
        return dt


def as_dtype(dtype) -> DType:
    """A DType from a DType, an int, a name ("bfloat16") or a numpy dtype."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, int):
        return DType(dtype)
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    name = str(name if name is not None else dtype).lower()
    try:
        return _NAMES[name]
    except KeyError:
        raise TypeError(f"unknown dtype {dtype!r}{_HINT}") from None


def view(obj, *, writable: bool = False, dtype=None, what: str = "x"):
    """Borrows obj as a buffer: returns (memoryview, DType, element count).

    Raises TypeError for an object without the buffer protocol or with no
    matching gang dtype (or one that differs from ``dtype``), ValueError for
    a buffer that is not C-contiguous, or read-only where ``writable``.
    """
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"{what}: expected a buffer (numpy array, bytearray, array.array, "
            f"memoryview), got {type(obj).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    if writable and mv.readonly:
        raise ValueError(f"{what} is read-only; gang writes into it")
    natural = _natural_dtype(mv)
    if dtype is None:
        if natural is None:
            raise TypeError(f"{what}: buffer format {mv.format!r} has no gang dtype{_HINT}")
        return mv, natural, mv.nbytes // mv.itemsize
    dt = as_dtype(dtype)
    # A 16-bit float's bits may come in any 16-bit integer view.
    if natural is not dt and not (mv.itemsize == dt.itemsize == 2 and mv.format[-1:] in "hH"):
        raise TypeError(f"{what}: dtype {dt.name.lower()} does not match the buffer's "
                        f"format {mv.format!r}")
    return mv, dt, mv.nbytes // mv.itemsize


def shape_of(mv: memoryview) -> tuple:
    """The buffer's shape; () for a scalar."""
    return tuple(mv.shape or ())


def new_like(obj, mv: memoryview, shape: tuple):
    """A new, uninitialised buffer of obj's element type.

    numpy arrays give a numpy array of `shape`; everything else gives a flat
    buffer of prod(shape) elements: an array.array where the format is an
    array typecode, else a memoryview over a bytearray (or, for formats
    memoryview cannot cast to, such as 'e', a numpy array).
    """
    if _np is not None and isinstance(obj, _np.ndarray):
        return _np.empty(shape, dtype=obj.dtype)
    count = 1
    for n in shape:
        count *= n
    fmt = mv.format.lstrip(_NATIVE_PREFIXES)
    if fmt in array.typecodes:
        return array.array(fmt, bytes(count * mv.itemsize))
    try:
        return memoryview(bytearray(count * mv.itemsize)).cast(fmt)
    except (TypeError, ValueError):
        if _np is None:
            raise TypeError(f"cannot allocate a buffer of format {mv.format!r}") from None
        return _np.empty(count, dtype=_np.dtype(mv.format))


def rows(obj, mv: memoryview) -> tuple:
    """(leading dimension, elements per row) of a buffer, used by the
    variable-size collectives; a flat or scalar buffer has 1-element rows."""
    shape = shape_of(mv)
    if len(shape) <= 1 or not (_np is not None and isinstance(obj, _np.ndarray)):
        count = mv.nbytes // mv.itemsize if mv.itemsize else 0
        return count, 1
    per_row = 1
    for n in shape[1:]:
        per_row *= n
    return shape[0], per_row
