"""gang as a torch.distributed backend.

The backend itself is gang_torch, compiled against the installed torch (the
gang-torch wheel for that torch release, or bindings/torch built in place);
it registers "gang" with torch.distributed, so one string switches a
program over::

    import torch.distributed as dist

    dist.init_process_group("gang")          # torchrun's env://, tcp://, store=
    dist.all_reduce(t)                        # gang's collectives
    model = DistributedDataParallel(model)    # DDP, FSDP, DeviceMesh, new_group

(the wheel's entry point loads it; importing gang.torch does too). This
module is gang's Python API on top: the gang behind a process group
(gang_of, from_process_group), the process group of a gang
(as_process_group), shrinking after a lost rank (shrink), fairseq2's names.
"""

try:
    import gang_torch
except ImportError as exc:
    raise ImportError(
        "gang.torch needs gang_torch, gang's backend compiled for this torch: install the "
        "gang-torch wheel built for your torch release, or build bindings/torch "
        f"(see its README) ({exc})") from exc

from ._groups import as_process_group, from_process_group, gang_of, shrink

GangBackend = gang_torch.GangBackend
register = gang_torch.register

__all__ = ["GangBackend", "as_process_group", "from_process_group", "gang_of", "register",
           "shrink"]

NAME = "gang"

register()
