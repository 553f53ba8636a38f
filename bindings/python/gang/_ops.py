"""Reductions: the ReduceOperation enum and the names one may be given by."""

from __future__ import annotations

from typing import Any, Union
import enum

from . import capi
from .errors import GangTypeError

__all__ = ["ReduceOperation"]


class ReduceOperation(enum.IntEnum):
    """Reductions (gang_op_t). MEAN is also spelled AVG; it averages floating
    types only: MEAN of integers or bool raises GangError (status
    GANG_ERR_UNSUPPORTED, as torch refuses it) rather than truncating; use
    SUM and divide."""

    SUM = capi.GANG_SUM
    MEAN = capi.GANG_AVG
    PRODUCT = capi.GANG_PROD
    MIN = capi.GANG_MIN
    MAX = capi.GANG_MAX
    AVG = capi.GANG_AVG


# Names a reduction may be given by, as strings or by their .name
# (torch.distributed.ReduceOp, fairseq2's ReduceOperation).
_OP_NAMES = {
    "sum": ReduceOperation.SUM, "mean": ReduceOperation.MEAN, "avg": ReduceOperation.AVG,
    "product": ReduceOperation.PRODUCT, "prod": ReduceOperation.PRODUCT,
    "min": ReduceOperation.MIN, "max": ReduceOperation.MAX,
}


# What a reduction operation may be given as.
_Op = Union[ReduceOperation, int, str]


def _op(op: Any) -> ReduceOperation:
    """A ReduceOperation from one, its int, a name ("sum", "mean") or an
    enum of another library with such a name (torch's ReduceOp.SUM)."""
    if type(op) is ReduceOperation:
        return op
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return ReduceOperation(op)
        except ValueError:
            pass
    else:
        name = op if isinstance(op, str) else getattr(op, "name", None) or str(op)
        found = _OP_NAMES.get(str(name).rsplit(".", 1)[-1].lower())
        if found is not None:
            return found
    raise GangTypeError(f"op: {op!r} is not a reduction; use gang.ReduceOperation.SUM, "
                        f"MEAN, PRODUCT, MIN or MAX (or their names, 'sum', ...)")
