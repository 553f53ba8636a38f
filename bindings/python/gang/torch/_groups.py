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
import itertools
import weakref

import torch
import torch.distributed as dist

import gang_torch

from .. import Gang, create, timeout_ms
from ._c10d import backend_of, group_store, process_group_on
from ._errors import torch_error
from ._store import StoreAdapter

__all__ = ["gang_of", "from_process_group", "as_process_group", "shrink"]

_names = itertools.count()

# Gang -> the torch process group it belongs to (from_process_group's,
# as_process_group's), for as long as the gang lives.
_groups: "weakref.WeakKeyDictionary[Gang, Any]" = weakref.WeakKeyDictionary()

# as_process_group's groups -> the view of the gang their backend runs on.
_views: "weakref.WeakKeyDictionary[Any, Gang]" = weakref.WeakKeyDictionary()


def _default_group() -> Any:
    """The default process group (dist.group.WORLD); ValueError before
    init_process_group, as torch's own lookups raise."""
    pg = dist.group.WORLD
    if pg is None:
        raise ValueError("Default process group has not been initialized, "
                         "please make sure to call init_process_group.")
    return pg


def _group_name(pg: Any) -> str:
    try:
        return str(pg.group_name)
    except RuntimeError:  # a group torch has not named
        return "pg"


def _view(gang: Gang, pg: Any) -> Gang:
    """A Gang on gang's handle that does not own it (closing it is a
    no-op), remembering the process group it belongs to."""
    view = gang.borrow(owner=pg)
    _groups[view] = pg
    return view


def _gang_backend(pg: Any) -> Any:
    try:
        backend = backend_of(pg, "cpu")
    except RuntimeError:
        return None
    return backend if isinstance(backend, gang_torch.GangBackend) else None


def _backend_gang(backend: Any) -> Gang:
    """The CPU gang of a compiled backend, as a Gang that does not own it
    (the backend does) and keeps the backend alive."""
    return Gang.from_address(backend.gang_address, owner=backend)


def gang_of(group: Any = None) -> Gang:
    """The gang a process group of the gang backend runs on (default: the
    default group), as a Gang that does not own it: gang's own API on the
    same ranks and the same connections."""
    pg = group if group is not None else _default_group()
    backend = _gang_backend(pg)
    if backend is None:
        raise ValueError(f"process group {pg.group_name if hasattr(pg, 'group_name') else pg} "
                         f"does not run on the gang backend (gang.torch.from_process_group "
                         f"makes a gang for any group)")
    return _view(_backend_gang(backend), pg)


def from_process_group(group: Any = None, device: Any = None) -> Gang:
    """fairseq2's ProcessGroupGang.from_process_group: the Gang of a torch
    process group (default: the default group). A group on the gang backend
    gives its own gang; a group on another backend (gloo, nccl) a new gang
    of the same ranks, met through the group's store (collective over the
    group), on `device` (default: CPU)."""
    pg = group if group is not None else _default_group()
    if _gang_backend(pg) is not None and (device is None or torch.device(device).type == "cpu"):
        return gang_of(pg)
    device = torch.device(device if device is not None else "cpu")
    adapter = StoreAdapter(dist.PrefixStore("gang/", group_store(pg)))
    try:
        gang = create(device=device, rank=pg.rank(), size=pg.size(),
                      name=f"torch.{_group_name(pg)}", store=adapter)
    except BaseException as exc:
        raise torch_error(exc) from None
    _groups[gang] = pg
    return gang


def as_process_group(gang: Gang) -> Any:
    """fairseq2's Gang.as_process_group: the torch process group of a gang.
    The group it came from (from_process_group), else a new process group
    on the gang backend running on this very gang: made locally, with no
    rendezvous and no collective, so any rank of any gang may ask. It is
    registered with torch.distributed (get_rank(group), get_world_size,
    new_group's bookkeeping) when a default group exists, whose ranks must
    then be the root gang's. Asked again, the same group."""
    pg = _groups.get(gang)
    if pg is not None:
        return pg
    if str(gang.device) != "cpu":
        raise ValueError("as_process_group: a CUDA gang has no process group of its own; "
                         "make the group with torch.distributed (backend 'gang') and take "
                         "its gang with gang.torch.from_process_group")
    name = f"gang.{gang.name}.{next(_names)}"
    # The backend runs on gang's handle without owning it: the group keeps
    # a view of the gang (which keeps the gang) for as long as it lives.
    view = gang.borrow()
    pg = process_group_on(
        lambda pg: gang_torch.GangBackend.on_gang(
            int(view._h), timeout_ms(gang.timeout), name),
        gang.rank, gang.size, name, gang.ranks)
    _views[pg] = view
    _groups[gang] = pg
    return pg


def shrink(group: Any = None, timeout: Any = None) -> Any:
    """After a rank of a "gang" process group was lost (its operations
    raised DistBackendError): the process group of the survivors, made by
    gang's shrink (collective over the survivors; see gang.Gang.shrink).
    Ranked in the order of their old ranks; registered with
    torch.distributed like as_process_group's groups, so DDP, FSDP and
    collectives take it. The old group stays failed: leave it, or destroy
    it with torch.distributed.destroy_process_group(group)."""
    pg = group if group is not None else _default_group()
    backend = _gang_backend(pg)
    if backend is None:
        raise ValueError("shrink: the process group does not run on the gang backend")
    try:
        survivors = _backend_gang(backend).shrink(timeout)
    except BaseException as exc:
        raise torch_error(exc) from None
    return as_process_group(survivors)
