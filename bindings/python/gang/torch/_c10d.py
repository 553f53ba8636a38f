"""What gang.torch needs of torch.distributed that torch has no public API
for (torch 2.15), in one place; each function says why. Everything else in
gang.torch uses torch's public API (dist.group.WORLD, ProcessGroup's
get_backend, group_name, rank and size, dist.Work, dist.ReduceOp).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _C
from torch.distributed import distributed_c10d as _py

__all__ = ["Backend", "group_store", "process_group_on", "work_from_future"]

# The C++ Backend class a Python backend subclasses (c10d's PyBackend
# trampoline calls the subclass's overrides): torch exports it only as
# dist._Backend, its own tests reach it here as gang does.
Backend = _C.Backend

# A Work completed by a torch.futures.Future, as torch's own Python backends
# make theirs (torch/testing/_internal/distributed/multi_threaded_pg.py,
# test/distributed/test_c10d_pypg.py).
work_from_future = _C._create_work_from_future


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
    if (dist.is_initialized() and hasattr(_py, "_register_pg_in_world")
            and max(global_ranks) < dist.get_world_size()):
        _py._register_pg_in_world(pg, "gang", store, name, "cpu:gang",
                                  rank_mapping={g: r for r, g in enumerate(global_ranks)})
    return pg
