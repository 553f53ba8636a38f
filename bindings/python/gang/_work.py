"""Work: an operation issued with async_op=True."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional
import time

from . import capi, errors
from ._args import Timeout, timeout_ms

if TYPE_CHECKING:
    from ._gang import Gang

__all__ = ["Work"]


class Work:
    """An operation issued with ``async_op=True``.

    The buffers the operation reads and writes are borrowed until it
    completes: the Work keeps them alive (and, for numpy arrays, unresizable)
    until then. Dropping a Work waits for its operation.
    """

    __slots__ = ("_handle", "_result", "_keep", "_gang")

    def __init__(self, handle: Any, result: Any, keep: Any, gang: Optional[Gang] = None) -> None:
        self._handle = handle
        self._result = result
        self._keep = keep
        self._gang = gang

    def wait(self, timeout: Timeout = None) -> bool:
        """Waits for the operation; True once it has completed.

        With a timeout (seconds, or a timedelta), returns False if it is
        still running then. Raises the operation's GangError if it failed. Waits in
        slices of 100 ms: Ctrl-C raises KeyboardInterrupt at once, after
        aborting the gang (as a blocking collective does).
        """
        handle = self._handle
        if handle is None:
            return True
        # 0 (or a zero timedelta) tests once; any other timeout waits at
        # least the 1 ms timeout_ms rounds it up to.
        end = None if timeout is None else (
            time.monotonic() + (timeout_ms(timeout) / 1000 if timeout else 0.0))
        try:
            while True:
                left = 100 if end is None else int(max(0.0, end - time.monotonic()) * 1000)
                done = capi.gang_work_wait(handle, min(left, 100))
                if done or (end is not None and time.monotonic() >= end):
                    break
        except errors.GangError:
            self._keep = None
            raise
        except KeyboardInterrupt:
            gang = self._gang
            if gang is not None and not gang.closed:
                capi.gang_abort(gang._h)
            raise
        if done:
            self._keep = None
        return done

    def __del__(self) -> None:
        # Destroying the handle waits for the operation; only then may the
        # buffers in _keep go.
        self._handle = None

    def is_completed(self) -> bool:
        """True once the operation has ended, successfully or not (wait()
        raises its error); never blocks."""
        handle = self._handle
        return handle is None or capi.gang_work_test(handle) != capi.GANG_IN_PROGRESS

    def result(self) -> Any:
        """Waits for the operation and returns its output buffer."""
        self.wait()
        return self._result

    def __repr__(self):
        return f"<gang.Work completed={self.is_completed()}>"
