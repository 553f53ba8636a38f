"""Parallel topology: one gang carved into the gangs of each parallelism.

Axes: data (dp), tensor (tp), pipeline (pp), context (cp), expert (ep, with
its expert-data gang edp), FSDP shard and replicate (sdp, rdp), model
(mp = tp x pp) and dp x cp (dpcp). The dense axes are laid out by `order`,
fastest first; with the default "tp-cp-pp-dp" and 8 ranks, tp=pp=dp=2 gives
tp gangs [0,1] [2,3] [4,5] [6,7], pp gangs [0,2] [1,3] [4,6] [5,7] and dp
gangs [0,4] [1,5] [2,6] [3,7]. See gang.h, "Parallel topology".
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Optional
import contextlib
import enum
import threading
import warnings
import weakref

from . import capi
from ._args import as_device
from ._fake import FakeGang
from ._gang import Gang
from .errors import GangInvalidArgumentError

__all__ = [
    "Axis",
    "Gangs",
    "LayoutAfterLoss",
    "split_parallel",
    "split_after_loss",
    "create_fake_gangs",
    "get_current_gangs",
    "get_default_gangs",
    "layout",
    "layout_after_loss",
    "maybe_get_current_gangs",
    "set_default_gangs",
    "set_gangs",
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

    Made three ways, which differ in what close() and ``with`` do:

    - :func:`split_parallel` (gang's own): close() frees the gangs it made,
      not root, which the caller owns; ``with split_parallel(...) as
      gangs:`` makes them the current gangs within the block and closes
      them when it ends.
    - fairseq2's :func:`create_parallel_gangs`, :func:`create_fsdp_gangs`
      and :func:`create_fake_gangs`, and ``Gangs(root=..., dp=..., ...)``
      (fairseq2's dataclass form, which takes the gangs as given, an axis
      left out being a one-rank FakeGang on root's device): as in fairseq2,
      close() destroys every gang, root included, and ``with gangs:`` only
      makes them the current gangs of the thread (see
      :func:`get_current_gangs`), leaving them open.

    close() is idempotent, also across Gangs that share gangs (as
    create_fsdp_gangs's result shares root with its argument): each gang is
    freed once.
    """

    _AXES = ("root", "dp", "tp", "pp", "cp", "ep", "edp", "sdp", "rdp", "mp", "dpcp")

    def __init__(self, root: Gang, dp=None, rdp=None, sdp=None, tp=None, pp=None, *,
                 cp=None, ep=None, edp=None, mp=None, dpcp=None):
        self._init(root, handle=None, config=None, owns_root=True)
        given = dict(dp=dp, rdp=rdp, sdp=sdp, tp=tp, pp=pp, cp=cp, ep=ep, edp=edp, mp=mp,
                     dpcp=dpcp)
        for name in self._AXES[1:]:
            gang = given[name]
            if gang is None:
                gang = FakeGang(root.device)
                self._made.append(gang)
            setattr(self, name, gang)
        if root.rank == 0:
            # fairseq2's check: the coordinator leads every parallel gang.
            for name in ("dp", "tp", "pp"):
                if getattr(self, name).rank != 0:
                    raise GangInvalidArgumentError(
                        f"Gangs: root's rank 0 is rank {getattr(self, name).rank} of the "
                        f"{name} gang; the coordinator must be rank 0 of every parallel gang")

    def _init(self, root, handle, config, owns_root):
        self._handle = handle  # the gangs_t of split_parallel, or None
        self._config = config  # split_parallel's arguments, or None
        self._made = []  # FakeGangs made for axes left out
        self._parts = []  # Gangs whose gangs this one holds (create_fsdp_gangs)
        self._owns_root = owns_root  # close() closes root and the given gangs
        self._close_on_exit = not owns_root  # split_parallel's with-block closes
        self._closed = False
        self._entered = []  # the devices of the with-blocks open on self
        self.root = root

    @classmethod
    def _split(cls, root, handle, config: dict, *, owns_root=False, parent=None):
        """The Gangs of a gangs_t from split_parallel; root None: the
        gangs_t's own root, a sub-gang of `parent` (split_after_loss)."""
        self = cls.__new__(cls)
        if root is None:
            root = parent._child(capi.gangs_get(handle, Axis.ROOT), owner=self)
        self._init(root, handle, config, owns_root)
        by_pointer = {int(root._h): root}  # one Gang per distinct handle
        for name in cls._AXES[1:]:
            axis_handle = capi.gangs_get(handle, Axis[name.upper()])
            gang = by_pointer.get(int(axis_handle))
            if gang is None:
                # A sub-gang like root: the library gives it root's stream,
                # and a fake root's sub-gangs are fake on root's device.
                gang = by_pointer[int(axis_handle)] = root._child(axis_handle, owner=self)
            setattr(self, name, gang)
        return self

    @property
    def device(self) -> Any:
        """root's device (fairseq2's Gangs.device)."""
        return self.root.device

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def close(self) -> None:
        """Frees the gangs: those split_parallel made, and, for Gangs made
        by fairseq2's functions or given to Gangs(...), root and every other
        gang too, as fairseq2's Gangs.close does. Idempotent; a gang shared
        with another Gangs is freed once."""
        if self._closed:
            return
        self._closed = True
        made, self._made = self._made, []
        for gang in made:
            gang.close()
        parts, self._parts = self._parts, []
        for part in parts:
            part.close()
        handle, self._handle = self._handle, None
        if handle is not None:
            # The gangs the gangs_t frees (root too, after a loss).
            for name in self._AXES:
                gang = getattr(self, name)
                if gang._owner is self:
                    gang._detach()
            handle.thisown = False
            capi.gangs_destroy(handle)
        if self._owns_root:
            # Gang.close is idempotent and leaves gangs another Gangs owns
            # to that one.
            for name in self._AXES:
                getattr(self, name).close()

    def __enter__(self) -> Gangs:
        """Makes these the current gangs of this thread on their device
        until the block ends (fairseq2's ``with gangs:``)."""
        device = self.device
        self._entered.append(device)  # popped by __exit__, even once closed
        _push(device, self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _pop(self._entered.pop(), self)
        if self._close_on_exit:
            self.close()

    def __repr__(self) -> str:
        if self._closed:
            return "<gang.Gangs closed>"
        sizes = " ".join(f"{name}={getattr(self, name).size}" for name in self._AXES)
        return f"<gang.Gangs {sizes}>"


# ---- current and default gangs (fairseq2's get_current_gangs, ...) ---------

_local = threading.local()  # .stacks: device -> [Gangs], this thread's
_defaults = {}  # device -> Gangs, for every thread (set_default_gangs)
_fake = weakref.WeakValueDictionary()  # device -> one-rank fake Gangs
_defaults_lock = threading.Lock()


def _current_device():
    """The calling thread's current device, as fairseq2 reads it: torch's
    default device for new tensors (``with torch.device(...)``), else the
    CPU."""
    device = as_device("cpu")
    if isinstance(device, str):
        return device
    import torch

    getter = getattr(torch, "get_default_device", None)
    return getter() if getter is not None else torch.empty(()).device


def _key(device):
    return _current_device() if device is None else as_device(device)


def _stacks() -> dict:
    stacks = getattr(_local, "stacks", None)
    if stacks is None:
        stacks = _local.stacks = {}
    return stacks


def _push(device, gangs) -> None:
    _stacks().setdefault(as_device(device), []).append(gangs)


def _pop(device, gangs) -> None:
    stack = _stacks().get(as_device(device), [])
    # Normally the top; a with-block left out of order pops its own.
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is gangs:
            del stack[i]
            return


def get_default_gangs(device: Any = None) -> Gangs:
    """The default gangs of the process for `device` (None: the current
    device, see :func:`get_current_gangs`): those set_default_gangs set,
    else one-rank fake gangs on that device (the CPU for "meta")."""
    device = _key(device)
    with _defaults_lock:
        gangs = _defaults.get(device)
        if gangs is not None:
            return gangs
        if getattr(device, "type", str(device)) == "meta":
            device = as_device("cpu")
        gangs = _fake.get(device)
        if gangs is None or gangs.closed:
            gangs = _fake[device] = create_fake_gangs(device)
        return gangs


def set_default_gangs(gangs: Gangs, *, meta: bool = False) -> None:
    """Makes `gangs` the default gangs of the process on gangs.device (and,
    with meta, on the meta device too), for every thread."""
    with _defaults_lock:
        _defaults[as_device(gangs.device)] = gangs
        if meta:
            _defaults[as_device("meta")] = gangs


@contextlib.contextmanager
def set_gangs(gangs: Gangs, *, meta: bool = False) -> Iterator[Gangs]:
    """A context manager within which `gangs` are the calling thread's
    current gangs on gangs.device (and, with meta, on the meta device);
    it leaves them open::

        with gang.set_gangs(gangs):
            assert gang.get_current_gangs(gangs.device) is gangs
    """
    device = gangs.device
    _push(device, gangs)
    if meta:
        _push("meta", gangs)
    try:
        yield
    finally:
        if meta:
            _pop("meta", gangs)
        _pop(device, gangs)


def get_current_gangs(device: Any = None) -> Gangs:
    """The calling thread's current gangs on `device`: the innermost
    ``with gangs:`` or :func:`set_gangs` block's, else
    :func:`get_default_gangs`. None means the current device, as fairseq2
    reads it: torch's default device for new tensors (the CPU unless
    ``with torch.device("cuda:0"):`` or torch.set_default_device said
    otherwise; without torch, "cpu"), so pass a CUDA gang's device."""
    device = _key(device)
    stack = _stacks().get(device)
    if stack:
        return stack[-1]
    return get_default_gangs(device)


def maybe_get_current_gangs() -> Gangs:
    """Deprecated in fairseq2 (which now returns get_current_gangs()
    here): the current gangs on the current device. Warns with a
    DeprecationWarning; use :func:`get_current_gangs`."""
    warnings.warn("maybe_get_current_gangs is deprecated, as in fairseq2; use "
                  "get_current_gangs", DeprecationWarning, stacklevel=2)
    return get_current_gangs()


def split_parallel(root: Gang, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
                   dp: Optional[int] = None, sdp: Optional[int] = None,
                   order: Optional[str] = None) -> Gangs:
    """Builds every axis's gang from `root`; collective over root, with the
    same arguments on every rank. The Gangs frees what it made on close()
    (root stays the caller's).

    Args:
        tp, pp, cp, ep: tensor, pipeline, context and expert degrees.
        dp: data-parallel degree; None: root.size / (tp*cp*pp).
        sdp: FSDP shard degree; None: dp*cp (full shard: sdp is the whole
            dp x cp gang, rdp has one rank). sdp=1 gives fairseq2's
            create_parallel_gangs layout (rdp = dp, sdp of one rank).
        order: dense axes fastest first, e.g. "tp-cp-dp-pp" (Megatron-LM);
            None: "tp-cp-pp-dp".
    Raises:
        GangInvalidArgumentError (a ValueError) for degrees that do not fit.
    """
    return _split_parallel(root, dict(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, sdp=sdp, order=order))


def _split_parallel(root: Gang, config: dict, *, owns_root=False) -> Gangs:
    handle = capi.gang_bind_split_parallel(root._h, *_degrees(**config))
    return Gangs._split(root, handle, config, owns_root=owns_root)


def create_fake_gangs(device: Any = None) -> Gangs:
    """fairseq2's fake gangs: one FakeGang of one rank on `device` (None:
    the CPU) for every axis."""
    gang = FakeGang(device)
    gangs = Gangs(root=gang, dp=gang, rdp=gang, sdp=gang, tp=gang, pp=gang, cp=gang, ep=gang,
                  edp=gang, mp=gang, dpcp=gang)
    return gangs


def layout(size: int, axis: Any, rank: int, **degrees: Any) -> list[int]:
    """The ranks of `rank`'s gang on `axis` in a gang of `size` ranks, in
    gang-rank order: the layout split_parallel builds, without processes.
    degrees: tp, pp, cp, ep, dp, sdp, order as in split_parallel.

    >>> layout(8, "dp", 1, tp=2, pp=2)
    [1, 5]
    """
    return capi.gang_bind_layout_ranks(size, *_degrees(**degrees), _axis(axis), rank, size)


# ---- after a lost rank ---------------------------------------------------------


class LayoutAfterLoss(NamedTuple):
    """The layout after a loss (:func:`layout_after_loss`): the new degrees
    (only dp differs from the old ones), the old ranks that go on in
    new-rank order (new rank i was old rank active[i]) and the survivors
    set aside, ascending."""

    tp: int
    pp: int
    cp: int
    dp: int
    ep: int
    sdp: Optional[int]
    order: Optional[str]
    active: list
    spares: list

    @property
    def degrees(self) -> dict[str, Any]:
        """The new degrees as split_parallel's keyword arguments."""
        return dict(tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep, dp=self.dp,
                    sdp=self.sdp, order=self.order)


def _loss_config(tp, pp, cp, dp, ep, sdp, order) -> dict:
    # -1 is the C default of dp and sdp, as None is split_parallel's.
    return dict(tp=tp, pp=pp, cp=cp, ep=ep, dp=None if dp == -1 else dp,
                sdp=None if sdp == -1 else sdp, order=order)


def layout_after_loss(size: int, survivors, *, tp=1, pp=1, cp=1, dp=None, ep=1, sdp=None,
                      order=None) -> LayoutAfterLoss:
    """The largest layout of the same degrees that the survivors of a gang
    of `size` ranks still fit, without processes (gang.h, "After a lost
    rank"): the data-parallel replicas (the tp*cp*pp ranks of one dp
    coordinate) that survived whole go on, dp lowered to their count (and
    further if ep or sdp must divide dp*cp, dropping the highest replicas);
    the other survivors are spares.

    survivors: the old ranks still alive, in any order. The degrees are the
    old layout's, as in split_parallel (dp and sdp: None or -1 for the
    defaults).

    >>> layout_after_loss(8, [0, 1, 2, 4, 5, 6, 7], tp=2)
    LayoutAfterLoss(tp=2, pp=1, cp=1, dp=3, ep=1, sdp=None, order=None, active=[0, 1, 4, 5, 6, 7], spares=[2])

    Raises:
        GangInvalidArgumentError: a bad configuration, a survivor out of
            range or listed twice, or no replica survived whole.
    """
    config = _loss_config(tp, pp, cp, dp, ep, sdp, order)
    survivors = list(survivors)
    active = capi.gang_bind_layout_after_loss(size, *_degrees(**config), survivors,
                                              len(survivors))
    kept = set(active)
    return LayoutAfterLoss(
        tp=tp, pp=pp, cp=cp, dp=len(active) // (tp * cp * pp), ep=ep, sdp=config["sdp"],
        order=order, active=active, spares=sorted(r for r in survivors if r not in kept))


def split_after_loss(old_gang: Gang, shrunk: Gang, *, tp=1, pp=1, cp=1, dp=None, ep=1,
                     sdp=None, order=None) -> Optional[Gangs]:
    """The gangs of the layout after a loss (:func:`layout_after_loss`):
    collective over `shrunk`, the gang ``old_gang.shrink()`` made, with the
    degrees old_gang was laid out by, the same on every rank (old_gang may
    have failed; only its rank and size are read).

    Returns, on a rank that goes on, Gangs whose root is a new gang of the
    active ranks in new-rank order, which the Gangs owns (close() frees it
    with the others; ``with`` makes them current and closes them); on a
    spare, None. Spares stay members of `shrunk` as the active ranks do:
    the program decides whether they wait there or exit.
    """
    config = _loss_config(tp, pp, cp, dp, ep, sdp, order)
    handle = capi.gang_bind_split_after_loss(old_gang._h, shrunk._h, *_degrees(**config))
    if handle is None:
        return None
    gangs = Gangs._split(None, handle, config, parent=shrunk)
    gangs._config = dict(config, dp=gangs.dp.size)
    return gangs
