"""gang: process groups ("gangs") and collectives for distributed training.

A gang is a set of processes, each with a rank in [0, size), that run
collectives together. Launch N processes (gangrun, torchrun, SLURM, mpirun,
or by hand with GANG_RANK, GANG_SIZE and GANG_INIT_METHOD) and::

    import numpy as np
    import gang

    with gang.create() as g:                       # rank/size from the env
        grad = np.ones(4, dtype=np.float32)
        g.all_reduce(grad, gang.ReduceOperation.MEAN)
        config = g.broadcast_object({"lr": 0.1})   # rank 0's object

Collectives take torch tensors (CPU, or CUDA on a CUDA gang), numpy arrays
or any C-contiguous buffer, without copies; they block while releasing the
GIL (Ctrl-C interrupts them within a fraction of a second), or return a Work
with ``async_op=True``, and raise :class:`GangError` subclasses. :func:`split_parallel` builds tensor, pipeline,
data, ... parallel gangs; :class:`FakeGang` stands in for a rank without
processes. fairseq2's gang names (create_parallel_gangs, create_fsdp_gangs,
Gangs, get_current_gangs, ...) work as fairseq2's do, defaults included.

This package wraps the C library libgang through SWIG (``gang.capi``, one
function per C call).
"""

from . import capi
from ._buffers import DType
from ._gang import FakeGang, Gang, ReduceOperation, Work, create, detect_env, join
from .errors import (
    GangTypeError,
    GangAbortedError,
    GangError,
    GangInvalidArgumentError,
    GangMismatchError,
    GangPeerLostError,
    GangStoreError,
    GangTimeoutError,
    GangUnavailableError,
)
from .topology import (
    Axis,
    Gangs,
    LayoutAfterLoss,
    create_fake_gangs,
    create_fsdp_gangs,
    create_parallel_gangs,
    get_current_gangs,
    get_default_gangs,
    layout,
    layout_after_loss,
    maybe_get_current_gangs,
    set_default_gangs,
    set_gangs,
    split_after_loss,
    split_parallel,
)
from .utils import (
    Device,
    ProcessGroupGang,
    all_gather_list,
    all_reduce_dict,
    all_sum,
    broadcast_flag,
    get_default_device,
)

__version__ = capi.gang_version_string()

__all__ = [
    "Axis",
    "DType",
    "Device",
    "FakeGang",
    "Gang",
    "Gangs",
    "LayoutAfterLoss",
    "ProcessGroupGang",
    "GangAbortedError",
    "GangError",
    "GangInvalidArgumentError",
    "GangMismatchError",
    "GangPeerLostError",
    "GangStoreError",
    "GangTimeoutError",
    "GangTypeError",
    "GangUnavailableError",
    "ReduceOperation",
    "Work",
    "all_gather_list",
    "all_reduce_dict",
    "all_sum",
    "broadcast_flag",
    "create",
    "create_fake_gangs",
    "create_fsdp_gangs",
    "create_parallel_gangs",
    "detect_env",
    "join",
    "get_current_gangs",
    "get_default_device",
    "get_default_gangs",
    "layout",
    "layout_after_loss",
    "maybe_get_current_gangs",
    "set_default_gangs",
    "set_gangs",
    "split_after_loss",
    "split_parallel",
]
