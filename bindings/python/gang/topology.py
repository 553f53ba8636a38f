"""Parallel topology: one gang carved into the gangs of each parallelism.

Axes: data (dp), tensor (tp), pipeline (pp), context (cp), expert (ep, with
its expert-data gang edp), FSDP shard and replicate (sdp, rdp), model
(mp = tp x pp) and dp x cp (dpcp). The dense axes are laid out by `order`,
fastest first; with the default "tp-cp-pp-dp" and 8 ranks, tp=pp=dp=2 gives
tp gangs [0,1] [2,3] [4,5] [6,7], pp gangs [0,2] [1,3] [4,6] [5,7] and dp
gangs [0,4] [1,5] [2,6] [3,7]. See gang.h, "Parallel topology".
"""

import enum

from . import capi
from ._gang import FakeGang, Gang, detect_env
from .errors import GangInvalidArgumentError

__all__ = [
    "Axis",
    "Gangs",
    "split_parallel",
    "create_parallel_gangs",
    "create_fsdp_gangs",
    "create_fake_gangs",
    "layout",
]


class Axis(enum.IntEnum):
    """The axes of a Gangs (gang_axis_t)."""

    ROOT = capi.GANG_AXIS_ROOT
    DP = capi.GANG_AXIS_DP
    TP = capi.GANG_AXIS_TP
    PP = capi.GANG_AXIS_PP
    CP = capi.GANG_AXIS_CP
    EP = capi.GANG_AXIS_EP
    EDP = capi.GANG_AXIS_EDP
    SDP = capi.GANG_AXIS_SDP
    RDP = capi.GANG_AXIS_RDP
    MP = capi.GANG_AXIS_MP
    DPCP = capi.GANG_AXIS_DPCP


def _axis(axis) -> Axis:
    if isinstance(axis, str):
        try:
            return Axis[axis.upper()]
        except KeyError:
            raise GangInvalidArgumentError(f"unknown axis {axis!r}; expected one of "
                             f"{', '.join(a.name.lower() for a in Axis)}") from None
    return Axis(axis)


def _degrees(tp=1, pp=1, cp=1, ep=1, dp=None, sdp=None, order=None) -> tuple:
    """The arguments of the capi helpers: tp, cp, pp, dp, ep, sdp, order
    (0 for dp and sdp keeps the library's default)."""
    given = dict(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, sdp=sdp)
    for name, degree in given.items():
        if degree is not None and (not isinstance(degree, int) or degree < 1):
            raise GangInvalidArgumentError(f"{name} must be a positive int, got {degree!r}")
    return (tp, cp, pp, dp or 0, ep, sdp or 0, order)


class Gangs:
    """The gangs of every axis: root, dp, tp, pp, cp, ep, edp, sdp, rdp, mp
    and dpcp, each a Gang (axes with the same members share one).

    :func:`split_parallel` (and fairseq2's :func:`create_parallel_gangs`,
    :func:`create_fsdp_gangs`) carve them from a root gang, which Gangs
    does not own; close() frees the others. ``Gangs(root=..., dp=..., ...)``
    (fairseq2's dataclass form) takes them as given, an axis left out being
    a one-rank FakeGang on root's device.
    """

    _AXES = ("root", "dp", "tp", "pp", "cp", "ep", "edp", "sdp", "rdp", "mp", "dpcp")

    def __init__(self, root: Gang, dp=None, rdp=None, sdp=None, tp=None, pp=None, *,
                 cp=None, ep=None, edp=None, mp=None, dpcp=None):
        self._handle = None
        self._config = None
        self.root = root
        given = dict(dp=dp, rdp=rdp, sdp=sdp, tp=tp, pp=pp, cp=cp, ep=ep, edp=edp, mp=mp,
                     dpcp=dpcp)
        self._made = []  # the FakeGangs made for axes left out
        for name in self._AXES[1:]:
            gang = given[name]
            if gang is None:
                gang = FakeGang(rank=0, size=1, device=root.device)
                self._made.append(gang)
            setattr(self, name, gang)

    @classmethod
    def _split(cls, root: Gang, handle, config: dict):
        """The Gangs of a gangs_t from split_parallel."""
        self = cls.__new__(cls)
        self._handle = handle
        self._config = config
        self._made = []
        self.root = root
        by_pointer = {int(root._h): root}  # one Gang per distinct handle
        for name in cls._AXES[1:]:
            axis_handle = capi.gangs_get(handle, Axis[name.upper()])
            gang = by_pointer.get(int(axis_handle))
            if gang is None:
                gang = by_pointer[int(axis_handle)] = Gang(axis_handle, owner=self)
                # The library gives sub-gangs the root's stream; so does Python.
                gang._follow, gang._stream_set = root._follow, root._stream_set
            setattr(self, name, gang)
        return self

    def close(self) -> None:
        """Frees the gangs split_parallel made (not root). Idempotent."""
        made, self._made = self._made, []
        for gang in made:
            gang.close()
        handle, self._handle = self._handle, None
        if handle is None:
            return
        for name in self._AXES[1:]:
            gang = getattr(self, name)
            if gang is not self.root:
                gang._detach()
        handle.thisown = False
        capi.gangs_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        sizes = " ".join(f"{name}={getattr(self, name).size}" for name in self._AXES)
        return f"<gang.Gangs {sizes}>"


def split_parallel(root: Gang, tp=1, pp=1, cp=1, ep=1, dp=None, sdp=None, order=None) -> Gangs:
    """Builds every axis's gang from `root`; collective over root, with the
    same arguments on every rank.

    Args:
        tp, pp, cp, ep: tensor, pipeline, context and expert degrees.
        dp: data-parallel degree; None: root.size / (tp*cp*pp).
        sdp: FSDP shard degree; None: dp*cp (full shard).
        order: dense axes fastest first, e.g. "tp-cp-dp-pp" (Megatron-LM);
            None: "tp-cp-pp-dp".
    Raises:
        GangInvalidArgumentError (a ValueError) for degrees that do not fit.
    """
    config = dict(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, sdp=sdp, order=order)
    handle = capi.gang_bind_split_parallel(root._h, *_degrees(**config))
    return Gangs._split(root, handle, config)


def create_parallel_gangs(root: Gang, *, tp_size: int = 1, tensor_parallel_size=None) -> Gangs:
    """fairseq2's data and tensor parallel gangs: tp gangs of tp_size
    consecutive ranks, dp across them. Collective over root.
    (tensor_parallel_size is tp_size's older name.)"""
    if tensor_parallel_size is not None:
        tp_size = tensor_parallel_size
    return split_parallel(root, tp=tp_size)


def create_fsdp_gangs(gangs: Gangs, intra_node: bool = False, *, intra_node_size=None) -> Gangs:
    """fairseq2's FSDP gangs from the Gangs of create_parallel_gangs (or
    split_parallel): with intra_node, the dp gang is sharded (sdp) over the
    ranks of each node and replicated (rdp) across nodes; without, sdp is
    the whole dp gang and rdp has one rank. intra_node_size overrides the
    number of dp ranks a node holds (default: the launcher's local size
    divided by tp*cp*pp). Collective over root; returns new Gangs from the
    same root and degrees (close the old ones when done with them)."""
    if gangs._config is None:
        raise GangInvalidArgumentError("create_fsdp_gangs needs Gangs made by "
                                       "create_parallel_gangs or split_parallel")
    config = dict(gangs._config)
    if intra_node_size is None and intra_node:
        local = detect_env()["local_size"]
        if local is None or local < 1:
            raise GangInvalidArgumentError(
                "create_fsdp_gangs(intra_node=True): the launcher does not say how many "
                "ranks a node runs (LOCAL_WORLD_SIZE, GANG_LOCAL_SIZE); pass intra_node_size")
        model = (config.get("tp") or 1) * (config.get("cp") or 1) * (config.get("pp") or 1)
        intra_node_size = max(1, local // model)
    config["sdp"] = intra_node_size
    return split_parallel(gangs.root, **config)


def create_fake_gangs(device=None) -> Gangs:
    """fairseq2's fake gangs: one FakeGang of one rank on `device` for
    every axis."""
    gang = FakeGang(rank=0, size=1, device=device)
    gangs = Gangs(root=gang, dp=gang, rdp=gang, sdp=gang, tp=gang, pp=gang, cp=gang, ep=gang,
                  edp=gang, mp=gang, dpcp=gang)
    gangs._made = [gang]
    return gangs


def layout(size: int, axis, rank: int, **degrees) -> list:
    """The ranks of `rank`'s gang on `axis` in a gang of `size` ranks, in
    gang-rank order: the layout split_parallel builds, without processes.
    degrees: tp, pp, cp, ep, dp, sdp, order as in split_parallel.

    >>> layout(8, "dp", 1, tp=2, pp=2)
    [1, 5]
    """
    return capi.gang_bind_layout_ranks(size, *_degrees(**degrees), _axis(axis), rank, size)
