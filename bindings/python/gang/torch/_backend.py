"""GangBackend: a torch.distributed backend whose collectives are gang's.

c10d calls a Python subclass of its C++ Backend class through a trampoline
(torch 2.15's PyBackend): every collective below is an override of one of
c10d's virtuals, with c10d's arguments (lists of tensors, an options
struct) and a Work to return. Each is planned as a list of gang operations
on flat, contiguous views of the tensors (with a staging buffer where the
tensors cannot be viewed so, copied back once the operation is done) and
then issued: at once and blocking when c10d says the caller waits
(opts.asyncOp False), else asynchronously, completed by the backend's
Completer thread (see _work.py).

CPU tensors use a CPU gang made at construction; CUDA tensors a CUDA gang
(gang's NCCL backend) made on the first CUDA operation, through the same
store. CUDA operations block until the device is done (gang's "host"
completion) and order themselves on torch's current stream, so they keep
c10d's stream contract; their copies run on that stream too.
"""

import datetime
import functools
import os
import threading

import torch
from torch.distributed import ReduceOp

from .. import Gang, ReduceOperation, Work, create, find_dtype, timeout_ms
from ._c10d import Backend as _C10dBackend
from ._errors import torch_error
from ._store import StoreAdapter
from ._work import Completer, GangWork, completed

__all__ = ["GangBackend"]

_RED = ReduceOp.RedOpType if hasattr(ReduceOp, "RedOpType") else ReduceOp

# c10d's reductions that gang runs as they are.
_DIRECT = {
    _RED.SUM: ReduceOperation.SUM,
    _RED.PRODUCT: ReduceOperation.PRODUCT,
    _RED.MIN: ReduceOperation.MIN,
    _RED.MAX: ReduceOperation.MAX,
}
if hasattr(_RED, "AVG"):
    _DIRECT[_RED.AVG] = ReduceOperation.AVG

# Bitwise reductions: gathered, then reduced here (integers and bool).
_BITWISE = {
    _RED.BAND: torch.bitwise_and,
    _RED.BOR: torch.bitwise_or,
    _RED.BXOR: torch.bitwise_xor,
}

_PREMUL_SUM = getattr(_RED, "PREMUL_SUM", None)
# GANG_TORCH_SYNC=1 runs asynchronous operations on the caller's thread
# too (their Work is done when returned): no overlap, but no completer
# thread either, which is faster where ranks outnumber cores.
_SYNC = os.environ.get("GANG_TORCH_SYNC") == "1"


def _kind(reduce_op):
    """(RedOpType, factor) of a c10d ReduceOp (or RedOpType)."""
    op = getattr(reduce_op, "op", reduce_op)
    return op, reduce_op.factor if op == _PREMUL_SUM else None


def _is_async(opts) -> bool:
    """Whether c10d lets the call return before the operation is done
    (asyncOp, torch 2.7 on; before it, every call could be)."""
    return bool(getattr(opts, "asyncOp", True))


class _Plan:
    """The gang operations of one c10d call: `issue(async_op)` runs them
    (returning gang Works when asynchronous), `then()` what follows."""

    __slots__ = ("steps", "after")

    def __init__(self):
        self.steps = []   # callables: async_op -> gang Work (or a result)
        self.after = []   # callables run once every step completed

    def step(self, fn):
        self.steps.append(fn)

    def then(self, fn):
        self.after.append(fn)


class GangBackend(_C10dBackend):
    """The "gang" backend of torch.distributed (see gang.torch)."""

    def __init__(self, store, rank: int, size: int, timeout, *, group_name: str = "0",
                 options=None, gang: Gang = None):
        super().__init__(rank, size)
        self._store = StoreAdapter(store) if store is not None else None
        self._timeout_ms = timeout_ms(timeout) or 600_000
        self._group_name = str(group_name)
        self._options = options
        self._seq = 0
        self._lock = threading.Lock()
        self._cuda = {}  # device index -> CUDA gang, made on first use
        self._completer = Completer(self._gang_name())
        self._gang = gang if gang is not None else self._create("cpu", -1)

    # ---- gangs ------------------------------------------------------------

    def _gang_name(self, suffix: str = "") -> str:
        return f"torch.pg{self._group_name}{suffix}"

    def _create(self, device: str, index: int) -> Gang:
        try:
            return create(device=device if device == "cpu" else f"cuda:{index}",
                          rank=self.rank(), size=self.size(),
                          timeout=datetime.timedelta(milliseconds=self._timeout_ms),
                          name=self._gang_name("" if device == "cpu" else f".cuda{index}"),
                          store=self._store)
        except BaseException as exc:
            raise torch_error(exc) from None

    def _gang_for(self, tensor) -> Gang:
        if not tensor.is_cuda:
            return self._gang
        index = tensor.device.index if tensor.device.index is not None else \
            torch.cuda.current_device()
        gang = self._cuda.get(index)
        if gang is None and self._store is None:
            raise ValueError(f"{tensor.device} tensor on a process group made from a CPU gang "
                             f"(as_process_group); it runs CPU tensors only")
        if gang is None:
            gang = self._cuda[index] = self._create("cuda", index)
        return gang

    @property
    def gang(self) -> Gang:
        """The CPU gang behind this process group (gang's own API on the
        same ranks)."""
        return self._gang

    # ---- what c10d asks of every backend ------------------------------------

    def getBackendName(self) -> str:
        return "gang"

    @property
    def options(self):
        if self._options is None:
            self._options = _C10dBackend.Options(
                "gang", datetime.timedelta(milliseconds=self._timeout_ms))
        return self._options

    # c10d reads these through its C++ virtuals, which look the property up
    # on the Python object: each must be defined here (the base class's
    # own would recurse).
    @property
    def supports_splitting(self) -> bool:
        return True

    @property
    def supports_coalescing(self) -> bool:
        return False

    @property
    def supports_shrinking(self) -> bool:
        return False

    @property
    def supports_reconfigure(self) -> bool:
        return False

    @property
    def supports_window(self) -> bool:
        return False

    @property
    def supports_abort_hooks(self) -> bool:
        return False

    @property
    def _supports_time_estimate(self) -> bool:
        return False

    def supports_tensor_alloc(self, device) -> bool:
        return False

    def _set_sequence_number_for_group(self) -> None:
        pass

    def _get_sequence_number_for_group(self) -> int:
        return self._seq

    def _set_default_timeout(self, timeout) -> None:
        self._timeout_ms = timeout_ms(timeout) or self._timeout_ms
        for gang in (self._gang, *self._cuda.values()):
            if not gang.closed:
                gang.timeout = self._timeout_ms / 1000.0

    def set_timeout(self, timeout) -> None:
        self._set_default_timeout(timeout)

    def eager_connect_single_device(self, device) -> None:
        if device is not None and torch.device(device).type == "cuda":
            self._gang_for(torch.empty(0, device=device))

    def shutdown(self) -> None:
        self._completer.close()
        for gang in (*self._cuda.values(), self._gang):
            gang.close()

    def abort(self) -> None:
        for gang in (*self._cuda.values(), self._gang):
            if not gang.closed:
                gang.abort()
        self.shutdown()

    # ---- sub-groups -----------------------------------------------------------

    def split(self, store, ranks, opts):
        """The backend of a new group of `ranks` (ranks of this group),
        made with gang's split of this group's gang: no new rendezvous.
        Collective over this group: the other ranks call
        perform_nocolor_split."""
        ranks = [int(r) for r in ranks]
        member = self.rank() in ranks
        try:
            child = self._gang.split(min(ranks) if member else None,
                                     ranks.index(self.rank()) if member else None)
        except BaseException as exc:
            raise torch_error(exc) from None
        if not member or child is None:
            return None
        name = getattr(opts, "group_name", None) if opts is not None else None
        return GangBackend(store, child.rank, child.size,
                           getattr(opts, "_timeout", None) or self._timeout_ms / 1000.0,
                           group_name=name or f"{self._group_name}.split", options=opts,
                           gang=child)

    def perform_nocolor_split(self, device=None) -> None:
        try:
            self._gang.split(None)
        except BaseException as exc:
            raise torch_error(exc) from None

    # ---- issuing ----------------------------------------------------------------

    def _run(self, plan: _Plan, result, opts, cuda: bool = False):
        """Issues plan's steps and returns the GangWork completed with
        `result` (a list of tensors)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        try:
            if cuda or not _is_async(opts) or not plan.steps or _SYNC:
                for step in plan.steps:
                    step(False)
                for after in plan.after:
                    after()
                return completed(result)
            works = [step(True) for step in plan.steps]
        except BaseException as exc:
            raise torch_error(exc) from None
        work = GangWork(result, seq, gang=self._gang)
        waits = [w for w in works if isinstance(w, Work)]

        def then():
            for w in waits:
                w.wait()
            for after in plan.after:
                after()

        self._completer.submit(work, then)
        return work

    # ---- buffers ------------------------------------------------------------------

    @staticmethod
    def _flat_in(t):
        """A 1-D contiguous view of t, or a contiguous copy of it."""
        return t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)

    @staticmethod
    def _flat_out(t, plan: _Plan):
        """A 1-D contiguous tensor t's result can be written to: a view of
        t, or a staging buffer copied into t once the plan is done."""
        if t.is_contiguous():
            return t.view(-1)
        stage = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
        plan.then(lambda: t.copy_(stage.view(t.shape)))
        return stage

    @classmethod
    def _flat_inout(cls, t, plan: _Plan):
        """_flat_out for an operation in place: a staging buffer starts
        with t's values."""
        flat = cls._flat_out(t, plan)
        if not t.is_contiguous():
            flat.copy_(t.reshape(-1))
        return flat

    @staticmethod
    def _movable(t):
        """t as gang can move it: itself when gang knows its dtype, else its
        bytes (complex, float8, ...: moved, never reduced)."""
        if find_dtype(t.dtype) is not None:
            return t
        return t.view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)

    # ---- reductions -------------------------------------------------------------------

    def _reduction(self, flat, reduce_op, what: str):
        """(flat as gang reduces it, gang's op, a bitwise torch function or
        None) for c10d's reduce_op; a PREMUL_SUM's factor is applied to flat
        here, before the sum."""
        op, factor = _kind(reduce_op)
        if op in _BITWISE:
            if flat.is_floating_point() or flat.is_complex():
                raise ValueError(f"{what}: {op.name} reduces integers and bool, not {flat.dtype}")
            return flat, None, _BITWISE[op]
        if op == _PREMUL_SUM:
            flat.mul_(factor)
            gang_op = ReduceOperation.SUM
        elif op in _DIRECT:
            gang_op = _DIRECT[op]
        else:
            raise ValueError(f"{what}: gang has no reduction {op}")
        if gang_op is ReduceOperation.AVG and not (flat.is_floating_point() or flat.is_complex()):
            raise ValueError(f"{what}: ReduceOp.AVG averages floating types only, not "
                             f"{flat.dtype} (as gloo and NCCL refuse it); use SUM and divide")
        if flat.is_complex():
            if gang_op not in (ReduceOperation.SUM, ReduceOperation.AVG):
                raise ValueError(f"{what}: {op.name} is not defined for complex tensors")
            flat = torch.view_as_real(flat).reshape(-1)
        if find_dtype(flat.dtype) is None:
            raise TypeError(f"{what}: gang cannot reduce {flat.dtype}")
        return flat, gang_op, None

    def _plan_reduce(self, plan: _Plan, gang: Gang, t, reduce_op, root=None):
        """Plans an all-reduce of t in place (a reduce to root when root is
        given: only root's t is written)."""
        flat = self._flat_inout(t, plan)
        buf, op, bitwise = self._reduction(flat, reduce_op, "tensor")
        if bitwise is not None:
            gathered = torch.empty((self.size(), buf.numel()), dtype=buf.dtype, device=buf.device)
            plan.step(lambda a: gang.all_gather(gathered, buf, async_op=a))

            def combine():
                if root is None or self.rank() == root:
                    buf.copy_(functools.reduce(bitwise, gathered.unbind(0)))
            plan.after.insert(0, combine)
        elif root is None:
            plan.step(lambda a: gang.all_reduce(buf, op, async_op=a))
        else:
            plan.step(lambda a: gang.reduce(buf, op, root, async_op=a))

    def allreduce(self, tensors, opts):
        if len(tensors) == 1 and (_SYNC or not _is_async(opts)):
            # The common blocking call, without a plan: one contiguous CPU
            # tensor of a dtype gang reduces, an op gang runs as it is.
            t = tensors[0]
            op = _DIRECT.get(opts.reduceOp.op)
            if (op is not None and not t.is_cuda and t.is_contiguous()
                    and find_dtype(t.dtype) is not None
                    and (op is not ReduceOperation.AVG or t.is_floating_point())):
                self._seq += 1
                try:
                    self._gang.all_reduce(t, op)
                except BaseException as exc:
                    raise torch_error(exc) from None
                return completed(tensors)
        plan = _Plan()
        for t in tensors:
            self._plan_reduce(plan, self._gang_for(t), t, opts.reduceOp)
        return self._run(plan, tensors, opts, self._any_cuda(tensors))

    def allreduce_coalesced(self, tensors, opts):
        """One all-reduce per dtype over the tensors packed together."""
        plan = _Plan()
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault((t.dtype, t.device), []).append(t)
        for group in by_dtype.values():
            packed = torch.cat([t.reshape(-1) for t in group])

            def unpack(group=group, packed=packed):
                offset = 0
                for t in group:
                    n = t.numel()
                    t.copy_(packed[offset:offset + n].view(t.shape))
                    offset += n
            self._plan_reduce(plan, self._gang_for(packed), packed, opts.reduceOp)
            plan.then(unpack)
        return self._run(plan, tensors, opts, self._any_cuda(tensors))

    def reduce(self, tensors, opts):
        plan = _Plan()
        for t in tensors:
            self._plan_reduce(plan, self._gang_for(t), t, opts.reduceOp, root=opts.rootRank)
        return self._run(plan, tensors, opts, self._any_cuda(tensors))

    def _plan_reduce_scatter(self, plan: _Plan, inp_flat, out, reduce_op, sizes=None):
        gang = self._gang_for(out)
        flat_out = self._flat_out(out, plan)
        buf, op, bitwise = self._reduction(inp_flat, reduce_op, "input")
        if bitwise is not None:
            gathered = torch.empty((self.size(), buf.numel()), dtype=buf.dtype, device=buf.device)
            plan.step(lambda a: gang.all_gather(gathered, buf, async_op=a))
            offsets = [0]
            for n in sizes or [out.numel()] * self.size():
                offsets.append(offsets[-1] + n)
            lo, hi = offsets[self.rank()], offsets[self.rank() + 1]
            plan.after.insert(0, lambda: flat_out.copy_(
                functools.reduce(bitwise, gathered[:, lo:hi].unbind(0))))
            return
        out_buf = flat_out if not out.is_complex() else torch.view_as_real(flat_out).reshape(-1)
        if sizes is None:
            plan.step(lambda a: gang.reduce_scatter(buf, op, out=out_buf, async_op=a))
        else:
            scale = 2 if out.is_complex() else 1
            sizes = [n * scale for n in sizes]
            plan.step(lambda a: gang.reduce_scatterv(buf, sizes, op, out=out_buf, async_op=a))

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        plan = _Plan()
        for out, ins in zip(output_tensors, input_tensors):
            packed = torch.cat([t.reshape(-1) for t in ins])
            sizes = [t.numel() for t in ins]
            even = all(n == out.numel() for n in sizes)
            self._plan_reduce_scatter(plan, packed, out, opts.reduceOp,
                                      None if even else sizes)
        return self._run(plan, output_tensors, opts, self._any_cuda(output_tensors))

    def reduce_scatter_single(self, output, input, opts):
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"reduce_scatter_tensor: input has {input.numel()} elements, "
                             f"output {output.numel()}; the input must have the group size "
                             f"({self.size()}) times the output's")
        plan = _Plan()
        packed = input.reshape(-1).clone() if _kind(opts.reduceOp)[0] == _PREMUL_SUM \
            else self._flat_in(input)
        self._plan_reduce_scatter(plan, packed, output, opts.reduceOp)
        return self._run(plan, [output], opts, output.is_cuda)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        plan = _Plan()
        for out, inp in zip(outputs, inputs):
            packed = inp.reshape(-1).clone() if _kind(opts.reduceOp)[0] == _PREMUL_SUM \
                else self._flat_in(inp)
            self._plan_reduce_scatter(plan, packed, out, opts.reduceOp)
        return self._run(plan, outputs, opts, self._any_cuda(outputs))

    # ---- data movement ------------------------------------------------------------------

    @staticmethod
    def _any_cuda(tensors) -> bool:
        for t in tensors:
            if isinstance(t, (list, tuple)):
                if any(x.is_cuda for x in t):
                    return True
            elif t.is_cuda:
                return True
        return False

    def broadcast(self, tensors, opts):
        plan = _Plan()
        for t in tensors:
            gang = self._gang_for(t)
            buf = self._movable(self._flat_inout(t, plan))
            plan.step(lambda a, buf=buf, gang=gang: gang.broadcast(buf, opts.rootRank,
                                                                   async_op=a))
        return self._run(plan, tensors, opts, self._any_cuda(tensors))

    def _plan_gather_list(self, plan: _Plan, outs, inp):
        """All-gather of inp into the list outs (one tensor per rank)."""
        gang = self._gang_for(inp)
        src = self._movable(self._flat_in(inp))
        counts = [self._movable(o.reshape(-1) if o.is_contiguous() else
                                o.new_empty(o.numel())).numel() for o in outs]
        flat = torch.empty(sum(counts), dtype=src.dtype, device=src.device)
        if all(c == src.numel() for c in counts):
            plan.step(lambda a: gang.all_gather(flat, src, async_op=a))
        else:
            plan.step(lambda a: gang.all_gatherv(src, counts, out=flat, async_op=a))

        def unpack():
            offset = 0
            for o, c in zip(outs, counts):
                o.copy_(flat[offset:offset + c].view(o.dtype).view(o.shape)
                        if src.dtype != o.dtype else flat[offset:offset + c].view(o.shape))
                offset += c
        plan.then(unpack)

    def allgather(self, output_tensors, input_tensors, opts):
        plan = _Plan()
        for outs, inp in zip(output_tensors, input_tensors):
            if len(outs) != self.size():
                raise ValueError(f"all_gather: {len(outs)} output tensors for a group of "
                                 f"{self.size()}")
            self._plan_gather_list(plan, outs, inp)
        return self._run(plan, output_tensors, opts, self._any_cuda(input_tensors))

    def _plan_gather_single(self, plan: _Plan, output, input):
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"all_gather_into_tensor: output has {output.numel()} elements, "
                             f"input {input.numel()}; the output must have the group size "
                             f"({self.size()}) times the input's")
        if output.dtype != input.dtype:
            raise TypeError(f"all_gather_into_tensor: output is {output.dtype}, "
                            f"input {input.dtype}")
        gang = self._gang_for(input)
        src = self._movable(self._flat_in(input))
        dst = self._movable(self._flat_out(output, plan))
        plan.step(lambda a: gang.all_gather(dst, src, async_op=a))

    def all_gather_single(self, output, input, opts):
        plan = _Plan()
        self._plan_gather_single(plan, output, input)
        return self._run(plan, [output], opts, output.is_cuda)

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        plan = _Plan()
        for out, inp in zip(outputs, inputs):
            self._plan_gather_single(plan, out, inp)
        return self._run(plan, outputs, opts, self._any_cuda(outputs))

    def allgather_coalesced(self, output_lists, input_tensors, opts):
        """output_lists[r][i] = rank r's input_tensors[i]."""
        if len(output_lists) != self.size():
            raise ValueError(f"all_gather_coalesced: {len(output_lists)} output lists for a "
                             f"group of {self.size()}")
        plan = _Plan()
        for i, inp in enumerate(input_tensors):
            self._plan_gather_list(plan, [outs[i] for outs in output_lists], inp)
        return self._run(plan, output_lists, opts, self._any_cuda(input_tensors))

    def gather(self, output_tensors, input_tensors, opts):
        plan = _Plan()
        root = opts.rootRank
        inp = input_tensors[0]
        gang = self._gang_for(inp)
        src = self._movable(self._flat_in(inp))
        if self.rank() == root:
            outs = output_tensors[0]
            if len(outs) != self.size():
                raise ValueError(f"gather: {len(outs)} output tensors for a group of "
                                 f"{self.size()}")
            flat = torch.empty(src.numel() * self.size(), dtype=src.dtype, device=src.device)
            plan.step(lambda a: gang.gather(src, root, out=flat, async_op=a))
            n = src.numel()

            def unpack():
                for r, o in enumerate(outs):
                    part = flat[r * n:(r + 1) * n]
                    o.copy_(part.view(o.dtype).view(o.shape) if part.dtype != o.dtype
                            else part.view(o.shape))
            plan.then(unpack)
        else:
            plan.step(lambda a: gang.gather(src, root, async_op=a))
        return self._run(plan, output_tensors, opts, inp.is_cuda)

    def scatter(self, output_tensors, input_tensors, opts):
        plan = _Plan()
        root = opts.rootRank
        out = output_tensors[0]
        gang = self._gang_for(out)
        dst = self._movable(self._flat_out(out, plan))
        src = None
        if self.rank() == root:
            ins = input_tensors[0]
            if len(ins) != self.size():
                raise ValueError(f"scatter: {len(ins)} input tensors for a group of "
                                 f"{self.size()}")
            src = torch.cat([self._movable(self._flat_in(t)) for t in ins])
        plan.step(lambda a: gang.scatter(dst, src, root, async_op=a))
        return self._run(plan, output_tensors, opts, out.is_cuda)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts):
        plan = _Plan()
        gang = self._gang_for(input)
        src = self._flat_in(input)
        dst = self._flat_out(output, plan)
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % self.size():
                raise ValueError(f"all_to_all_single: input ({input.numel()} elements) and "
                                 f"output ({output.numel()}) must be equal and divisible by "
                                 f"the group size {self.size()}")
            src, dst = self._movable(src), self._movable(dst)
            plan.step(lambda a: gang.all_to_all(dst, src, async_op=a))
        else:
            size = self.size()
            in_rows = input.size(0) if input.dim() else 1
            out_rows = output.size(0) if output.dim() else 1
            in_row = input.numel() // in_rows if in_rows else 0
            out_row = output.numel() // out_rows if out_rows else 0
            send = list(input_split_sizes) or [in_rows // size] * size
            recv = list(output_split_sizes) or [out_rows // size] * size
            src, dst = self._movable(src), self._movable(dst)
            scale_in = src.numel() // max(1, input.numel()) if input.numel() else 1
            scale_out = dst.numel() // max(1, output.numel()) if output.numel() else 1
            send = [n * in_row * scale_in for n in send]
            recv = [n * out_row * scale_out for n in recv]
            plan.step(lambda a: gang.all_to_allv(src, send, recv, out=dst, async_op=a))
        return self._run(plan, [output], opts, input.is_cuda)

    def alltoall(self, output_tensors, input_tensors, opts):
        plan = _Plan()
        gang = self._gang_for(input_tensors[0])
        ins = [self._movable(self._flat_in(t)) for t in input_tensors]
        src = torch.cat(ins)
        send = [t.numel() for t in ins]
        recv = [self._movable(o.new_empty(o.numel())).numel() for o in output_tensors]
        flat = torch.empty(sum(recv), dtype=src.dtype, device=src.device)
        plan.step(lambda a: gang.all_to_allv(src, send, recv, out=flat, async_op=a))

        def unpack():
            offset = 0
            for o, c in zip(output_tensors, recv):
                part = flat[offset:offset + c]
                o.copy_(part.view(o.dtype).view(o.shape) if part.dtype != o.dtype
                        else part.view(o.shape))
                offset += c
        plan.then(unpack)
        return self._run(plan, output_tensors, opts, self._any_cuda(input_tensors))

    # ---- point to point -------------------------------------------------------------------

    def send(self, tensors, dst_rank, tag):
        plan = _Plan()
        for t in tensors:
            gang = self._gang_for(t)
            buf = self._movable(self._flat_in(t))
            plan.step(lambda a, buf=buf, gang=gang: gang.send(buf, dst_rank, tag, async_op=a))
        return self._run(plan, tensors, None, self._any_cuda(tensors))

    def recv(self, tensors, src_rank, tag):
        plan = _Plan()
        for t in tensors:
            gang = self._gang_for(t)
            buf = self._movable(self._flat_out(t, plan))
            plan.step(lambda a, buf=buf, gang=gang: gang.recv(buf, src_rank, tag, async_op=a))
        return self._run(plan, tensors, None, self._any_cuda(tensors))

    def recv_anysource(self, tensors, tag):
        raise NotImplementedError(
            "gang: recv from any source is not supported (gang's point-to-point "
            "operations name their peer); pass src=")

    def barrier(self, opts):
        plan = _Plan()
        plan.step(lambda a: self._gang.barrier(async_op=a))
        return self._run(plan, [], opts)
