"""gang's element types: the DType enum and one table that every mapping of
other libraries' types (buffer formats, numpy, torch and DLPack dtypes,
names) onto it comes from."""

from __future__ import annotations

from typing import Any, Optional
import enum

from . import capi
from .errors import GangTypeError

__all__ = ["DType", "as_dtype", "find_dtype"]


class DType(enum.IntEnum):
    """Element types (gang_dtype_t)."""

    INT8 = capi.GANG_INT8
    UINT8 = capi.GANG_UINT8
    INT16 = capi.GANG_INT16
    INT32 = capi.GANG_INT32
    UINT32 = capi.GANG_UINT32
    INT64 = capi.GANG_INT64
    UINT64 = capi.GANG_UINT64
    FLOAT16 = capi.GANG_FLOAT16
    BFLOAT16 = capi.GANG_BFLOAT16
    FLOAT32 = capi.GANG_FLOAT32
    FLOAT64 = capi.GANG_FLOAT64
    BOOL = capi.GANG_BOOL

    @property
    def itemsize(self) -> int:
        return int(capi.gang_dtype_size(self))


# One row per DType, in its order: the kind ("i" signed, "u" unsigned, "f"
# float, "bf" bfloat, "b" bool), the size in bytes, and the names numpy,
# torch and users give it (the first is numpy's and torch's). The tables
# below are made from it; tests/test_dtypes.py checks it against gang.h,
# the C library's sizes, numpy and torch.
TABLE = (
    (DType.INT8, "i", 1, ("int8",)),
    (DType.UINT8, "u", 1, ("uint8",)),
    (DType.INT16, "i", 2, ("int16", "short")),
    (DType.INT32, "i", 4, ("int32", "int")),
    (DType.UINT32, "u", 4, ("uint32",)),
    (DType.INT64, "i", 8, ("int64", "long")),
    (DType.UINT64, "u", 8, ("uint64",)),
    (DType.FLOAT16, "f", 2, ("float16", "half", "fp16")),
    (DType.BFLOAT16, "bf", 2, ("bfloat16", "bf16")),
    (DType.FLOAT32, "f", 4, ("float32", "float", "fp32")),
    (DType.FLOAT64, "f", 8, ("float64", "double", "fp64")),
    (DType.BOOL, "b", 1, ("bool", "bool_")),
)

# (kind, itemsize) -> DType: buffer formats, __cuda_array_interface__
# typestrs and DLPack dtypes are read as a kind and a size.
BY_KIND = {(kind, size): dt for dt, kind, size, _ in TABLE}

# Names -> DType: numpy's and torch's dtypes by their names, and strings.
BY_NAME = {name: dt for dt, _, _, names in TABLE for name in names}

HINT = (f" (gang takes {', '.join(row[3][0] for row in TABLE[:-1])} and {TABLE[-1][3][0]}; "
        f"numpy has no bfloat16: pass a uint16 view with dtype='bfloat16', or a torch tensor)")


def as_dtype(dtype: Any) -> DType:
    """A DType from a DType, an int, a name ("bfloat16"), a numpy dtype or
    a torch dtype (torch.bfloat16). Raises GangTypeError (a TypeError) for
    a type gang has none for."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        try:
            return DType(dtype)
        except ValueError:
            raise GangTypeError(f"dtype {dtype} is not a gang dtype{HINT}") from None
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    name = str(name if name is not None else dtype).lower()
    if name.startswith("torch."):
        name = name[len("torch."):]
    try:
        return BY_NAME[name]
    except KeyError:
        raise GangTypeError(f"unknown dtype {dtype!r}{HINT}") from None


# dtype object -> DType or None, learned as they come (torch's dtypes).
_FOUND: dict[Any, Optional[DType]] = {}


def find_dtype(dtype: Any) -> Optional[DType]:
    """as_dtype(dtype), or None where gang has no such type (a torch
    complex or float8 dtype, say): no exception, and quick for a dtype
    object seen before (the answer is remembered)."""
    try:
        return _FOUND[dtype]
    except KeyError:
        pass
    except TypeError:  # unhashable: asked each time
        try:
            return as_dtype(dtype)
        except GangTypeError:
            return None
    try:
        found: Optional[DType] = as_dtype(dtype)
    except GangTypeError:
        found = None
    _FOUND[dtype] = found
    return found
