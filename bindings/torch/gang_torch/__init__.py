"""gang's torch.distributed backend, compiled against this torch.

Importing gang_torch registers the backend "gang" (the wheel's entry point
does it when a program asks for "gang"); gang.torch builds its Python API
(as_process_group, shrink, fairseq2's names) on top.
"""

import atexit

import torch
import torch.distributed as dist

import gang  # first: it loads libgang, which _C links against

from . import _C

__all__ = ["GangBackend", "register"]

GangBackend = _C.GangBackend
NAME = "gang"


def _create(dist_opts, backend_options=None):
    """c10d's creator (extended API): a new backend, or a split of the
    parent's when c10d splits one."""
    split_from = getattr(dist_opts, "split_from", None)
    if isinstance(split_from, GangBackend):
        return split_from.split(dist_opts.store, list(dist_opts.global_ranks_in_group),
                                backend_options)
    return GangBackend(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                       gang.timeout_ms(dist_opts.timeout), str(getattr(dist_opts, "group_id", "0")))


def register() -> None:
    """Registers "gang" with torch.distributed (idempotent)."""
    if NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    devices = ["cpu", "cuda"] if _C.cuda_built else ["cpu"]
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=devices)


def _name_groups() -> None:
    """ProcessGroup.name() is c10d's name for the type of a group's default
    backend, which is "custom" for every backend registered from outside
    torch; a group whose collectives run on gang says "gang", as a gloo
    group says "gloo". ProcessGroup's own method is kept for every other
    group."""
    group_class = dist.ProcessGroup
    original = group_class.name
    if getattr(original, "_gang", False):
        return

    def name(self):
        value = original(self)
        if value != "custom":
            return value
        get = getattr(self, "get_backend", None) or self._get_backend
        for device in ("cpu", "cuda"):
            try:
                if isinstance(get(torch.device(device)), GangBackend):
                    return NAME
            except RuntimeError:  # no backend for that device
                continue
        return value

    name._gang = True
    name.__doc__ = original.__doc__
    group_class.name = name


_name_groups()

# Exit never waits on a collective: what is in flight is aborted.
atexit.register(_C.shutdown_all)

register()
