"""gang's errors as torch.distributed raises them."""

import torch.distributed as dist

from .. import GangError, GangInvalidArgumentError

__all__ = ["torch_error"]

# What c10d raises for a failure of the backend: DistBackendError (torch
# 2.1 on), whose message is gang's own (it names the ranks).
_BACKEND_ERROR = getattr(dist, "DistBackendError", RuntimeError)


def torch_error(exc: BaseException) -> BaseException:
    """The exception c10d's callers expect for exc: gang's failures (a lost
    peer, a timeout, an abort, a mismatch, the store) as DistBackendError,
    bad arguments as ValueError/TypeError (gang's own classes already are),
    anything else as it is."""
    if isinstance(exc, GangInvalidArgumentError):
        return exc
    if isinstance(exc, GangError):
        converted = _BACKEND_ERROR(f"gang: {exc} [{exc.status_name}]")
        converted.__cause__ = exc
        return converted
    return exc
