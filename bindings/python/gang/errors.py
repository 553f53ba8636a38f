"""Exceptions raised by gang.

Every failed C call raises one of these, carrying the call's status
(``.status``, a negative ``GANG_ERR_*`` value) and the library's detailed
message (``gang_last_error()``, read on the thread that made the call)::

    GangError (RuntimeError)
     +-- GangTimeoutError (also TimeoutError)
     +-- GangPeerLostError
     +-- GangAbortedError
     +-- GangMismatchError
     +-- GangStoreError
     +-- GangUnavailableError
     +-- GangInvalidArgumentError (also ValueError)
          +-- GangTypeError (also TypeError)

An invalid argument is therefore a ``ValueError`` as well (and one of the
wrong type a ``TypeError``), and a timeout a ``TimeoutError``. Arguments are
checked on the calling rank before anything is sent, so an argument error
leaves the gang usable; but the other ranks, which passed their checks, are
left waiting in the operation until the gang's timeout, unless this rank
calls ``abort()`` (their operation then fails at once with
GangPeerLostError) or retries with a correct argument. After any error raised by an operation that was issued
(timeout, lost peer, mismatch, abort) the gang is failed: later operations
raise GangAbortedError at once; close it.
"""

from . import capi

__all__ = [
    "GangError",
    "GangTimeoutError",
    "GangPeerLostError",
    "GangAbortedError",
    "GangMismatchError",
    "GangStoreError",
    "GangUnavailableError",
    "GangInvalidArgumentError",
    "GangTypeError",
]


class GangError(RuntimeError):
    """A gang call failed.

    Attributes:
        status: the C status, e.g. ``capi.GANG_ERR_TIMEOUT`` (-4).
        status_name: its name, e.g. ``"GANG_ERR_TIMEOUT"``.
        message: the library's message for the failed call.
    """

    def __init__(self, message: str, status: int = capi.GANG_ERR_INTERNAL):
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def status_name(self) -> str:
        return capi.gang_status_name(self.status)


class GangTimeoutError(GangError, TimeoutError):
    """An operation outlived the gang's timeout."""


class GangPeerLostError(GangError):
    """A peer died, closed its connection or aborted."""


class GangAbortedError(GangError):
    """The gang was aborted, or failed earlier; close it."""


class GangMismatchError(GangError):
    """Ranks called different operations (checked always, from each operation's
    signature, before any payload moves)."""


class GangStoreError(GangError):
    """The rendezvous store was unreachable or answered wrongly."""


class GangUnavailableError(GangError):
    """The backend or device is not available in this build or machine."""


class GangInvalidArgumentError(GangError, ValueError):
    """An argument was rejected before any traffic, by the package or the
    library; the message says which and how to fix it."""

    def __init__(self, message: str, status: int = capi.GANG_ERR_INVALID_ARGUMENT):
        super().__init__(message, status)


class GangTypeError(GangInvalidArgumentError, TypeError):
    """An argument of a type gang cannot use (a list for a buffer, an
    unknown dtype or reduction, a float for a rank)."""


_BY_STATUS = {
    capi.GANG_ERR_INVALID_ARGUMENT: GangInvalidArgumentError,
    capi.GANG_ERR_UNAVAILABLE: GangUnavailableError,
    capi.GANG_ERR_TIMEOUT: GangTimeoutError,
    capi.GANG_ERR_PEER_LOST: GangPeerLostError,
    capi.GANG_ERR_MISMATCH: GangMismatchError,
    capi.GANG_ERR_ABORTED: GangAbortedError,
    capi.GANG_ERR_STORE: GangStoreError,
}


def error_from_status(status: int, message: str, type_error: int = 0) -> GangError:
    """The exception for a failed call's status and message; type_error
    says capi could not convert an argument (GangTypeError)."""
    if type_error:
        return GangTypeError(message, status)
    return _BY_STATUS.get(status, GangError)(message, status)


# From now on the C wrappers raise the classes above.
capi.set_error_factory(error_from_status)
