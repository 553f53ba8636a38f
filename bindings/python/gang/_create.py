"""Making gangs: create(), join(), and what they read from the environment."""

from __future__ import annotations

from typing import Any, Optional

from . import capi
from ._args import Timeout, _index, _parse_device, timeout_ms
from ._gang import Gang
from .errors import GangInvalidArgumentError

__all__ = ["create", "detect_env", "join", "shutdown_stores"]


def create(backend: str = "auto", device: Any = "cpu", rank: Optional[int] = None,
           size: Optional[int] = None, init_method: Optional[str] = None,
           timeout: Timeout = None, name: Optional[str] = None, debug: bool = False, *,
           store: Any = None) -> Gang:
    """Creates the root gang; collective over all `size` ranks.

    Args:
        backend: "auto" (on CPU: shared memory within a host, Gloo across
            hosts, both where a job spans hosts with several ranks on
            some; NCCL for CUDA), "shm", "gloo", "nccl", "fake" or a
            plugin's name.
        device: "cpu", "cuda:N" (also a torch.device) or "cuda" (the
            backend picks the GPU: the local rank modulo the visible GPUs).
            Operands on another GPU are refused.
        rank, size: this process's rank and the number of ranks; None reads
            them from the launcher's environment (GANG_RANK/GANG_SIZE,
            torchrun, SLURM, Open MPI, PMI).
        init_method: "tcp://host:port" (rank 0 serves the store there),
            "file:///dir", "memory://name", or torch's "env://" (the store
            at MASTER_ADDR:MASTER_PORT); None: GANG_INIT_METHOD.
        timeout: seconds (or a timedelta) bounding every operation; None:
            GANG_TIMEOUT_MS, else 600 s.
        name: shown in logs and errors; default "root".
        debug: True checks that every rank issues the same operations
            (GangMismatchError otherwise); False leaves it to GANG_DEBUG.
        store: instead of init_method, an object through which the ranks
            meet (gang.torch gives it torch.distributed's store); rank and
            size are then required. It answers, from any thread:
            ``set(key: str, value: bytes)``; ``get(key: str, timeout_ms:
            int)``, the value or None when it is not set in time;
            ``add(key: str, delta: int) -> int``; ``delete(key: str)`` (a
            missing key is no error); ``check(keys: list[str]) -> bool``;
            ``wait(keys: list[str], timeout_ms: int) -> bool``, False when
            the time ran out. An exception it raises fails the operation
            with GangStoreError. The gang keeps the object until it is
            closed; see :func:`shutdown_stores`.
    """
    device_type, device_index = _parse_device(device)
    backend_name = None if backend in (None, "auto") else backend
    if store is not None:
        if rank is None or size is None or init_method is not None:
            raise GangInvalidArgumentError(
                "create(store=...): give rank and size, and no init_method (the store is "
                "where the ranks meet)")
        handle = capi.gang_python_create_on_store(
            store, backend_name, device_type, device_index, _index("rank", rank),
            _index("size", size), timeout_ms(timeout), name, 1 if debug else 0)
        return Gang(handle)
    handle = capi.gang_bind_create(
        backend_name,
        device_type,
        device_index,
        -1 if rank is None else rank,
        -1 if size is None else size,
        init_method,
        timeout_ms(timeout),
        name,
        1 if debug else 0,
    )
    return Gang(handle)


def shutdown_stores() -> None:
    """From now on no gang calls into a store object given to
    create(store=...): each call fails with GangStoreError instead. For an
    atexit hook (gang.torch registers one): gang's threads may use a store
    after the interpreter stopped running Python. Waits up to 5 s for the
    calls already in Python to return."""
    capi.gang_python_store_shutdown()


def join(name: str = "root", *, init_method: Optional[str] = None, timeout: Timeout = None,
         device: Any = "cpu", backend: str = "auto") -> Gang:
    """Asks to join the running gang `name` (a replacement process) through
    the job's store (init_method, or the launch environment as create()
    reads it) and blocks until its members admit it with Gang.grow(); the
    new gang is returned, this process ranked after the members. Raises
    GangTimeoutError when nobody admitted it within `timeout` (the request
    is then withdrawn). A process that `gangrun --replace-failed` started
    in place of a failed rank (os.environ["GANG_JOIN"] == "1") calls it
    with no arguments: the job's store is in its environment."""
    device_type, device_index = _parse_device(device)
    return Gang(capi.gang_bind_join(None if backend in (None, "auto") else backend,
                                    device_type, device_index, init_method,
                                    timeout_ms(timeout), name))


def detect_env() -> dict[str, Any]:
    """What gang reads from the launch environment: rank, size, local_rank,
    local_size, node_rank, num_nodes, master_addr, master_port (-1 or ""
    where unknown) and source ("gang", "torchrun", "slurm", "openmpi",
    "pmi" or "none")."""
    return capi.gang_env_detect()
