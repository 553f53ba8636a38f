"""fairseq2.device, as gang provides it."""

from gang import Device, get_default_device  # noqa: F401
