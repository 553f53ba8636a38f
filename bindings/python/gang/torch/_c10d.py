"""What gang.torch needs of torch.distributed that torch has no public API
for, in one place; each function says why. Everything else in gang.torch
uses torch's public API (dist.group.WORLD, ProcessGroup's get_backend,
group_name, rank and size).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as _py

__all__ = ["backend_of", "group_store", "process_group_on"]


def backend_of(pg: Any, device: Any) -> Any:
    """The backend `pg` runs `device`'s tensors on: ProcessGroup.get_backend
    (public from torch 2.9), _get_backend before it."""
    getter = getattr(pg, "get_backend", None) or pg._get_backend
    return getter(torch.device(device))


def group_store(pg: Any) -> Any:
    """The store torch created `pg` with. A process group's store is kept
    only in c10d's registry of groups (what init_process_group and
    new_group made); torch reads it there with this same private helper."""
    return _py._get_process_group_store(pg)


def process_group_on(make_backend: Callable[[Any], Any], rank: int, size: int, name: str,
                     global_ranks: list[int]) -> Any:
    """A torch process group whose collectives run on make_backend(group)
    (a GangBackend), made locally: no store, rendezvous or collective.
    torch's public ways to make a group (init_process_group, new_group,
    split_group) all run a rendezvous or a collective over the parent
    group; a group around an existing backend is made as torch makes its
    own, with ProcessGroup's private setters. It is registered with
    torch.distributed (get_rank(group), get_world_size, new_group's
    bookkeeping) when a default group exists and holds every rank of
    `global_ranks` (this group's ranks in the default group)."""
    store = dist.HashStore()  # the group's store: its gang met its peers already
    pg = dist.ProcessGroup(store, rank, size)
    custom = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(custom)
    pg._register_backend(torch.device("cpu"), custom, make_backend(pg))
    pg._set_group_name(name)
    if dist.is_initialized() and max(global_ranks) < dist.get_world_size():
        _register(pg, store, name, {g: r for r, g in enumerate(global_ranks)})
    return pg


def _register(pg: Any, store: Any, name: str, rank_mapping: dict[int, int]) -> None:
    """Enters pg in c10d's registry of groups, as new_group does: with
    torch's own helper where it has one (2.10 on), else in the same tables
    that helper fills."""
    if hasattr(_py, "_register_pg_in_world"):
        _py._register_pg_in_world(pg, "gang", store, name, "cpu:gang", rank_mapping=rank_mapping)
        return
    world = _py._world
    world.pg_map[pg] = ("gang", store)
    world.pg_names[pg] = name
    world.pg_backend_config[pg] = "cpu:gang"
    _py._register_process_group(name, pg)
    world.pg_group_ranks[pg] = rank_mapping
    tag = f"ptd:{name}"
    world.tags_to_pg.setdefault(tag, []).append(pg)
    world.pg_to_tag[pg] = tag
