"""fairseq2.gang, as gang provides it."""

from gang import *  # noqa: F401,F403
from gang import Gang, GangError  # noqa: F401
