"""The Work c10d gets back from the gang backend, and the thread that
completes the asynchronous ones.

A blocking call (async_op=False) runs on the caller's thread and returns
torch's own Work of a completed Future (completed(), as torch's Python
backends make theirs). An operation issued with async_op (c10d's default
for the calls DDP makes) is handed to gang at once and runs on gang's own
work path; a Completer thread per backend waits for gang's works in the
order they were issued (gang completes a gang's operations in order), runs
what must follow (the copies out of a staging buffer) and completes the
GangWork and its torch.futures.Future, whose callbacks (DDP's comm hooks)
run there.

GangWork is written out rather than a Work of a Future because torch's
(FutureWrappingWork) cannot do what c10d's callers expect of an operation
in flight: its wait() returns True when the operation failed instead of
raising the error, refuses a finite timeout instead of raising
DistBackendError when it runs out, cannot abort the gang on Ctrl-C, and has
no sequence number.
"""

import atexit
import queue
import threading
import weakref

import torch
import torch.distributed as dist

from .. import timeout_ms
from ._c10d import work_from_future
from ._errors import torch_error

__all__ = ["GangWork", "Completer", "completed"]


def completed(result):
    """The Work of a blocking call: done, with `result` (the list of
    output tensors)."""
    future = torch.futures.Future()
    future.set_result(result)
    return work_from_future(future)


def _seconds(timeout):
    """c10d's wait timeout (a timedelta; zero means none) in seconds, or
    None."""
    return timeout_ms(timeout) / 1000 if timeout else None


class _Failed:
    """The value of a failed work's inner future: its error."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _unwrap(base):
    value = base.value()
    if isinstance(value, _Failed):
        raise value.error
    return value


class GangWork(dist.Work):
    """One operation of the gang backend: c10d's Work (wait, is_completed,
    is_success, exception, result, get_future)."""

    def __init__(self, result, seq: int, *, gang=None, devices=None):
        super().__init__()
        self._result = result      # the list of output tensors
        self._seq = seq
        self._gang = gang          # aborted on Ctrl-C in wait()
        self._devices = devices    # CUDA devices of the result, for the future
        self._done = threading.Event()
        self._error = None
        self._future = None
        self._lock = threading.Lock()

    def _finish(self, error=None) -> None:
        """Completes the work (and its future) with error or success."""
        with self._lock:
            self._error = error
            self._done.set()
            future = self._future
        if future is not None:
            self._settle(future[0])

    def _settle(self, base) -> None:
        base.set_result(_Failed(self._error) if self._error is not None else self._result)

    def get_future(self):
        """A torch.futures.Future completed with the output tensors (DDP's
        comm hooks chain on it), or with the operation's error.

        The error must reach C++ callers (DDP's reducer waits on the future
        in C++) as an error, which Future.set_exception does not do (it
        stores the exception as the value). So the future handed out is a
        then() of the one completed here, whose callback raises the error:
        a raising callback fails the future for C++ and Python alike."""
        with self._lock:
            if self._future is None:
                base = (torch.futures.Future(devices=self._devices)
                        if self._devices else torch.futures.Future())
                self._future = (base, base.then(_unwrap))
                if not self._done.is_set():
                    return self._future[1]
            else:
                return self._future[1]
        self._settle(self._future[0])
        return self._future[1]

    def wait(self, timeout=None) -> bool:
        """Waits until the operation completed; raises its error
        (DistBackendError naming the ranks for a lost peer or a timeout).
        With a timeout (a timedelta), raises DistBackendError when it runs
        out first. Ctrl-C aborts the gang, as gang's own wait does."""
        seconds = _seconds(timeout)
        try:
            done = self._done.wait(seconds)
        except KeyboardInterrupt:
            if self._gang is not None and not self._gang.closed:
                self._gang.abort()
            raise
        if not done:
            raise dist.DistBackendError(
                f"gang: operation {self._seq} did not complete within "
                f"{seconds:g} s (Work.wait's timeout); it goes on until the gang's "
                f"own timeout ends it")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._done.is_set()

    def is_success(self) -> bool:
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        return self._result

    def _get_sequence_number(self) -> int:
        return self._seq

    def synchronize(self) -> None:
        self.wait()


# The completers whose thread runs: closed and joined at exit, so that no
# thread is inside torch or gang when the interpreter finalizes (one that
# wakes then is ended where it stands).
_running = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for completer in list(_running):
        completer.close()


class Completer:
    """A thread completing a gang's asynchronous works, in issue order."""

    def __init__(self, name: str):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"gang.torch {name}",
                                        daemon=True)
        self._started = False
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, work: GangWork, then) -> None:
        """Completes `work` once `then()` (which waits for gang's works and
        runs what follows them) has returned, or with its error."""
        if not self._started:
            with self._lock:
                if self._closed:
                    raise dist.DistBackendError("gang: the process group was shut down")
                if not self._started:
                    self._thread.start()
                    self._started = True
                    _running.add(self)
        self._queue.put((work, then))

    def close(self, timeout: float = 10.0) -> None:
        """Completes what was submitted (each within the gang's timeout),
        then ends the thread, waiting up to `timeout` seconds for it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._started:
            self._queue.put(None)
            if self._thread is not threading.current_thread():
                self._thread.join(timeout)
            _running.discard(self)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, then = item
            error = None
            try:
                then()
            except BaseException as exc:  # noqa: B902 - handed to the waiter
                error = torch_error(exc)
            work._finish(error)
