"""Gang: a group of processes and the collectives they run together."""

from __future__ import annotations

import array
import contextlib
import importlib
import pickle
import threading
from typing import Any, Optional

from . import capi
from . import errors  # importing it registers the exception classes with capi
from ._args import Timeout, _index, as_device, timeout_ms
from ._buffers import (_np, as_dtype, is_tensor, meta_tensor_error, new_like, rows, rows_shape,
                       shape_of, view)
from ._dtypes import DType
from ._ops import ReduceOperation, _Op, _op
from ._work import Work
from .errors import GangInvalidArgumentError, GangTypeError

__all__ = ["Gang"]


# Ctrl-C ends a blocking collective of the main thread at once (see capi's
# install_interrupt): installed over Python's SIGINT handler, if it has one.
capi.install_interrupt(threading.main_thread().ident)

# all_reduce's and broadcast's common case in one C call each
# (python_fastcall.i); NotImplemented sends the rest down the full path.
_fast_all_reduce = capi.fast_all_reduce
_fast_broadcast = capi.fast_broadcast


def _check_dtypes(what: str, a: DType, b: DType) -> None:
    if a is not b:
        raise GangTypeError(f"{what}: dtype {b.name.lower()} differs from x's "
                            f"{a.name.lower()}; give both the same dtype")


def _check_count(what: str, have: int, want: int) -> None:
    if have != want:
        raise GangInvalidArgumentError(
            f"{what} has {have} elements, the operation needs {want}")


def _stream_name(stream: int) -> str:
    """A stream as _order() holds it, in words."""
    if stream == 0:
        return "the legacy default stream"
    if stream == 2:
        return "the per-thread default stream"
    return f"stream {stream:#x}"


class _ClosedHandle:
    """Gang._h of a closed gang: reading it raises."""

    def __get__(self, gang, cls=None):
        if gang is None:
            return self
        raise GangInvalidArgumentError("operation on a closed gang; create a new gang")


class Gang:
    """A group of processes, each with a rank in [0, size), that run
    collectives together. Made by :func:`create`, :class:`FakeGang`,
    :meth:`split` and :meth:`create_gang`.

    Collectives take any C-contiguous buffer (numpy arrays, bytearray,
    array.array, memoryview); the dtype comes from the buffer's format, or
    from ``dtype=`` for bfloat16 (uint16 views). Every rank of the gang must
    issue the same operations in the same order. They block, releasing the
    GIL, unless ``async_op=True``, which returns a :class:`Work`.

    A CUDA gang takes device memory on its own device (``device``) and
    orders each operation on its operands' CUDA stream (torch's current
    stream; a ``__cuda_array_interface__``'s ``stream``) unless
    :meth:`set_cuda_stream` chose one.

    A gang is a context manager; :meth:`close` frees it (and garbage
    collection does, as a safety net).
    """

    def __init__(self, handle: Any, *, owner: Any = None) -> None:
        """Wraps a capi.GangHandle; `owner`, if given, owns it (a Gangs)."""
        self._h = handle  # deleted by close(); see __getattr__
        self._owner = owner
        self._rank = capi.gang_rank(handle)
        self._size = capi.gang_size(handle)
        self._cuda = capi.gang_device_type(handle) != capi.GANG_DEVICE_CPU
        self._device_index = capi.gang_device_index(handle)
        self._ranks = None
        self._group_thread = None  # the thread with an open group()
        # The handle again while all_reduce and broadcast may try capi's
        # fast calls (a CPU gang, open, with no group() open on any thread);
        # None otherwise.
        self._fast = None if self._cuda else handle
        # CUDA streams: _follow while operations go on their operands' stream
        # (set_cuda_stream("auto")), False once set_cuda_stream chose one;
        # _stream_set is the stream last given to gang_set_cuda_stream (0 for
        # NULL, the legacy default stream), None while the gang has its own.
        self._follow = True
        self._stream_set = None

    def set_cuda_stream(self, stream: Any) -> None:
        """Chooses the CUDA stream this gang's operations are ordered on.

        By default (and after ``set_cuda_stream("auto")``) each operation
        goes on the stream of its operands, as torch.distributed does:
        torch's current stream on the tensor's device; the ``stream`` of a
        ``__cuda_array_interface__`` (version 3; without one, the legacy
        default stream; None asks for no synchronisation and leaves the
        gang's stream as it is); the legacy default stream for other DLPack
        producers. A stream given here instead (a torch or CuPy stream, its
        ``cuda_stream`` or ``ptr``, a cudaStream_t as an int, or None for the
        legacy default stream) orders every operation until the next call.
        A CPU gang takes None and "auto" only."""
        if isinstance(stream, str):
            if stream != "auto":
                raise GangInvalidArgumentError(f"stream: {stream!r}; the only name taken "
                                               f"is 'auto' (follow the operands' streams)")
            self._follow = True
            return
        if stream is not None and not isinstance(stream, int):
            handle = getattr(stream, "cuda_stream", None)
            if handle is None:
                handle = getattr(stream, "ptr", None)
            if not isinstance(handle, int):
                raise GangTypeError(f"stream: expected a CUDA stream, an int, None or "
                                    f"'auto', got {type(stream).__name__}")
            stream = handle
        capi.gang_set_cuda_stream(self._h, stream if stream else None)
        self._follow = False
        self._stream_set = stream or 0

    def set_cuda_completion(self, mode: str) -> None:
        """What blocking calls and ``Work.wait()`` of a CUDA gang wait for:
        ``"host"`` (the default) until the device is done, ``"stream"``
        only until the result is ordered on the operation's stream, as
        torch.distributed's NCCL backend does (the call returns without
        waiting for the GPU). A CPU gang takes both."""
        modes = {"host": capi.GANG_CUDA_COMPLETION_HOST,
                 "stream": capi.GANG_CUDA_COMPLETION_STREAM}
        if mode not in modes:
            raise GangInvalidArgumentError(f"mode: expected 'host' or 'stream', got {mode!r}")
        capi.gang_set_cuda_completion(self._h, modes[mode])

    def _order(self, *views) -> None:
        """For a CUDA gang, before an operation is issued: refuses operands
        on another device than the gang's, and (unless set_cuda_stream chose
        a stream) orders the operation on the operands' stream. The C call
        is made only when that stream changed."""
        stream = first = None
        gang_device = self._device_index
        for v in views:
            if v is None:
                continue
            if v.device != gang_device and v.device >= 0 and gang_device >= 0:
                raise GangInvalidArgumentError(
                    f"{v.what} is on cuda:{v.device}, the gang on cuda:{gang_device}; "
                    f"move it there (.to('cuda:{gang_device}')), or use a gang "
                    f"created with device='cuda:{v.device}'")
            if v.stream is not None:
                if stream is None:
                    stream, first = v.stream, v
                elif v.stream != stream and self._follow:
                    raise GangInvalidArgumentError(
                        f"{first.what} is ordered on {_stream_name(stream)}, {v.what} on "
                        f"{_stream_name(v.stream)}; one operation runs on one stream: "
                        f"choose it with set_cuda_stream()")
        if stream is not None and self._follow and stream != self._stream_set:
            capi.gang_set_cuda_stream(self._h, stream or None)
            self._stream_set = stream

    def _child(self, handle, owner=None):
        """A sub-gang of this gang (owned by `owner`, a Gangs, if given):
        None stays None; it inherits the stream choice (the library gives it
        this gang's stream)."""
        if handle is None:
            return None
        child = Gang(handle, owner=owner)
        child._follow, child._stream_set = self._follow, self._stream_set
        return child

    @classmethod
    def from_address(cls, address: int, *, owner: Any) -> Gang:
        """A Gang on the gang (gang_t*) at `address`, made and owned by C or
        C++ code of this process (gang_torch's backend): its close() does
        nothing, and it keeps `owner` (whatever keeps that gang alive)
        alive."""
        return cls(capi.gang_python_borrow(int(address)), owner=owner)

    def borrow(self, owner: Any = None) -> Gang:
        """Another Gang on this gang's handle that does not own it: its
        close() does nothing, so it must not outlive this gang's close().
        It keeps `owner` (whatever owns it, a torch process group say)
        alive, and starts with this gang's CUDA stream choice."""
        view = Gang(self._h, owner=self if owner is None else owner)
        view._follow, view._stream_set = self._follow, self._stream_set
        return view

    def _done(self, work, output, *keep):
        """The result of a collective: output, or a Work while it is in
        flight."""
        return output if work is None else Work(work, output, keep, self)

    def _view(self, obj, **kw):
        """view() of obj for this gang: host buffers on a CPU gang, device
        memory (``__cuda_array_interface__``) on a CUDA gang."""
        return view(obj, device=self._cuda, **kw)

    # ---- identity -------------------------------------------------------

    # self._h once closed (the instance's own _h hides it until then). A
    # class attribute rather than __getattr__, which would slow down every
    # attribute of a gang, its methods included.
    _h = _ClosedHandle()

    def _detach(self):
        """Forgets the handle (closed); returns it, or None if it was."""
        self._fast = None
        return self.__dict__.pop("_h", None)

    @property
    def closed(self) -> bool:
        """Whether close() was called (or the owning Gangs closed)."""
        return "_h" not in self.__dict__

    @property
    def rank(self) -> int:
        """This process's rank in the gang."""
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks."""
        return self._size

    @property
    def name(self) -> str:
        """The gang's name ("root", "root/split1.0", ...)."""
        return capi.gang_name(self._h)

    @property
    def backend(self) -> str:
        """The backend's name ("gloo", "fake")."""
        return capi.gang_backend_name(self._h)

    @property
    def device(self) -> Any:
        """Where the gang's buffers live, as fairseq2's Gang.device: a
        torch.device when torch can be imported (``g.device.type`` is "cpu"
        or "cuda"), else a string. "cpu" or "cuda:N" (for a gang created
        with device="cuda", the GPU its backend chose: local rank modulo the
        visible GPUs); "cuda" alone only for a backend that does not say
        which GPU it chose, whose operands' devices then go unchecked.
        ``str(g.device)`` is the same string either way."""
        return as_device(self._device_name())

    def _device_name(self) -> str:
        """The device as a string: "cpu", "cuda:N" or "cuda"."""
        if capi.gang_device_type(self._h) == capi.GANG_DEVICE_CPU:
            return "cpu"
        index = capi.gang_device_index(self._h)
        return f"cuda:{index}" if index >= 0 else "cuda"

    @property
    def timeout(self) -> float:
        """The timeout of each operation, in seconds; settable."""
        return capi.gang_get_timeout(self._h) / 1000.0

    @timeout.setter
    def timeout(self, seconds: Timeout) -> None:
        capi.gang_set_timeout(self._h, timeout_ms(seconds))

    @property
    def ranks(self) -> list:
        """Each member's rank in the root gang (the one create() made)."""
        if self._ranks is None:
            h = self._h
            self._ranks = [capi.gang_root_rank(h, r) for r in range(self._size)]
        return self._ranks

    # vLLM's GroupCoordinator names; ranks are root-gang ranks.
    @property
    def first_rank(self) -> int:
        return self.ranks[0]

    @property
    def last_rank(self) -> int:
        return self.ranks[-1]

    @property
    def next_rank(self) -> int:
        return self.ranks[(self._rank + 1) % self._size]

    @property
    def prev_rank(self) -> int:
        return self.ranks[(self._rank - 1) % self._size]

    @property
    def is_first_rank(self) -> bool:
        return self._rank == 0

    @property
    def is_last_rank(self) -> bool:
        return self._rank == self._size - 1

    def supports(self, op: _Op, dtype: Any) -> bool:
        """Whether the backend can reduce `dtype` with `op` (no traffic)."""
        return bool(capi.gang_supports(self._h, op, as_dtype(dtype)))

    def __repr__(self):
        if self.closed:
            return "<gang.Gang closed>"
        return (f"<gang.Gang {self.name!r} rank={self._rank} size={self._size} "
                f"backend={self.backend!r}>")

    # ---- lifetime -------------------------------------------------------

    def close(self) -> None:
        """Frees the gang: local and bounded (waits at most the timeout for
        this rank's operations in flight, aborts the rest). Idempotent. The
        gangs of a Gangs are closed by Gangs.close(), not here."""
        if self._owner is not None:
            return
        handle = self._detach()
        if handle is not None:
            handle.thisown = False
            capi.gang_destroy(handle)

    def abort(self) -> None:
        """Fails every operation in flight and later on this gang with
        GangAbortedError, at once; peers see GangPeerLostError."""
        capi.gang_abort(self._h)

    def __enter__(self) -> Gang:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ---- sub-gangs ------------------------------------------------------

    def create_gang(self, ranks: Any) -> Optional[Gang]:
        """A gang of the listed ranks of this gang (collective over this
        gang; every rank passes the same list). None on non-members."""
        return self._child(capi.gang_create_subgang(self._h, list(ranks)))

    def shrink(self, timeout: Timeout = None) -> Gang:
        """The gang of the survivors after a rank was lost (this gang may
        have failed): collective over the ranks still alive, which agree on
        one membership through the gang's store. Ranked in the order of the
        old ranks, named "<base>/shrink<n>" (see gang_shrink); this gang
        stays failed (close it). A rank that calls only after the others agreed raises
        GangAbortedError saying it was excluded. timeout: seconds (None:
        the gang's timeout)."""
        return self._child(capi.gang_shrink(self._h, timeout_ms(timeout)))

    def grow(self, timeout: Timeout = None) -> Optional[Gang]:
        """Admits the processes waiting in gang.join() for this gang: a new
        gang of the members (first, in order) and the joiners, or None when
        none waits. Collective over the members, at a point the program
        chooses (a step boundary); this gang stays usable."""
        return self._child(capi.gang_grow(self._h, timeout_ms(timeout)))

    def split(self, color: int, key: Optional[int] = None) -> Optional[Gang]:
        """Ranks with the same color form a gang, ordered by key (default:
        this rank). Collective; color None joins no gang and gives None."""
        color = capi.GANG_COLOR_NONE if color is None else color
        return self._child(capi.gang_split(self._h, color, self._rank if key is None else key))

    # ---- collectives ----------------------------------------------------

    # How a collective completes: True returns a Work; False blocks (Ctrl-C
    # aborts the gang and raises KeyboardInterrupt, see capi's
    # install_interrupt); None, on the thread that opened a group(), queues
    # it in the group.
    def _mode(self, async_op):
        if self._group_thread is not None and self._group_thread == threading.get_ident():
            if async_op:
                raise GangInvalidArgumentError("operations in a group take no async_op; "
                                               "the group completes as one")
            return None
        return bool(async_op)

    def all_reduce(self, x: Any, op: _Op = ReduceOperation.SUM, *, dtype: Any = None,
                   async_op: bool = False) -> Any:
        """Reduces x over every rank, in place; returns x (torch's and
        fairseq2's all_reduce(tensor, op))."""
        h = self._fast
        if h is not None and dtype is None:
            # A contiguous host buffer or tensor of a known dtype, in C.
            work = _fast_all_reduce(h, x, op, async_op)
            if work is None:
                return x
            if work is not NotImplemented:
                return Work(work[0], x, work[1:], self)
        if type(op) is not ReduceOperation:
            op = _op(op)
        cuda = self._cuda
        mv, dt, n = view(x, writable=True, dtype=dtype, device=cuda)
        if cuda:
            self._order(mv)
        work = capi.gang_all_reduce(self._h, mv, mv, n, dt, op, async_op
                                    if self._group_thread is None else self._mode(async_op))
        return x if work is None else Work(work, x, (mv,), self)

    def reduce(self, x: Any, op: _Op = ReduceOperation.SUM, dst: int = 0, *, dtype: Any = None,
               async_op: bool = False) -> Any:
        """Reduces x over every rank into x at rank dst (other ranks' x is
        left alone); returns x."""
        op, dst = _op(op), _index("dst", dst)
        at_dst = self._rank == dst
        mv, dt, n = self._view(x, writable=at_dst, dtype=dtype)
        if self._cuda:
            self._order(mv)
        work = capi.gang_reduce(self._h, mv, mv if at_dst else None, n, dt, op, dst,
                                self._mode(async_op))
        return self._done(work, x, mv)

    def broadcast(self, x: Any, source_rank: int = 0, *, dtype: Any = None,
                  async_op: bool = False) -> Any:
        """Copies source_rank's x into every rank's x; returns x."""
        h = self._fast
        if h is not None and dtype is None:
            work = _fast_broadcast(h, x, source_rank, async_op)
            if work is None:
                return x
            if work is not NotImplemented:
                return Work(work[0], x, work[1:], self)
        source_rank = _index("source_rank", source_rank)
        mv, dt, n = self._view(x, writable=True, dtype=dtype)
        if self._cuda:
            self._order(mv)
        return self._done(capi.gang_broadcast(self._h, mv, n, dt, source_rank,
                                         self._mode(async_op)), x, mv)

    def all_gather(self, out: Any, x: Any, *, dtype: Any = None, async_op: bool = False) -> Any:
        """out (size times x's elements) = every rank's x in rank order;
        returns out (fairseq2's all_gather(output, input))."""
        xv, dt, n = self._view(x, dtype=dtype)
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        _check_count("out", m, n * self._size)
        if self._cuda:
            self._order(xv, ov)
        return self._done(capi.gang_all_gather(self._h, xv, ov, n, dt, self._mode(async_op)),
                     out, xv, ov)

    def all_gather_to_list(self, output_list: Any, x: Any = None, *, dtype: Any = None) -> list[Any]:
        """Every rank's x, in rank order, as a list.

        fairseq2's form, all_gather_to_list(output_list, x), fills the
        size buffers of output_list (each like x) and returns it;
        all_gather_to_list(x) returns a list of new buffers like x."""
        if x is None:
            output_list, x = None, output_list
        xv, _, n = self._view(x, dtype=dtype)
        if output_list is not None and len(output_list) != self._size:
            raise GangInvalidArgumentError(f"output_list has {len(output_list)} entries; "
                                           f"the gang has {self._size} ranks")
        for r, dst in enumerate(output_list or ()):
            if is_tensor(dst) and dst.is_meta:  # a copy into it would do nothing
                raise meta_tensor_error(f"output_list[{r}]")
        out = new_like(x, xv, (self._size,) + shape_of(xv))
        self.all_gather(out, x, dtype=dtype)
        if _np is not None and isinstance(out, _np.ndarray) or is_tensor(out):
            parts = [out[r] for r in range(self._size)]
        else:
            parts = [out[r * n:(r + 1) * n] for r in range(self._size)]
        if output_list is None:
            return parts
        for r, part in enumerate(parts):
            dst = output_list[r]
            if is_tensor(dst):
                dst.copy_(part)
            else:
                memoryview(dst).cast("B")[:] = memoryview(part).cast("B")
        return output_list

    def _gather_rows(self, nrows: int) -> list:
        counts = array.array("q", [nrows])
        gathered = array.array("q", bytes(8 * self._size))
        self.all_gather(gathered, counts)
        return list(gathered)

    def all_gatherv(self, x: Any, sizes: Any = None, *, out: Any = None, dtype: Any = None,
                    async_op: bool = False) -> Any:
        """Every rank's x concatenated along the first dimension, ranks
        contributing different numbers of rows (sizes[r] rows from rank r;
        learned with one extra all-gather when None). Returns out."""
        xv, dt, _ = self._view(x, dtype=dtype)
        if out is not None:  # checked before the sizes exchange
            self._view(out, writable=True, dtype=dtype, what="out")
        nrows, per_row = rows(x, xv)
        sizes = self._gather_rows(nrows) if sizes is None else list(sizes)
        if len(sizes) != self._size or sizes[self._rank] != nrows:
            raise GangInvalidArgumentError(f"sizes {sizes} must list {self._size} row counts, "
                                           f"this rank's being {nrows}")
        if out is None:
            out = new_like(x, xv, rows_shape(x, xv, sum(sizes), per_row))
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        counts = [s * per_row for s in sizes]
        _check_count("out", m, sum(counts))
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_all_gatherv(self._h, xv, counts[self._rank], ov, counts, dt,
                                     self._mode(async_op))
        return self._done(work, out, xv, ov)

    def gather(self, x: Any, dst: int = 0, *, out: Any = None, dtype: Any = None,
               async_op: bool = False) -> Any:
        """At rank dst, every rank's x stacked in rank order (returned);
        None on the other ranks."""
        dst = _index("dst", dst)
        xv, dt, n = self._view(x, dtype=dtype)
        ov = None
        if self._rank == dst:
            if out is None:
                out = new_like(x, xv, (self._size,) + shape_of(xv))
            ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
            _check_dtypes("out", dt, odt)
            _check_count("out", m, n * self._size)
        else:
            out = None
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_gather(self._h, xv, ov, n, dt, dst, self._mode(async_op))
        return self._done(work, out, xv, ov)

    def scatter(self, out: Any, x: Any = None, src: int = 0, *, dtype: Any = None,
                async_op: bool = False) -> Any:
        """Rank r's out = chunk r of x at rank src (size chunks of out's
        elements; x is ignored elsewhere). Returns out."""
        src = _index("src", src)
        ov, dt, n = self._view(out, writable=True, dtype=dtype, what="out")
        xv = None
        if self._rank == src:
            xv, xdt, m = self._view(x, dtype=dtype)
            _check_dtypes("x", dt, xdt)
            _check_count("x", m, n * self._size)
        if self._cuda:
            self._order(xv, ov)
        return self._done(capi.gang_scatter(self._h, xv, ov, n, dt, src, self._mode(async_op)),
                     out, xv, ov)

    def reduce_scatter(self, x: Any, op: _Op = ReduceOperation.SUM, *, out: Any = None,
                       dtype: Any = None, async_op: bool = False) -> Any:
        """Reduces x over every rank and gives rank r chunk r (x's first
        dimension split in size equal parts). Returns out."""
        op = _op(op)
        xv, dt, _ = self._view(x, dtype=dtype)
        nrows, per_row = rows(x, xv)
        if nrows % self._size:
            raise GangInvalidArgumentError(
                f"x has {nrows} rows, not a multiple of the gang size {self._size}")
        chunk = nrows // self._size
        if out is None:
            out = new_like(x, xv, rows_shape(x, xv, chunk, per_row))
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        _check_count("out", m, chunk * per_row)
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_reduce_scatter(self._h, xv, ov, chunk * per_row, dt, op,
                                        self._mode(async_op))
        return self._done(work, out, xv, ov)

    def reduce_scatterv(self, x: Any, sizes: Any, op: _Op = ReduceOperation.SUM, *,
                        out: Any = None, dtype: Any = None, async_op: bool = False) -> Any:
        """Like reduce_scatter with chunk r of sizes[r] rows. Returns out."""
        op = _op(op)
        xv, dt, _ = self._view(x, dtype=dtype)
        nrows, per_row = rows(x, xv)
        sizes = [_index("sizes[i]", n) for n in sizes]
        if len(sizes) != self._size or sum(sizes) != nrows:
            raise GangInvalidArgumentError(f"sizes {sizes} must list {self._size} row counts "
                                           f"adding up to x's {nrows} rows")
        if out is None:
            out = new_like(x, xv, rows_shape(x, xv, sizes[self._rank], per_row))
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        counts = [s * per_row for s in sizes]
        _check_count("out", m, counts[self._rank])
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_reduce_scatterv(self._h, xv, ov, counts, dt, op, self._mode(async_op))
        return self._done(work, out, xv, ov)

    def all_to_all(self, out: Any, x: Any, *, dtype: Any = None, async_op: bool = False) -> Any:
        """Chunk p of x (size equal chunks) goes to rank p, arriving as
        chunk `rank` of its out. Returns out."""
        xv, dt, n = self._view(x, dtype=dtype)
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        if n % self._size:
            raise GangInvalidArgumentError(
                f"x has {n} elements, not a multiple of the gang size {self._size}")
        _check_count("out", m, n)
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_all_to_all(self._h, xv, ov, n // self._size, dt, self._mode(async_op))
        return self._done(work, out, xv, ov)

    def all_to_allv(self, x: Any, send_sizes: Any, recv_sizes: Any, *, out: Any = None,
                    dtype: Any = None, async_op: bool = False) -> Any:
        """send_sizes[p] rows of x go to rank p; recv_sizes[p] rows arrive
        from rank p, packed in rank order into out (returned)."""
        xv, dt, _ = self._view(x, dtype=dtype)
        nrows, per_row = rows(x, xv)
        send_sizes = [_index("send_sizes[i]", n) for n in send_sizes]
        recv_sizes = [_index("recv_sizes[i]", n) for n in recv_sizes]
        if len(send_sizes) != self._size or len(recv_sizes) != self._size:
            raise GangInvalidArgumentError(
                f"send_sizes and recv_sizes must have {self._size} entries")
        if sum(send_sizes) != nrows:
            raise GangInvalidArgumentError(
                f"send_sizes add up to {sum(send_sizes)} rows, x has {nrows}")
        if out is None:
            out = new_like(x, xv, rows_shape(x, xv, sum(recv_sizes), per_row))
        ov, odt, m = self._view(out, writable=True, dtype=dtype, what="out")
        _check_dtypes("out", dt, odt)
        _check_count("out", m, sum(recv_sizes) * per_row)
        if self._cuda:
            self._order(xv, ov)
        work = capi.gang_all_to_allv(self._h, xv, [s * per_row for s in send_sizes], ov,
                                     [s * per_row for s in recv_sizes], dt,
                                     self._mode(async_op))
        return self._done(work, out, xv, ov)

    def send(self, x: Any, dst: Optional[int] = None, tag: int = 0, *, dtype: Any = None,
             async_op: bool = False) -> Any:
        """Sends x to rank dst (default: the next rank) with a tag."""
        mv, dt, n = self._view(x, dtype=dtype)
        dst = (self._rank + 1) % self._size if dst is None else _index("dst", dst)
        if self._cuda:
            self._order(mv)
        return self._done(capi.gang_send(self._h, mv, n, dt, dst, _index("tag", tag),
                                    self._mode(async_op)), None, mv)

    def recv(self, out: Any, src: Optional[int] = None, tag: int = 0, *, dtype: Any = None,
             async_op: bool = False) -> Any:
        """Receives into out from rank src (default: the previous rank);
        out's size and dtype must equal the sender's. Returns out."""
        mv, dt, n = self._view(out, writable=True, dtype=dtype, what="out")
        src = (self._rank - 1) % self._size if src is None else _index("src", src)
        if self._cuda:
            self._order(mv)
        return self._done(capi.gang_recv(self._h, mv, n, dt, src, _index("tag", tag),
                                    self._mode(async_op)), out, mv)

    def recv_any(self, out: Any, tag: int = 0, *, dtype: Any = None) -> int:
        """Receives into out the first message with `tag` from any rank
        (MPI's ANY_SOURCE: one sender's messages in the order it sent them,
        receives in the order they were posted); returns the sender's rank.
        Blocking. CPU gangs only."""
        mv, dt, n = self._view(out, writable=True, dtype=dtype, what="out")
        return int(capi.gang_python_recv_any(self._h, mv, n, dt, _index("tag", tag), False))

    @contextlib.contextmanager
    def group(self) -> Any:
        """Issues the operations of a with-block together, so that both
        sides of an exchange can send before they receive; waits for all of
        them when the block ends. They take no async_op. Groups do not nest
        and belong to the thread that opens them::

            with g.group():
                g.send(mine, dst=peer)
                g.recv(theirs, src=peer)
        """
        handle = self._h
        capi.gang_group_start(handle)
        self._group_thread = threading.get_ident()
        self._fast = None  # the full path queues operations in the group
        try:
            yield self
        except BaseException:
            self._end_group()
            with contextlib.suppress(errors.GangError):
                capi.gang_group_end(handle, None)
            raise
        self._end_group()
        capi.gang_group_end(handle, False)

    def _end_group(self) -> None:
        self._group_thread = None
        self._fast = None if self._cuda else self.__dict__.get("_h")

    def barrier(self, *, async_op: bool = False) -> Any:
        """Returns once every rank has entered the barrier."""
        return self._done(capi.gang_barrier(self._h, self._mode(async_op)), None)

    # ---- helpers from training code --------------------------------------

    def broadcast_flag(self, flag: bool, source_rank: int = 0) -> bool:
        """source_rank's flag, on every rank."""
        return capi.gang_broadcast_flag(self._h, 1 if flag else 0, source_rank)

    def all_sum(self, value: float) -> float:
        """The sum of every rank's value, the same on every rank."""
        return capi.gang_all_sum(self._h, float(value))

    # ---- Python objects (pickled; peers are trusted) ---------------------

    def broadcast_objects(self, objects: list[Any], source_rank: int = 0) -> None:
        """Replaces the contents of `objects` with source_rank's, in place."""
        data = pickle.dumps(list(objects)) if self._rank == source_rank else b""
        received = capi.gang_broadcast_bytes(self._h, data, source_rank)
        if self._rank != source_rank:
            objects[:] = pickle.loads(received)

    def broadcast_object(self, obj: Any = None, src: int = 0) -> Any:
        """src's obj, on every rank."""
        data = pickle.dumps(obj) if self._rank == src else b""
        received = capi.gang_broadcast_bytes(self._h, data, src)
        return obj if self._rank == src else pickle.loads(received)

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's obj, in rank order."""
        gathered = capi.gang_all_gather_bytes(self._h, pickle.dumps(obj), self._size)
        return [pickle.loads(data) for data in gathered]

    def send_object(self, obj: Any, dst: int, tag: int = 0) -> None:
        """Sends a picklable object to rank dst."""
        capi.gang_send_bytes(self._h, pickle.dumps(obj), dst, tag)

    def recv_object(self, src: int, tag: int = 0) -> Any:
        """Receives the object rank src sent with send_object."""
        return pickle.loads(capi.gang_recv_bytes(self._h, src, tag))

    def broadcast_tensor_dict(self, tensor_dict: Any = None, src: int = 0) -> dict[Any, Any]:
        """src's dict on every rank (vLLM's broadcast_tensor_dict): numpy
        arrays (on a CPU gang) and torch tensors on the gang's device travel
        as raw buffers, any dtype; other values pickled with the metadata."""
        src = _index("src", src)
        if self._rank == src:
            metadata, buffers = [], []
            for key, value in tensor_dict.items():
                kind = _raw_kind(value, self._cuda)
                if kind == "numpy":
                    a = _np.ascontiguousarray(value)
                    if not a.flags.writeable:
                        a = a.copy()
                    metadata.append((key, kind, (a.dtype.str, a.shape)))
                    buffers.append(a)
                elif kind == "torch":
                    t = value.detach().contiguous()
                    # Refused here, before the metadata leaves: a meta tensor,
                    # a dtype gang has no name for.
                    self._view(t, what=f"tensor_dict[{key!r}]")
                    metadata.append((key, kind, (str(t.dtype), tuple(t.shape))))
                    buffers.append(t)
                else:
                    metadata.append((key, None, value))
            self.broadcast_object(metadata, src)
            for b in buffers:
                self.broadcast(b, src)
            return tensor_dict
        result = {}
        for key, kind, value in self.broadcast_object(None, src):
            if kind == "numpy":
                value = _np.empty(value[1], dtype=_np.dtype(value[0]))
                self.broadcast(value, src)
            elif kind == "torch":
                import torch

                value = torch.empty(value[1], dtype=getattr(torch, value[0][len("torch."):]),
                                    device=self.device)
                self.broadcast(value, src)
            result[key] = value
        return result


    # ---- torch.distributed ------------------------------------------------

    @property
    def supports_process_group(self) -> bool:
        """Whether as_process_group() can give a torch process group: when
        torch.distributed is importable (fairseq2's name)."""
        try:
            import torch.distributed as dist
        except ImportError:
            return False
        return dist.is_available()

    def as_process_group(self) -> Any:
        """The torch process group of this gang (fairseq2's name), for
        DDP, FSDP, SyncBatchNorm and DeviceMesh: the group the gang came
        from (gang.torch.from_process_group), else a group on the gang
        backend running on this gang itself, made without traffic. See
        gang.torch.as_process_group."""
        # gang.torch is the layer above this package and uses only its
        # public API; this method (fairseq2's) reaches it by name when it
        # is called, so that importing gang imports neither torch nor
        # gang.torch, and no module of gang imports gang.torch.
        return importlib.import_module(f"{__package__}.torch").as_process_group(self)


def _raw_kind(value, cuda: bool):
    """How broadcast_tensor_dict sends value: "numpy", "torch" or None
    (pickled): raw only in the memory the gang's collectives take."""
    if _np is not None and isinstance(value, _np.ndarray) and not cuda:
        return "numpy"
    if is_tensor(value) and value.is_cuda == cuda:
        return "torch"
    return None
