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

Three layers, each using only the one below: ``gang.capi``, the SWIG
module of the C library libgang (one function per C call); this package,
gang's Python API; and ``gang.torch``, the torch.distributed backend, made
of this package's public names alone (:func:`create` with ``store=``,
:func:`find_dtype`, :func:`timeout_ms`, :meth:`Gang.borrow`, ...). fairseq2's
and fairseq's names live in ``gang.compat``.
"""

from . import capi
from ._args import DeviceType, timeout_ms
from ._create import create, detect_env, join, shutdown_stores
from ._dtypes import DType, as_dtype, find_dtype
from ._fake import FakeGang
from ._gang import Gang
from ._ops import ReduceOperation
from ._work import Work
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
from .compat.fairseq import all_gather_list, all_reduce_dict
from .compat.fairseq2 import (
    Device,
    ProcessGroupGang,
    all_sum,
    broadcast_flag,
    create_fsdp_gangs,
    create_parallel_gangs,
    get_default_device,
)
from .topology import (
    Axis,
    Gangs,
    LayoutAfterLoss,
    create_fake_gangs,
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
from . import utils  # noqa: F401  (gang.utils: gang.compat's older name)

__version__ = capi.gang_version_string()

__all__ = [
    "Axis",
    "DType",
    "Device",
    "DeviceType",
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
    "as_dtype",
    "broadcast_flag",
    "create",
    "create_fake_gangs",
    "create_fsdp_gangs",
    "create_parallel_gangs",
    "detect_env",
    "find_dtype",
    "join",
    "get_current_gangs",
    "get_default_device",
    "get_default_gangs",
    "layout",
    "layout_after_loss",
    "maybe_get_current_gangs",
    "set_default_gangs",
    "set_gangs",
    "shutdown_stores",
    "split_after_loss",
    "split_parallel",
    "timeout_ms",
]
