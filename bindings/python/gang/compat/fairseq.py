"""fairseq's names for gang's API (fairseq.distributed.utils)."""

from __future__ import annotations

from typing import Any, Optional
import numbers
import pickle

from .._buffers import _np
from .._gang import Gang
from ..errors import GangInvalidArgumentError

__all__ = ["all_gather_list", "all_reduce_dict"]


def all_reduce_dict(data: Any, gang: Gang) -> dict[Any, Any]:
    """fairseq: sums every value of `data` over the gang.

    Values are numbers or numpy arrays; every rank passes the same keys with
    the same shapes. Numbers travel together in one float64 all-reduce and
    come back as floats; arrays are summed into new arrays.
    """
    keys = list(data)
    numbers_ = [k for k in keys if isinstance(data[k], numbers.Number)]
    result = {}
    if numbers_:
        if _np is not None:
            packed = _np.array([float(data[k]) for k in numbers_], dtype=_np.float64)
        else:
            import array

            packed = array.array("d", [float(data[k]) for k in numbers_])
        gang.all_reduce(packed)
        result.update(zip(numbers_, (float(v) for v in packed)))
    for key in keys:
        if key not in result:
            result[key] = gang.all_reduce(_np.array(data[key], copy=True))
    return {key: result[key] for key in keys}


def all_gather_list(data: Any, gang: Gang, max_size: Optional[int] = None) -> list[Any]:
    """fairseq: every rank's picklable `data`, in rank order.

    Payloads may have any size (fairseq's fixed buffer is not needed);
    max_size, if given, still bounds this rank's pickled payload.
    """
    if max_size is not None and len(pickle.dumps(data)) > max_size:
        raise GangInvalidArgumentError(f"all_gather_list: encoded data exceeds max_size={max_size}")
    return gang.all_gather_object(data)
