"""gang as a torch.distributed backend.

Importing this module registers the backend "gang" with torch.distributed
for CPU and CUDA tensors; then one string switches a program over::

    import gang.torch  # noqa: F401  (the wheel's entry point does it too)
    import torch.distributed as dist

    dist.init_process_group("gang")          # torchrun's env://, tcp://, store=
    dist.all_reduce(t)                        # gang's collectives
    model = DistributedDataParallel(model)    # DDP, FSDP, DeviceMesh, new_group

The backend meets its peers through the store torch hands it (no second
port), runs every c10d entry point on gang's collectives, completes
asynchronous work on a thread of its own (DDP's buckets overlap the
backward pass), and raises torch.distributed.DistBackendError with gang's
message (naming the ranks) when a peer is lost or an operation times out.
"""

import atexit

import torch
import torch.distributed as dist

from .. import shutdown_stores

# c10d calls a Python subclass of its Backend class (the PyBackend
# trampoline) from torch 2.15 on; before it, such a class is never called.
MIN_TORCH = (2, 15)

if torch.__version__ < MIN_TORCH:  # a TorchVersion: compares with tuples
    raise ImportError(
        f"gang.torch needs torch {MIN_TORCH[0]}.{MIN_TORCH[1]} or later (its c10d calls a "
        f"Python Backend subclass from then on); this is torch {torch.__version__}. "
        f"gang's own API (import gang) works with any torch")
from ._backend import GangBackend
from ._groups import as_process_group, from_process_group, gang_of, shrink
from ._work import GangWork

__all__ = ["GangBackend", "GangWork", "as_process_group", "from_process_group", "gang_of",
           "register", "shrink"]

NAME = "gang"


def _create(dist_opts, backend_options=None):
    """c10d's creator (extended API): a new GangBackend, or a split of the
    parent's when c10d splits (the default group bound to a device)."""
    split_from = getattr(dist_opts, "split_from", None)
    if isinstance(split_from, GangBackend):
        return split_from.split(dist_opts.store, list(dist_opts.global_ranks_in_group),
                                backend_options)
    return GangBackend(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                       dist_opts.timeout, group_name=getattr(dist_opts, "group_id", "0"),
                       options=backend_options)


def register() -> None:
    """Registers "gang" with torch.distributed (idempotent). Called on
    import, and by torch itself through the wheel's entry point."""
    if NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu", "cuda"])


# gang's threads may call into the store after the interpreter stops
# running Python: from then on the store refuses instead.
atexit.register(shutdown_stores)

register()
