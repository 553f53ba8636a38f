"""Helpers in the shape fairseq and fairseq2 training code calls them."""

from __future__ import annotations

from typing import Any, Optional
import numbers
import pickle

from ._buffers import _np, is_tensor
from ._gang import Gang, ReduceOperation, as_device, create
from .errors import GangInvalidArgumentError

__all__ = [
    "Device",
    "ProcessGroupGang",
    "all_gather_list",
    "all_reduce_dict",
    "all_sum",
    "broadcast_flag",
    "get_default_device",
]


def broadcast_flag(gang: Gang, flag: bool, source_rank: int = 0) -> bool:
    """fairseq2: source_rank's flag on every rank."""
    return gang.broadcast_flag(flag, source_rank)


def all_sum(gang: Gang, value: float) -> float:
    """fairseq2: the sum of every rank's value, as a tensor on gang.device
    when torch can be imported (a number becomes a 0-d tensor of the dtype
    torch.tensor(value) gives, float32 or int64, as in fairseq2; a tensor
    gives a new tensor, the input left alone). Without torch, a float (the
    sum in float64)."""
    if not is_tensor(value):
        device = gang.device
        if isinstance(device, str):  # no torch
            return gang.all_sum(value)
        import torch

        value = torch.tensor(value, device=device)
    total = value.detach().clone()
    gang.all_reduce(total, ReduceOperation.SUM)
    return total


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


def Device(spec="cpu"):
    """fairseq2's Device (a torch.device): "cpu", "cuda", "cuda:N". Without
    torch, the spec itself, which gang takes wherever it takes a device."""
    return as_device(spec)


def get_default_device() -> Any:
    """fairseq2's default device: CUDA device local_rank % devices when
    torch sees CUDA, else the CPU."""
    try:
        import torch
    except ImportError:
        return Device("cpu")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return Device("cpu")
    from ._gang import detect_env

    local_rank = max(detect_env()["local_rank"], 0)
    return Device(f"cuda:{local_rank % torch.cuda.device_count()}")


class ProcessGroupGang:
    """fairseq2's ProcessGroupGang entry points, giving gang's own gangs.
    Their as_process_group() gives a torch process group on the same gang
    (gang.torch), and from_process_group() a gang of a torch group."""

    @staticmethod
    def from_process_group(pg: Any, device: Any = None) -> Gang:
        """The gang of torch process group pg: the gang itself for a group
        on the gang backend, else a new gang of pg's ranks met through pg's
        store (collective over pg). See gang.torch.from_process_group."""
        from .torch import from_process_group

        return from_process_group(pg, device)

    @staticmethod
    def create_default_process_group(device: Any = None, *, timeout: Any = None,
                                     **_ignored: Any) -> Gang:
        """The root gang of the launcher's processes on `device` (default:
        get_default_device()). Collective over every rank. Arguments of
        fairseq2's that concern torch.distributed alone (high_priority,
        num_threads, ok_initialized, ...) are accepted and ignored."""
        device = get_default_device() if device is None else device
        return create(device=str(device), timeout=timeout)

    init_default_process_group = create_default_process_group
