"""fairseq2's names for gang's API: its Gang helpers, Device,
ProcessGroupGang and the functions that carve parallel gangs, with
fairseq2's signatures and defaults (gang's own are split_parallel and
create). The package exports them all (gang.create_parallel_gangs, ...)."""

from __future__ import annotations

from typing import Any, Optional
import importlib

from .._args import _index as _index_arg
from .._args import as_device
from .._buffers import is_tensor
from .._create import create, detect_env
from .._fake import FakeGang
from .._gang import Gang
from .._ops import ReduceOperation
from ..errors import GangInvalidArgumentError
from ..topology import Gangs, _split_parallel

__all__ = [
    "Device",
    "ProcessGroupGang",
    "all_sum",
    "broadcast_flag",
    "create_fsdp_gangs",
    "create_parallel_gangs",
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
        # gang.torch, above gang, reached by name when asked (see
        # Gang.as_process_group).
        torch_layer = importlib.import_module(f"{__package__.rpartition('.')[0]}.torch")
        return torch_layer.from_process_group(pg, device)

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


def create_parallel_gangs(root: Gang, *, tp_size: int = 1,
                          tensor_parallel_size: Optional[int] = None) -> Gangs:
    """fairseq2's data and tensor parallel gangs: tp gangs of tp_size
    consecutive ranks, dp across them, and as in fairseq2 rdp = dp (data
    replicated over the whole dp gang) and sdp, pp of one rank; see
    :func:`create_fsdp_gangs` for sharding. Collective over root. The
    Gangs owns root: close() closes it too.
    (tensor_parallel_size is tp_size's older name.)"""
    if tensor_parallel_size is not None:
        tp_size = tensor_parallel_size
    return _split_parallel(root, dict(tp=tp_size, sdp=1), owns_root=True)


def create_fsdp_gangs(gangs: Gangs, intra_node_size: Optional[int] = None, *,
                      intra_node: bool = False) -> Gangs:
    """fairseq2's FSDP gangs from the Gangs of create_parallel_gangs (or
    split_parallel, or Gangs(...)); returns new Gangs with the same root,
    dp, tp and pp, and:

    - intra_node_size None (fairseq2's default): full sharding, sdp the
      whole dp gang and rdp of one rank;
    - intra_node_size k > 1 (hybrid sharding; k must divide dp.size): sdp
      the blocks of k consecutive dp ranks (a node's), rdp across them
      (the same position on every node).

    The older spelling intra_node=True (also positionally, a bool) takes k
    from the launcher's local size divided by tp*cp*pp. Collective over
    root (over dp for Gangs(...)); the new Gangs owns root as fairseq2's do
    (close one of them: root is shared)."""
    if isinstance(intra_node_size, bool):  # the older positional intra_node
        intra_node, intra_node_size = intra_node_size, None
    if intra_node_size is not None:
        intra_node_size = _index_arg("intra_node_size", intra_node_size)
        if intra_node_size <= 1:
            raise GangInvalidArgumentError(
                f"intra_node_size must be greater than 1, got {intra_node_size}")
    if intra_node_size is None and intra_node:
        local = detect_env()["local_size"]
        if local is None or local < 1:
            raise GangInvalidArgumentError(
                "create_fsdp_gangs(intra_node=True): the launcher does not say how many "
                "ranks a node runs (LOCAL_WORLD_SIZE, GANG_LOCAL_SIZE); pass intra_node_size")
        model = gangs.root.size // gangs.dp.size  # tp*cp*pp ranks hold one dp rank's model
        intra_node_size = max(1, local // model)
    if gangs._config is not None:
        config = dict(gangs._config, sdp=intra_node_size)
        return _split_parallel(gangs.root, config, owns_root=True)
    # Gangs given as they are: the dp gang carved by itself.
    axes = {name: getattr(gangs, name) for name in Gangs._AXES}
    if intra_node_size is None:
        fsdp = Gangs(**dict(axes, sdp=gangs.dp, rdp=FakeGang(gangs.dp.device)))
        fsdp._made.append(fsdp.rdp)
        return fsdp
    inner = _split_parallel(gangs.dp, dict(sdp=intra_node_size))
    fsdp = Gangs(**dict(axes, sdp=inner.sdp, rdp=inner.rdp))
    fsdp._parts.append(inner)
    return fsdp
