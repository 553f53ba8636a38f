"""Buffers: how Python objects become gang's (pointer, count, dtype).

Any object with the buffer protocol works: numpy arrays, bytearray,
array.array, memoryview. The dtype comes from the buffer's format character;
16-bit floats whose type Python lacks (bfloat16, or float16 without numpy)
travel as uint16/int16 views with an explicit ``dtype=``.

On a CUDA gang, buffers are device memory described by
``__cuda_array_interface__`` (torch CUDA tensors, CuPy and Numba arrays):
gang takes the address, dtype and shape from it, without copies.
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


class DeviceView(int):
    """Device memory as view() returns it for a CUDA gang: the address (an
    int, which capi takes as the pointer) with the interface's shape and
    element count."""


def _typestr_dtype(typestr: str):
    """The DType of a __cuda_array_interface__ typestr ("<f4"); None if none."""
    order, kind, size = typestr[:1], typestr[1:2], typestr[2:]
    if order not in "<|=" or not size.isdigit() or sys.byteorder != "little":
        return None
    return _BY_KIND.get((kind, int(size)))


def _device_view(obj, writable: bool, dtype, what: str) -> tuple:
    """(DeviceView, DType, count) of an object with __cuda_array_interface__."""
    cai = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    typestr = cai["typestr"]
    address, readonly = cai["data"]
    count = 1
    for n in shape:
        count *= n
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    strides = cai.get("strides")
    if strides is not None and count > 1:
        want, step = [], itemsize
        for n in reversed(shape):
            want.append(step)
            step *= n
        if tuple(strides) != tuple(reversed(want)):
            raise ValueError(f"{what} must be C-contiguous (use .contiguous())")
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked device arrays are not supported")
    if writable and readonly:
        raise ValueError(f"{what} is read-only; gang writes into it")
    natural = _typestr_dtype(typestr)
    if dtype is None:
        if natural is None:
            raise TypeError(f"{what}: device typestr {typestr!r} has no gang dtype{_HINT}")
        dt = natural
    else:
        dt = as_dtype(dtype)
        if natural is not dt and not (itemsize == dt.itemsize == 2 and typestr[1:2] in "iu"):
            raise TypeError(f"{what}: dtype {dt.name.lower()} does not match the device "
                            f"typestr {typestr!r}")
    dv = DeviceView(address or 0)
    dv.shape, dv.count = shape, count
    return dv, dt, count


def view(obj, *, writable: bool = False, dtype=None, what: str = "x", device: bool = False):
    """Borrows obj as a buffer: returns (memoryview, DType, element count),
    or with ``device`` (a CUDA gang) (DeviceView, DType, element count) of
    an object with ``__cuda_array_interface__``.

    Raises TypeError for an object without the buffer protocol or with no
    matching gang dtype (or one that differs from ``dtype``), or memory of
    the wrong side (host for a CUDA gang, device for a CPU gang);
    ValueError for a buffer that is not C-contiguous, or read-only where
    ``writable``.
    """
    on_device = hasattr(obj, "__cuda_array_interface__")
    if device != on_device:
        if device:
            raise TypeError(
                f"{what}: a CUDA gang needs device memory (an object with "
                f"__cuda_array_interface__, such as a torch CUDA tensor), got "
                f"{type(obj).__name__}"
            )
        raise TypeError(f"{what}: device memory on a CPU gang; copy it to the host first "
                        f"(or create the gang with device='cuda')")
    if device:
        return _device_view(obj, writable, dtype, what)
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


def shape_of(mv) -> tuple:
    """The buffer's shape; () for a scalar."""
    return tuple(mv.shape or ())


def new_like(obj, mv: memoryview, shape: tuple):
    """A new, uninitialised buffer of obj's element type.

    numpy arrays give a numpy array of `shape`; everything else gives a flat
    buffer of prod(shape) elements: an array.array where the format is an
    array typecode, else a memoryview over a bytearray (or, for formats
    memoryview cannot cast to, such as 'e', a numpy array).
    """
    if isinstance(mv, DeviceView):
        raise TypeError("gang cannot allocate device memory: pass the output buffer "
                        "(out=...) on a CUDA gang")
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
    if isinstance(mv, DeviceView):
        if len(shape) <= 1:
            return mv.count, 1
        return shape[0], mv.count // shape[0] if shape[0] else 0
    if len(shape) <= 1 or not (_np is not None and isinstance(obj, _np.ndarray)):
        count = mv.nbytes // mv.itemsize if mv.itemsize else 0
        return count, 1
    per_row = 1
    for n in shape[1:]:
        per_row *= n
    return shape[0], per_row
