"""FakeGang: one process standing in for a rank of a gang, without traffic."""

from __future__ import annotations

import inspect
from typing import Any

from . import capi
from ._args import _index, _parse_device
from ._buffers import _np
from ._gang import Gang
from ._ops import ReduceOperation, _Op, _op
from .errors import GangUnavailableError

__all__ = ["FakeGang"]


class FakeGang(Gang):
    """One process standing in for rank `rank` of a `size`-rank gang in
    which every rank holds this rank's data: no traffic. all_reduce SUM
    gives x*size, PRODUCT x**size, MEAN/MIN/MAX x; gathers repeat x;
    broadcasts (of buffers and of objects) leave every rank with what it
    has; barrier does nothing; send/recv and split are unsupported;
    create_gang gives the FakeGang of the listed ranks (None if this rank
    is not among them), on the same device.

    fairseq2's signature: ``FakeGang(device, *, rank=0, size=1)``, as in
    ``FakeGang(Device("cpu"), rank=0, size=8)``. ``device`` ("cpu",
    "cuda:N", a torch.device; None is the CPU) is what ``.device`` reports
    (a torch.device when torch can be imported). On a CUDA device the
    collectives work on CUDA tensors with torch's own operations (the
    library's fake backend reads host memory).

    The older positional form ``FakeGang(rank, size, device)`` still works:
    an int first means rank, then size and device (``FakeGang(1, 4)``,
    ``FakeGang(1, 4, device="cpu")``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The signature inspect and help() show is fairseq2's (set below);
        # the legacy positional form is told apart by an int first.
        device, rank, size = _fake_gang_arguments(args, kwargs)
        super().__init__(capi.gang_create_fake(_index("rank", rank), _index("size", size)))
        self._set_device(device)

    def _set_device(self, device) -> None:
        self._device_text = "cpu" if device is None else str(device)
        _parse_device(self._device_text)  # rejects what is neither CPU nor CUDA
        self._fake_cuda = self._device_text != "cpu"

    def _device_name(self) -> str:
        return self._device_text

    def _child(self, handle, owner=None):
        """Sub-gangs of a fake gang are fake gangs on the same device."""
        if handle is None:
            return None
        child = FakeGang.__new__(FakeGang)
        Gang.__init__(child, handle, owner=owner)
        child._set_device(self._device_text)
        return child

    def all_reduce(self, x: Any, op: _Op = ReduceOperation.SUM, *, dtype: Any = None,
                   async_op: bool = False) -> Any:
        if not self._fake_cuda:
            return super().all_reduce(x, op, dtype=dtype, async_op=async_op)
        op = _op(op)
        if op is ReduceOperation.SUM:
            x.mul_(self._size)
        elif op is ReduceOperation.PRODUCT:
            x.pow_(self._size)
        return self._done(None, x)

    def broadcast(self, x: Any, source_rank: int = 0, *, dtype: Any = None,
                  async_op: bool = False) -> Any:
        if not self._fake_cuda:
            return super().broadcast(x, source_rank, dtype=dtype, async_op=async_op)
        return self._done(None, x)

    @property
    def supports_process_group(self) -> bool:
        """False: a fake gang has no processes to group (as fairseq2's)."""
        return False

    def as_process_group(self) -> Any:
        raise GangUnavailableError("a FakeGang has no torch process group "
                                   "(supports_process_group is False)")

    def all_gather(self, out: Any, x: Any, *, dtype: Any = None, async_op: bool = False) -> Any:
        if not self._fake_cuda:
            return super().all_gather(out, x, dtype=dtype, async_op=async_op)
        flat = out.view(self._size, -1)
        for r in range(self._size):
            flat[r].copy_(x.reshape(-1))
        return self._done(None, out)

    def barrier(self, *, async_op: bool = False) -> Any:
        if not self._fake_cuda:
            return super().barrier(async_op=async_op)
        return self._done(None, None)

    # Every rank holds this rank's objects: a broadcast leaves them be.
    def broadcast_object(self, obj: Any = None, src: int = 0) -> Any:
        return obj

    def broadcast_objects(self, objects: list[Any], source_rank: int = 0) -> None:
        return None

    def broadcast_tensor_dict(self, tensor_dict: Any = None, src: int = 0) -> dict[Any, Any]:
        return tensor_dict


def _is_int(value) -> bool:
    """An int or numpy integer (not a bool): FakeGang's legacy first
    argument, the rank."""
    if isinstance(value, bool) or isinstance(value, str):
        return False
    if isinstance(value, int):
        return True
    return _np is not None and isinstance(value, _np.integer)


def _fake_gang_arguments(args: tuple, kwargs: dict) -> tuple:
    """(device, rank, size) of a FakeGang call, in fairseq2's form
    (device, *, rank=0, size=1) or the legacy one (rank, size, device)."""
    if args and _is_int(args[0]):
        positional = ("rank", "size", "device")
    else:
        positional = ("device",)
    if len(args) > len(positional):
        raise TypeError(f"FakeGang() takes at most {len(positional)} positional arguments "
                        f"{'(rank, size, device)' if len(positional) == 3 else '(device)'}, "
                        f"{len(args)} were given")
    values = dict(zip(positional, args))
    for name, value in kwargs.items():
        if name not in ("device", "rank", "size"):
            raise TypeError(f"FakeGang() got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"FakeGang() got multiple values for argument {name!r}")
        values[name] = value
    return values.get("device"), values.get("rank", 0), values.get("size", 1)


def _fake_gang_signature():
    P = inspect.Parameter
    return inspect.Signature([
        P("self", P.POSITIONAL_OR_KEYWORD),
        P("device", P.POSITIONAL_OR_KEYWORD, default=None),
        P("rank", P.KEYWORD_ONLY, default=0, annotation=int),
        P("size", P.KEYWORD_ONLY, default=1, annotation=int),
    ])


FakeGang.__init__.__signature__ = _fake_gang_signature()
