"""Buffers: how Python objects become gang's (pointer, count, dtype).

Three kinds of objects work, all without copies:

- anything with the buffer protocol: numpy arrays, bytearray, array.array,
  memoryview (the dtype comes from the buffer's format);
- tensors that speak DLPack (``__dlpack__``): torch tensors above all, also
  on CUDA, bfloat16 and bool included; a tensor that requires grad is used
  through ``detach()``, which shares its memory, as torch.distributed does;
- on a CUDA gang, objects with ``__cuda_array_interface__`` (CuPy, Numba).

Device memory also says which GPU holds it and on which CUDA stream its
producer orders it (AddressView's ``device`` and ``stream``), which the gang
checks and follows.

16-bit floats whose type Python lacks (bfloat16 in numpy) travel as
uint16/int16 views with an explicit ``dtype=``. Every problem raises a
:class:`GangInvalidArgumentError` (a ValueError), or a :class:`GangTypeError`
(also a TypeError) for a type problem, saying how to fix it.
"""

import array
import sys

from . import capi
from ._dtypes import BY_KIND as _BY_KIND, HINT as _HINT, DType, as_dtype, find_dtype
from .errors import GangInvalidArgumentError, GangTypeError

try:  # numpy is optional; outputs mirror numpy inputs when it is there.
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


# A buffer format's character -> its kind in _dtypes.TABLE.
_KINDS = {
    "b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
    "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
    "e": "f", "f": "f", "d": "f", "?": "b",
}
_NATIVE_PREFIXES = "@=" + ("<" if sys.byteorder == "little" else ">!")

_CONTIGUOUS_HINT = "pass np.ascontiguousarray(x), or x.contiguous() for a tensor"

# DLPack device types.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3
_DL_KINDS = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}


def _kind(fmt: str, itemsize: int):
    """(kind, itemsize) of a native single-element format; None otherwise."""
    if fmt[:1] in _NATIVE_PREFIXES:
        fmt = fmt[1:]
    kind = _KINDS.get(fmt)
    return None if kind is None else (kind, itemsize)


# format string -> DType or None; a format fixes its itemsize. Filled lazily.
_BY_FORMAT = {}


def _natural_dtype(mv: memoryview):
    """The DType a buffer's format stands for; None if gang has none."""
    try:
        return _BY_FORMAT[mv.format]
    except KeyError:
        dt = _BY_FORMAT[mv.format] = _BY_KIND.get(_kind(mv.format, mv.itemsize))
        return dt


class AddressView(int):
    """Memory gang reads through a pointer rather than the buffer protocol:
    a DLPack tensor's, or device memory's (``__cuda_array_interface__``).
    The int is the address (capi takes it as the pointer); ``shape`` and
    ``count`` describe the elements, ``keep`` is what keeps them alive.

    For device memory, ``device`` is its CUDA ordinal (-1 where the object
    does not tell) and ``stream`` the stream its producer orders it on: a
    cudaStream_t as an int, 0 for the legacy default stream (as
    gang_set_cuda_stream takes NULL), 2 for the per-thread default stream;
    None where the producer asks for no synchronisation. ``what`` names
    the operand in errors."""

    stream = None
    device = -1
    what = "x"


def _check_device(what: str, device: bool, on_device: bool, typename: str) -> None:
    if device and not on_device:
        raise GangTypeError(
            f"{what}: a CUDA gang needs device memory (a CUDA tensor, or an "
            f"object with __cuda_array_interface__), got host memory in a "
            f"{typename}; move it with .cuda() or .to(gang.device)")
    if on_device and not device:
        raise GangTypeError(
            f"{what}: device memory on a CPU gang; copy it to the host with "
            f".cpu(), or create the gang with device='cuda'")


def _address_view(address: int, shape: tuple, keep) -> AddressView:
    count = 1
    for n in shape:
        count *= n
    v = AddressView(address or 0)
    v.shape, v.count, v.keep = shape, count, keep
    return v


def _dlpack_view(obj, writable: bool, dtype, what: str, device: bool) -> tuple:
    """(AddressView, DType, count) of an object with __dlpack__."""
    if getattr(obj, "requires_grad", False):
        obj = obj.detach()  # the same memory, outside autograd
    try:
        capsule = obj.__dlpack__()
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise GangTypeError(f"{what}: its __dlpack__ failed ({e})") from None
    (address, dev_type, dev_id, code, bits, lanes, shape, contiguous,
     readonly) = capi.dlpack_info(capsule)
    _check_device(what, device, dev_type == _DL_CUDA, type(obj).__name__)
    if dev_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST):
        raise GangTypeError(f"{what}: DLPack device type {dev_type} is neither CPU nor CUDA")
    if not contiguous:
        raise GangInvalidArgumentError(f"{what} must be C-contiguous; {_CONTIGUOUS_HINT}")
    if writable and readonly:
        raise GangInvalidArgumentError(f"{what} is read-only; gang writes into it")
    natural = _BY_KIND.get((_DL_KINDS.get(code), bits // 8)) if lanes == 1 else None
    # torch before 2.0 exports bool as uint8: its dtype says which.
    tdt = getattr(obj, "dtype", None)
    if natural is DType.UINT8 and tdt is not None and str(tdt) == "torch.bool":
        natural = DType.BOOL
    dt = _choose(what, natural, dtype, bits // 8, _DL_KINDS.get(code) in ("i", "u"),
                 f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes)")
    v = _address_view(address, shape, capsule)
    if dev_type == _DL_CUDA:
        # __dlpack__() without a stream argument promises the data ready
        # for the legacy default stream.
        v.device, v.stream, v.what = dev_id, 0, what
    return v, dt, v.count


def meta_tensor_error(what: str) -> GangTypeError:
    """The error for a meta tensor (torch's device "meta"), which has a
    shape and a dtype but no memory: its data_ptr() is 0, and copies into
    it do nothing."""
    return GangTypeError(
        f"{what}: a meta tensor (device 'meta') holds no data, only a shape "
        f"and dtype, so there is nothing to send or receive; make a real one "
        f"first (torch.empty_like(x, device='cpu'), or module.to_empty(device=...))")


# torch dtype -> the gang DType a host tensor of it gets when the caller
# names none: learned by the full path below, then read by the quick one.
_TORCH_NATURAL = {}


def _torch_view(t, writable: bool, dtype, what: str, device: bool) -> tuple:
    """(AddressView, DType, count) of a torch tensor, from torch's own
    description (quicker than DLPack, and it covers bool, which torch's
    DLPack export lacked before 2.0). Parameters that require grad are
    used as they are: gang writes their memory outside autograd, as
    torch.distributed does."""
    _check_device(what, device, t.is_cuda, type(t).__name__)
    if not t.is_contiguous():
        raise GangInvalidArgumentError(f"{what} must be C-contiguous; {_CONTIGUOUS_HINT}")
    itemsize = t.element_size()
    dt = _choose(what, find_dtype(t.dtype), dtype, itemsize,
                 not t.dtype.is_floating_point and itemsize == 2, f"dtype {t.dtype}")
    if dtype is None and not device:
        _TORCH_NATURAL[t.dtype] = dt
        capi.fast_learn_tensor(type(t), t.dtype, dt)  # all_reduce and broadcast in C
    address = t.data_ptr()
    if address == 0 and t.is_meta:
        raise meta_tensor_error(what)
    v = _address_view(address, tuple(t.shape), t)
    if device:
        # Ordered as torch.distributed orders it: on the stream current on
        # the tensor's device when the call is made (handle 0 is torch's
        # default stream, the legacy one).
        v.device = index = t.get_device()
        v.stream = _torch_current_stream(index)
        v.what = what
    return v, dt, v.count


_current_stream = None  # torch.cuda.current_stream, once torch is needed


def _torch_current_stream(index: int) -> int:
    """The handle of torch's current stream on CUDA device `index`."""
    global _current_stream
    if _current_stream is None:
        import torch

        _current_stream = torch.cuda.current_stream
    return _current_stream(index).cuda_stream


# class -> whether it is a torch tensor class, learned as they come.
_TENSOR_CLASSES = {}


def is_tensor(obj) -> bool:
    """Whether obj is a torch tensor (or Parameter), without importing
    torch."""
    cls = type(obj)
    known = _TENSOR_CLASSES.get(cls)
    if known is None:
        known = _TENSOR_CLASSES[cls] = (cls.__module__.startswith("torch")
                                        and hasattr(cls, "data_ptr"))
    return known


def _typestr_dtype(typestr: str):
    """The DType of a __cuda_array_interface__ typestr ("<f4"); None if none."""
    order, kind, size = typestr[:1], typestr[1:2], typestr[2:]
    if order not in "<|=" or not size.isdigit() or sys.byteorder != "little":
        return None
    return _BY_KIND.get((kind, int(size)))


def _cai_view(obj, writable: bool, dtype, what: str) -> tuple:
    """(AddressView, DType, count) of an object with __cuda_array_interface__."""
    cai = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    typestr = cai["typestr"]
    address, readonly = cai["data"]
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
    v = _address_view(address, shape, obj)
    strides = cai.get("strides")
    if strides is not None and v.count > 1:
        want, step = [], itemsize
        for n in reversed(shape):
            want.append(step)
            step *= n
        if tuple(strides) != tuple(reversed(want)):
            raise GangInvalidArgumentError(f"{what} must be C-contiguous; {_CONTIGUOUS_HINT}")
    if cai.get("mask") is not None:
        raise GangInvalidArgumentError(f"{what}: masked device arrays are not supported")
    if writable and readonly:
        raise GangInvalidArgumentError(f"{what} is read-only; gang writes into it")
    dt = _choose(what, _typestr_dtype(typestr), dtype, itemsize, typestr[1:2] in "iu",
                 f"device typestr {typestr!r}")
    v.stream = _cai_stream(what, cai)
    v.what = what
    # The interface names no device; CuPy's arrays carry theirs as .device.id.
    index = getattr(getattr(obj, "device", None), "id", None)
    if type(index) is int:
        v.device = index
    return v, dt, v.count


def _cai_stream(what: str, cai: dict):
    """The stream a __cuda_array_interface__ asks consumers to order on
    (version 3's ``stream``): None asks for no synchronisation; 1 is the
    legacy default stream (returned as 0, gang_set_cuda_stream's NULL), 2
    the per-thread default stream; any other int a cudaStream_t. Without
    the field (versions before 3 too), the legacy default stream."""
    stream = cai.get("stream", 1)
    if stream is None:
        return None
    if type(stream) is not int:
        try:
            if isinstance(stream, bool):
                raise TypeError
            stream = int(stream.__index__())
        except (AttributeError, TypeError):
            raise GangTypeError(f"{what}: __cuda_array_interface__ stream {stream!r} is "
                                f"not an int or None") from None
    if stream < 0:
        raise GangInvalidArgumentError(
            f"{what}: __cuda_array_interface__ stream {stream} is not a stream")
    return 0 if stream == 1 else stream


def _choose(what: str, natural, dtype, itemsize: int, integer: bool, described: str) -> DType:
    """The dtype of an operand: `natural` (what the object says), or the
    explicit `dtype`, which must agree with it except that a 16-bit integer
    may carry a 16-bit float's bits."""
    if dtype is None:
        if natural is None:
            raise GangTypeError(f"{what}: {described} has no gang dtype{_HINT}")
        return natural
    dt = as_dtype(dtype)
    if natural is not dt and not (itemsize == dt.itemsize == 2 and integer
                                  and dt in (DType.FLOAT16, DType.BFLOAT16)):
        raise GangTypeError(f"{what}: dtype {dt.name.lower()} does not match its {described}")
    return dt


# Types without the buffer protocol, learned as they come.
_NO_BUFFER = set()


def view(obj, *, writable: bool = False, dtype=None, what: str = "x", device: bool = False):
    """Borrows obj: returns (memoryview or AddressView, DType, element
    count). ``device`` says the gang is a CUDA gang, whose operands are
    device memory.

    Raises GangTypeError for an object gang cannot read, with no matching
    gang dtype (or one that differs from ``dtype``), or memory on the wrong
    side (host for a CUDA gang, device for a CPU gang);
    GangInvalidArgumentError for memory that is not C-contiguous, or
    read-only where ``writable``.
    """
    cls = type(obj)
    if dtype is None and not device and _TENSOR_CLASSES.get(cls):
        # The common torch case, with as few calls into torch as it takes: a
        # contiguous host tensor of a dtype seen before (_torch_view learns
        # them). Anything else takes the full path below.
        dt = _TORCH_NATURAL.get(obj.dtype)
        if dt is not None and not obj.is_cuda and obj.is_contiguous():
            address = obj.data_ptr()
            if address:
                v = AddressView(address)
                v.shape, v.count, v.keep = obj.shape, obj.numel(), obj
                return v, dt, v.count
    if cls not in _NO_BUFFER and (not device or not hasattr(obj, "__dlpack__")):
        try:
            mv = memoryview(obj)
        except TypeError:
            _NO_BUFFER.add(cls)  # torch tensors: not again
            mv = None
        if mv is not None:
            if device:
                _check_device(what, device, False, cls.__name__)
            # The common case, inline: a contiguous buffer of a known format.
            if dtype is None and mv.c_contiguous and not (writable and mv.readonly):
                natural = _BY_FORMAT.get(mv.format)
                if natural is not None:
                    return mv, natural, mv.nbytes // mv.itemsize
            return _memoryview_view(mv, writable, dtype, what)
    if is_tensor(obj):
        return _torch_view(obj, writable, dtype, what, device)
    if hasattr(obj, "__dlpack__"):
        return _dlpack_view(obj, writable, dtype, what, device)
    if hasattr(obj, "__cuda_array_interface__"):
        _check_device(what, device, True, type(obj).__name__)
        return _cai_view(obj, writable, dtype, what)
    raise GangTypeError(
        f"{what}: expected a numpy array, a torch tensor or another buffer "
        f"(bytearray, array.array, memoryview), got {type(obj).__name__}"
        + ("; wrap it first: np.asarray(x)" if isinstance(obj, (list, tuple, int, float))
           else ""))


def _memoryview_view(mv: memoryview, writable: bool, dtype, what: str) -> tuple:
    if not mv.c_contiguous:
        raise GangInvalidArgumentError(f"{what} must be C-contiguous; {_CONTIGUOUS_HINT}")
    if writable and mv.readonly:
        raise GangInvalidArgumentError(
            f"{what} is read-only (bytes, a numpy scalar or a read-only array); gang "
            f"writes into it: pass a writable array, e.g. np.array({what})")
    natural = _natural_dtype(mv)
    n = mv.nbytes // mv.itemsize if mv.itemsize else 0
    if dtype is None and natural is not None:
        return mv, natural, n
    fmt = mv.format[-1:]
    return mv, _choose(what, natural, dtype, mv.itemsize, fmt in "hH",
                       f"buffer format {mv.format!r}"), n


def shape_of(v) -> tuple:
    """The operand's shape; () for a scalar."""
    return tuple(v.shape or ())


def new_like(obj, v, shape: tuple):
    """A new, uninitialised buffer of obj's type and element type.

    torch tensors give a tensor of `shape` on obj's device (obj.new_empty);
    numpy arrays a numpy array of `shape`; everything else a flat buffer of
    prod(shape) elements: an array.array where the format is an array
    typecode, else a memoryview over a bytearray (or, for formats memoryview
    cannot cast to, such as 'e', a numpy array).
    """
    if is_tensor(obj):
        return obj.new_empty(shape)
    if isinstance(v, AddressView):
        raise GangTypeError("gang cannot allocate device memory (or memory of a DLPack "
                            "producer other than torch): pass the output buffer (out=...)")
    if _np is not None and isinstance(obj, _np.ndarray):
        return _np.empty(shape, dtype=obj.dtype)
    count = 1
    for n in shape:
        count *= n
    fmt = v.format.lstrip(_NATIVE_PREFIXES)
    if fmt in array.typecodes:
        return array.array(fmt, bytes(count * v.itemsize))
    try:
        return memoryview(bytearray(count * v.itemsize)).cast(fmt)
    except (TypeError, ValueError):
        if _np is None:
            raise GangTypeError(f"cannot allocate a buffer of format {v.format!r}") from None
        return _np.empty(count, dtype=_np.dtype(v.format))


def _multi_dim(obj, v) -> bool:
    """Whether rows of obj are its first dimension (numpy arrays and
    tensors of 2 or more dimensions)."""
    return len(shape_of(v)) > 1 and (isinstance(v, AddressView) or (
        _np is not None and isinstance(obj, _np.ndarray)))


def rows(obj, v) -> tuple:
    """(leading dimension, elements per row) of an operand, used by the
    variable-size collectives; a flat or scalar buffer has 1-element rows."""
    count = v.count if isinstance(v, AddressView) else (
        v.nbytes // v.itemsize if v.itemsize else 0)
    if not _multi_dim(obj, v):
        return count, 1
    shape = shape_of(v)
    per_row = 1
    for n in shape[1:]:
        per_row *= n
    return shape[0], per_row


def rows_shape(obj, v, nrows: int, per_row: int) -> tuple:
    """The shape of a buffer of nrows rows like obj's."""
    if _multi_dim(obj, v):
        return (nrows,) + shape_of(v)[1:]
    return (nrows * per_row,)
