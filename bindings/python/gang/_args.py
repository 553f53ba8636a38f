"""What the API's arguments may be: ranks and counts, timeouts, devices."""

from __future__ import annotations

from typing import Any, Union
import datetime
import enum

from . import capi
from .errors import GangInvalidArgumentError, GangTypeError

__all__ = ["DeviceType", "timeout_ms"]

# What a timeout may be given as: seconds, a timedelta, or None (the
# default).
Timeout = Union[int, float, datetime.timedelta, None]

_MS = datetime.timedelta(milliseconds=1)


def _index(name: str, value) -> int:
    """value as an int (ranks, tags, colors): ints and numpy integers."""
    if type(value) is int:
        return value
    try:
        if isinstance(value, bool):
            raise TypeError
        return int(value.__index__())
    except (AttributeError, TypeError):
        raise GangTypeError(f"{name} must be an int, got {type(value).__name__} "
                            f"{value!r}") from None


def timeout_ms(timeout: Timeout) -> int:
    """A timeout as gang's C API takes it: whole milliseconds from seconds
    (an int or float) or a datetime.timedelta; None is 0, which asks for
    the default (GANG_TIMEOUT_MS, else 600 s). Any other timeout is at
    least 1 ms, so that a short one never reads as the default. The one
    conversion gang and gang.torch use."""
    if timeout is None:
        return 0
    if isinstance(timeout, datetime.timedelta):
        return max(1, timeout // _MS)  # exact: no float on the way
    return max(1, int(timeout * 1000))


class DeviceType(enum.IntEnum):
    """Where a gang's buffers live (gang_device_type_t)."""

    CPU = capi.GANG_DEVICE_CPU
    CUDA = capi.GANG_DEVICE_CUDA


def _parse_device(device: Any) -> tuple[DeviceType, int]:
    """"cpu", "cuda", "cuda:N" (or a torch.device) -> (DeviceType, index),
    -1 for no index."""
    text = str(device)
    kind, _, index = text.partition(":")
    types = {"cpu": DeviceType.CPU, "cuda": DeviceType.CUDA}
    if kind not in types or (index and not index.isdigit()):
        raise GangInvalidArgumentError(f"device {text!r}: expected 'cpu', 'cuda' or 'cuda:N'")
    return types[kind], int(index) if index else -1


# torch.device once torch has been looked for: None before, False without
# torch (devices are then strings).
_torch_device = None


def as_device(spec: Any) -> Any:
    """A device as fairseq2 and torch spell it: a torch.device ("cpu",
    "cuda", "cuda:N") when torch can be imported, else the string itself.
    Imports torch the first time it is called, not before."""
    global _torch_device
    if _torch_device is None:
        try:
            import torch
        except (ImportError, OSError):
            _torch_device = False
        else:
            _torch_device = torch.device
    return _torch_device(spec) if _torch_device else str(spec)
