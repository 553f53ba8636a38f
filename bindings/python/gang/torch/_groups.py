"""Gangs and torch process groups, one the view of the other.

from_process_group() gives the gang.Gang of a process group: the very gang
a "gang" group runs on, or a new gang met through the group's own store for
a group on another backend. as_process_group() gives the process group of
a gang: the one it came from, or a new group on the gang backend that runs
on that gang (no rendezvous, no collective), so that DDP, FSDP,
SyncBatchNorm and DeviceMesh take gangs that gang's own topology carved
(split_parallel, create_parallel_gangs).
"""

from __future__ import annotations

from typing import Any
import datetime
import itertools

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from .. import capi
from .._gang import Gang
from ._backend import GangBackend
from ._errors import torch_error
from ._store import StoreAdapter

__all__ = ["gang_of", "from_process_group", "as_process_group", "shrink"]

_names = itertools.count()


def _view(gang: Gang, pg) -> Gang:
    """A Gang on gang's handle that does not own it (closing it is a
    no-op), remembering the process group it belongs to."""
    view = Gang(gang._h, owner=pg)
    view._follow, view._stream_set = gang._follow, gang._stream_set
    view._process_group = pg
    return view


def _gang_backend(pg):
    try:
        backend = pg._get_backend(torch.device("cpu"))
    except RuntimeError:
        return None
    return backend if isinstance(backend, GangBackend) else None


def gang_of(group: Any = None) -> Gang:
    """The gang a process group of the gang backend runs on (default: the
    default group), as a Gang that does not own it: gang's own API on the
    same ranks and the same connections."""
    pg = group if group is not None else c10d._get_default_group()
    backend = _gang_backend(pg)
    if backend is None:
        raise ValueError(f"process group {pg.group_name if hasattr(pg, 'group_name') else pg} "
                         f"does not run on the gang backend (gang.torch.from_process_group "
                         f"makes a gang for any group)")
    return _view(backend.gang, pg)


def from_process_group(group: Any = None, device: Any = None) -> Gang:
    """fairseq2's ProcessGroupGang.from_process_group: the Gang of a torch
    process group (default: the default group). A group on the gang backend
    gives its own gang; a group on another backend (gloo, nccl) a new gang
    of the same ranks, met through the group's store (collective over the
    group), on `device` (default: CPU)."""
    pg = group if group is not None else c10d._get_default_group()
    if _gang_backend(pg) is not None and (device is None or torch.device(device).type == "cpu"):
        return gang_of(pg)
    store = c10d._world.pg_map[pg][1]
    device = torch.device(device if device is not None else "cpu")
    device_type = capi.GANG_DEVICE_CPU if device.type == "cpu" else capi.GANG_DEVICE_CUDA
    adapter = StoreAdapter(dist.PrefixStore("gang/", store))
    try:
        handle = capi.gang_python_create_on_store(
            adapter, None, device_type, device.index if device.index is not None else -1,
            pg.rank(), pg.size(), 0, f"torch.{c10d._world.pg_names.get(pg, 'pg')}", 0)
    except BaseException as exc:
        raise torch_error(exc) from None
    gang = Gang(handle)
    gang._process_group = pg
    return gang


def as_process_group(gang: Gang) -> Any:
    """fairseq2's Gang.as_process_group: the torch process group of a gang.
    The group it came from (from_process_group), else a new process group
    on the gang backend running on this very gang: made locally, with no
    rendezvous and no collective, so any rank of any gang may ask. It is
    registered with torch.distributed (get_rank(group), get_world_size,
    new_group's bookkeeping) when a default group exists, whose ranks must
    then be the root gang's. Asked again, the same group."""
    pg = getattr(gang, "_process_group", None)
    if pg is not None:
        return pg
    if gang._cuda:
        raise ValueError("as_process_group: a CUDA gang has no process group of its own; "
                         "make the group with torch.distributed (backend 'gang') and take "
                         "its gang with gang.torch.from_process_group")
    name = f"gang.{gang.name}.{next(_names)}"
    timeout = datetime.timedelta(seconds=gang.timeout)
    store = dist.HashStore()  # the group's store: the gang met its peers already
    pg = dist.ProcessGroup(store, gang.rank, gang.size)
    backend = GangBackend(None, gang.rank, gang.size, timeout, group_name=name,
                          gang=_view(gang, pg))
    custom = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(custom)
    pg._register_backend(torch.device("cpu"), custom, backend)
    pg._set_group_name(name)
    if dist.is_initialized() and hasattr(c10d, "_register_pg_in_world"):
        world = dist.get_world_size()
        ranks = gang.ranks
        if max(ranks) < world:
            c10d._register_pg_in_world(pg, "gang", store, name, "cpu:gang",
                                       rank_mapping={g: r for r, g in enumerate(ranks)})
    gang._process_group = pg
    return pg


def shrink(group: Any = None, timeout: Any = None) -> Any:
    """After a rank of a "gang" process group was lost (its operations
    raised DistBackendError): the process group of the survivors, made by
    gang's shrink (collective over the survivors; see gang.Gang.shrink).
    Ranked in the order of their old ranks; registered with
    torch.distributed like as_process_group's groups, so DDP, FSDP and
    collectives take it. The old group stays failed: leave it, or destroy
    it with torch.distributed.destroy_process_group(group)."""
    pg = group if group is not None else c10d._get_default_group()
    backend = _gang_backend(pg)
    if backend is None:
        raise ValueError("shrink: the process group does not run on the gang backend")
    try:
        survivors = backend.gang.shrink(timeout)
    except BaseException as exc:
        raise torch_error(exc) from None
    return as_process_group(survivors)
