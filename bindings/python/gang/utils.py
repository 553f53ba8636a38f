"""Helpers in the shape fairseq and fairseq2 training code calls them: an
older home of what gang.compat holds now (gang exports them all)."""

from .compat.fairseq import all_gather_list, all_reduce_dict
from .compat.fairseq2 import (Device, ProcessGroupGang, all_sum, broadcast_flag,
                              get_default_device)

__all__ = [
    "Device",
    "ProcessGroupGang",
    "all_gather_list",
    "all_reduce_dict",
    "all_sum",
    "broadcast_flag",
    "get_default_device",
]
