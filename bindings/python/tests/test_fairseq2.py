"""fairseq2 and torch.distributed parity: the names and signatures a
fairseq2 user writes, fairseq2's documented examples run as written (with
tests/fairseq2_shim standing in for the fairseq2 package), FakeGang's
object broadcasts, and the side-by-side table in bindings/README.md."""

import inspect
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import gang
from multirank import free_port, run_ranks

TESTS = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(TESTS, "fairseq2_shim")
README = os.path.join(TESTS, "..", "..", "README.md")

# fairseq2's gang documentation, its two examples, verbatim.
EXAMPLE_FAKE = '''
from fairseq2.gang import create_fake_gangs
from fairseq2.device import Device

# Create fake gangs for local development
device = Device("cpu")
gangs = create_fake_gangs(device)

print(f"Root gang size: {gangs.root.size}")
print(f"Data parallel gang size: {gangs.dp.size}")
'''

EXAMPLE_DISTRIBUTED = '''
from fairseq2.gang import ProcessGroupGang, create_parallel_gangs
from fairseq2.device import get_default_device

# Initialize distributed process group
device = get_default_device()
root_gang = ProcessGroupGang.create_default_process_group(device)

# Create parallel gangs with tensor parallelism
gangs = create_parallel_gangs(root_gang, tp_size=2)

print(f"Process rank: {gangs.root.rank}")
print(f"World size: {gangs.root.size}")
print(f"TP gang size: {gangs.tp.size}")
'''


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SHIM, env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def test_fake_gangs_example_runs_as_written():
    out = subprocess.run([sys.executable, "-c", EXAMPLE_FAKE], env=_env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["Root gang size: 1", "Data parallel gang size: 1"]


def test_distributed_example_runs_as_written_on_4_ranks():
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", EXAMPLE_DISTRIBUTED],
                              env=_env(GANG_RANK=str(r), GANG_SIZE="4",
                                       GANG_INIT_METHOD=f"tcp://127.0.0.1:{port}"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(4)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    for r, (p, text) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, text
        assert text.split("\n")[:3] == [f"Process rank: {r}", "World size: 4",
                                        "TP gang size: 2"], text


def test_fake_gang_signature_and_object_broadcasts():
    g = gang.FakeGang(rank=1, size=2, device=None)
    assert (g.rank, g.size, g.device) == (1, 2, gang.Device("cpu"))
    # every rank holds this rank's objects: a broadcast from 0 leaves them
    assert g.broadcast_object({"a": 1}, 0) == {"a": 1}
    assert gang.FakeGang(1, 2).broadcast_object(None, 0) is None
    objects = ["x", 2]
    assert g.broadcast_objects(objects, source_rank=0) is None and objects == ["x", 2]
    d = {"w": np.ones(2)}
    assert g.broadcast_tensor_dict(d, src=0) is d
    assert gang.broadcast_flag(g, True) is True
    assert gang.all_sum(g, 1.5) == 3.0
    x = np.ones(2, np.float32)
    g.all_reduce(x, gang.ReduceOperation.PRODUCT)
    assert (x == 1).all()
    g.close()
    gangs = gang.create_fake_gangs("cpu")
    assert [getattr(gangs, a).size for a in ("root", "dp", "rdp", "sdp", "tp", "pp")] == [1] * 6
    gangs.close()
    with pytest.raises(gang.GangInvalidArgumentError):
        gang.FakeGang(device="tpu")


def test_fake_gang_takes_fairseq2s_arguments_and_the_older_positional_ones():
    cpu = gang.Device("cpu")
    # fairseq2: FakeGang(device, *, rank=0, size=1)
    for g in (gang.FakeGang(cpu), gang.FakeGang(device=cpu), gang.FakeGang("cpu")):
        assert (g.rank, g.size, g.device) == (0, 1, cpu)
    g = gang.FakeGang(cpu, rank=3, size=8)
    assert (g.rank, g.size) == (3, 8)
    g = gang.FakeGang(device=cpu, rank=2, size=4)
    assert (g.rank, g.size) == (2, 4)
    params = inspect.signature(gang.FakeGang).parameters
    assert list(params) == ["device", "rank", "size"]
    assert params["rank"].kind is inspect.Parameter.KEYWORD_ONLY
    # gang's older form: an int first is the rank, then size and device
    for g in (gang.FakeGang(1, 4), gang.FakeGang(1, 4, "cpu"), gang.FakeGang(1, 4, device=cpu),
              gang.FakeGang(1, size=4), gang.FakeGang(np.int64(1), 4)):
        assert (g.rank, g.size, g.device) == (1, 4, cpu)
    with pytest.raises(TypeError, match="multiple values for argument 'rank'"):
        gang.FakeGang(1, rank=2)
    with pytest.raises(TypeError, match="multiple values for argument 'device'"):
        gang.FakeGang(cpu, device=cpu)
    with pytest.raises(TypeError, match="at most 1 positional"):
        gang.FakeGang(cpu, 0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        gang.FakeGang(cpu, world_size=2)
    # fairseq2's refusals are ValueErrors
    for bad in (dict(size=0), dict(rank=2, size=2), dict(rank=-1, size=2)):
        with pytest.raises(ValueError):
            gang.FakeGang(cpu, **bad)
    with pytest.raises(ValueError):
        gang.FakeGang("meta")
    # a fake gang's sub-gangs are fake gangs on its device (fairseq2's
    # FakeGang.create_gang)
    g = gang.FakeGang(cpu, rank=2, size=4)
    sub = g.create_gang([0, 2, 3])
    assert type(sub) is gang.FakeGang and (sub.rank, sub.size, sub.device) == (1, 3, cpu)
    assert g.create_gang([0, 1]) is None
    gangs = gang.create_parallel_gangs(gang.FakeGang(cpu, rank=5, size=8), tp_size=2)
    assert all(type(getattr(gangs, a)) is gang.FakeGang for a in ("dp", "tp", "sdp", "rdp"))


def test_device_is_a_torch_device_when_torch_is_there():
    torch = pytest.importorskip("torch")
    for g in (gang.FakeGang(torch.device("cpu")), gang.FakeGang(rank=0, size=2), gang.FakeGang()):
        assert isinstance(g.device, torch.device) and g.device.type == "cpu"
    gangs = gang.create_fake_gangs(gang.Device("cpu"))
    assert gangs.root.device.type == "cpu" and gangs.device == torch.device("cpu")
    assert isinstance(gang.Device("cuda:1"), torch.device)
    # broadcast_tensor_dict makes its tensors on the gang's device
    g = gang.FakeGang(rank=0, size=2)
    t = torch.arange(3.0)
    assert g.broadcast_tensor_dict({"t": t}, src=0)["t"] is t
    # all_sum gives a tensor on the gang's device, as fairseq2's
    total = gang.all_sum(g, 1.5)
    assert isinstance(total, torch.Tensor) and total.dtype == torch.float32
    assert total.device == g.device and total.item() == 3.0
    total = gang.all_sum(g, 3)
    assert total.dtype == torch.int64 and total.item() == 6


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # import torch raises ImportError
import gang
g = gang.FakeGang("cpu", rank=1, size=2)
assert g.device == "cpu" and isinstance(g.device, str), repr(g.device)
gangs = gang.create_fake_gangs(gang.Device("cpu"))
assert gangs.device == "cpu" and gangs.root.device == "cpu"
assert gang.all_sum(g, 1.5) == 3.0 and isinstance(gang.all_sum(g, 1.5), float)
with gangs:
    assert gang.get_current_gangs() is gangs
print("ok")
"""


def test_device_is_a_string_without_torch():
    out = subprocess.run([sys.executable, "-c", WITHOUT_TORCH], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr


def _fsdp_expected(root_rank, size, tp, intra):
    """fairseq2's layout, from its definition: tp gangs of tp consecutive
    ranks; dp the ranks with the same position in their tp gang; sdp
    blocks of `intra` consecutive dp ranks, rdp the dp ranks with the same
    position in their block."""
    dp = [p for p in range(size) if p % tp == root_rank % tp]
    i = dp.index(root_rank)
    sdp = dp[i // intra * intra:(i // intra + 1) * intra]
    rdp = [q for j, q in enumerate(dp) if j % intra == i % intra]
    return dp, sdp, rdp


def _sum_over(g, value):
    x = np.array([value], dtype=np.int64)
    g.all_reduce(x)
    return int(x[0])


def _parallel_and_fsdp():
    root = gang.create()
    r = root.rank
    gangs = gang.create_parallel_gangs(root, tp_size=2)
    assert (gangs.tp.size, gangs.dp.size, gangs.pp.size) == (2, 4, 1)
    assert gangs.tp.ranks == [r // 2 * 2, r // 2 * 2 + 1]
    dp, _, _ = _fsdp_expected(r, 8, 2, 1)
    # fairseq2's create_parallel_gangs: rdp is the dp gang, sdp one rank
    assert gangs.dp.ranks == dp and gangs.rdp.ranks == dp and gangs.rdp.size == 4
    assert gangs.sdp.size == 1 and gangs.sdp.ranks == [r]
    # averaging gradients over rdp averages over every data-parallel rank
    assert _sum_over(gangs.rdp, r) == sum(dp)
    total = gang.all_sum(gangs.rdp, r)  # fairseq2's helper: a tensor
    assert int(total) == sum(dp) and str(getattr(total, "dtype", "torch.int64")) == "torch.int64"
    x = np.array([float(r)])
    gangs.rdp.all_reduce(x, gang.ReduceOperation.MEAN)
    assert x[0] == sum(dp) / 4

    # create_fsdp_gangs(gangs): full sharding, sdp = dp and rdp one rank
    fsdp = gang.create_fsdp_gangs(gangs)
    assert fsdp.sdp.ranks == dp and (fsdp.sdp.size, fsdp.rdp.size) == (4, 1)
    assert fsdp.root is root and fsdp.tp.ranks == gangs.tp.ranks and fsdp.dp.ranks == dp
    assert _sum_over(fsdp.sdp, 1) == 4 and _sum_over(fsdp.rdp, 1) == 1
    # hybrid: intra_node_size dp ranks shard, the rest replicate
    for intra in (2, 4):
        hsdp = gang.create_fsdp_gangs(gangs, intra)
        _, sdp, rdp = _fsdp_expected(r, 8, 2, intra)
        assert (hsdp.sdp.ranks, hsdp.rdp.ranks) == (sdp, rdp), intra
        assert _sum_over(hsdp.sdp, r) == sum(sdp) and _sum_over(hsdp.rdp, r) == sum(rdp)
        assert gang.create_fsdp_gangs(gangs, intra_node_size=intra).sdp.ranks == sdp
    for bad in (1, 3, 8):
        with pytest.raises(ValueError):
            gang.create_fsdp_gangs(gangs, bad)
    # gang's older spelling: 8 ranks, 4 a node (GANG_LOCAL_SIZE), tp 2: 2 dp
    # ranks a node shard, the 2 nodes replicate
    for older in (gang.create_fsdp_gangs(gangs, intra_node=True),
                  gang.create_fsdp_gangs(gangs, True)):
        assert (older.sdp.size, older.rdp.size) == (2, 2), (older.sdp.ranks, older.rdp.ranks)
        assert older.sdp.ranks == [p for p in dp if p // 4 == r // 4]
    assert gang.create_fsdp_gangs(gangs, False).sdp.ranks == dp
    # fairseq2's calls, positionally and by keyword
    t = np.full(3, r, np.float64)
    out = np.empty(3 * hsdp.sdp.size)
    hsdp.sdp.all_gather(out, t)
    parts = [np.empty(3) for _ in range(hsdp.sdp.size)]
    hsdp.sdp.all_gather_to_list(parts, t)
    assert [p[0] for p in parts] == hsdp.sdp.ranks == list(out[::3])
    objects = [r] if r == 0 else [None]
    root.broadcast_objects(objects, source_rank=0)
    assert objects == [0]
    # rank 0 serves the store the others' sub-gangs meet through: it may
    # not leave before they are done with it
    root.barrier()
    # Gangs made by fairseq2's functions own root: close() closes it (once)
    hsdp.close()
    assert root.closed and hsdp.sdp.closed and hsdp.closed
    hsdp.close()
    gangs.close()  # shares root: not closed twice
    fsdp.close()
    assert gangs.tp.closed and fsdp.sdp.closed


def test_parallel_and_fsdp_gangs_on_8_ranks():
    run_ranks(8, _parallel_and_fsdp, local_size=4)


def _fsdp_of_given_gangs():
    root = gang.create()
    r = root.rank
    dp_ranks = [p for p in range(4) if p % 2 == r % 2]
    dp = tp = None
    for ranks in ([0, 2], [1, 3]):
        made = root.create_gang(ranks)
        dp = made if made is not None else dp
    for ranks in ([0, 1], [2, 3]):
        made = root.create_gang(ranks)
        tp = made if made is not None else tp
    gangs = gang.Gangs(root=root, dp=dp, rdp=dp, sdp=gang.FakeGang(root.device), tp=tp,
                       pp=gang.FakeGang(root.device))
    assert gangs.device == root.device
    full = gang.create_fsdp_gangs(gangs)
    assert full.sdp is dp and full.rdp.size == 1 and full.tp is tp and full.root is root
    hybrid = gang.create_fsdp_gangs(gangs, 2)
    assert hybrid.sdp.ranks == dp_ranks and hybrid.rdp.size == 1
    assert _sum_over(hybrid.sdp, r) == sum(dp_ranks)
    root.barrier()
    # Gangs(...) owns what it was given: close() destroys every gang
    hybrid.close()
    assert root.closed and dp.closed and tp.closed and hybrid.sdp.closed
    full.close()
    gangs.close()


def test_fsdp_gangs_of_given_gangs_on_4_ranks():
    run_ranks(4, _fsdp_of_given_gangs)


def _close_and_current():
    root = gang.create()
    r = root.rank
    # split_parallel keeps its own rules: its with-block closes what it
    # made, not root, and makes them current meanwhile
    with gang.split_parallel(root, tp=2) as mine:
        assert gang.get_current_gangs(root.device) is mine
        assert mine.sdp.ranks == mine.dp.ranks and mine.rdp.size == 1  # full shard
    assert mine.tp.closed and not root.closed
    assert gang.get_current_gangs(root.device) is not mine

    gangs = gang.create_parallel_gangs(root, tp_size=2)
    default = gang.get_default_gangs(root.device)
    assert default.root.size == 1 and gang.get_current_gangs(root.device) is default
    # fairseq2's with gangs: current on the thread, left open
    with gangs as entered:
        assert entered is gangs
        assert gang.get_current_gangs(root.device) is gangs
        assert gang.get_current_gangs() is gangs  # the current device is the CPU
        seen = []
        thread = threading.Thread(target=lambda: seen.append(gang.get_current_gangs()))
        thread.start()
        thread.join()
        assert seen[0] is not gangs and seen[0].root.size == 1  # per thread
        with pytest.warns(DeprecationWarning):
            assert gang.maybe_get_current_gangs() is gangs
        fsdp = gang.create_fsdp_gangs(gangs)
        with gang.set_gangs(fsdp, meta=True):
            assert gang.get_current_gangs() is fsdp
            assert gang.get_current_gangs(gang.Device("meta")) is fsdp
        assert gang.get_current_gangs() is gangs
        assert gang.get_current_gangs(gang.Device("meta")) is not fsdp
    assert not gangs.closed and not root.closed
    assert gang.get_current_gangs(root.device) is default
    assert _sum_over(gangs.dp, 1) == 2  # still open

    gang.set_default_gangs(gangs, meta=True)
    try:
        assert gang.get_default_gangs() is gangs and gang.get_current_gangs() is gangs
        assert gang.get_default_gangs(gang.Device("meta")) is gangs
        with gang.set_gangs(fsdp):
            assert gang.get_current_gangs() is fsdp
    finally:
        gang.set_default_gangs(default, meta=True)
    assert gang.get_current_gangs() is default
    root.barrier()
    # close() frees root too, once, however many Gangs share it
    gangs.close()
    assert root.closed and gangs.tp.closed and gangs.dp.closed and gangs.closed
    gangs.close()
    fsdp.close()
    assert fsdp.sdp.closed
    with pytest.raises(gang.GangInvalidArgumentError, match="closed gang"):
        root.barrier()
    # a with-block whose gangs were closed within ends cleanly
    gangs = gang.create_parallel_gangs(gang.create(backend="fake", rank=r, size=4), tp_size=2)
    with gangs:
        gangs.close()
    assert gang.get_current_gangs() is default


def test_close_and_current_gangs_on_4_ranks():
    run_ranks(4, _close_and_current)


def test_gangs_checks_the_coordinators_ranks():
    root = gang.FakeGang(rank=0, size=4)
    with pytest.raises(ValueError, match="rank 0"):
        gang.Gangs(root=root, dp=gang.FakeGang(rank=1, size=2))
    gangs = gang.Gangs(root=root, dp=gang.FakeGang(rank=0, size=2))
    assert gangs.tp.size == 1 and gangs.device == root.device
    gangs.close()
    assert root.closed


FAIRSEQ2_CURRENT_GANGS = """
import warnings
from fairseq2.device import Device
from fairseq2.gang import (FakeGang, Gangs, create_fake_gangs, get_current_gangs,
                           get_default_gangs, maybe_get_current_gangs, set_default_gangs,
                           set_gangs)

device = Device("cpu")
gang = FakeGang(device, rank=0, size=8)
gangs = Gangs(root=gang, dp=gang, rdp=gang, sdp=gang, tp=gang, pp=gang)
with gangs:
    assert get_current_gangs() is gangs
with set_gangs(gangs):
    assert get_current_gangs(device) is gangs
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    assert maybe_get_current_gangs() is get_default_gangs()
print(get_current_gangs().root.size, gangs.root.device.type)
gangs.close()
"""


def test_fairseq2s_current_gangs_as_written():
    pytest.importorskip("torch")  # fairseq2's Device is a torch.device
    out = subprocess.run([sys.executable, "-c", FAIRSEQ2_CURRENT_GANGS], env=_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "1 cpu\n"


# ---- the table in bindings/README.md ---------------------------------------


def _table_rows():
    text = open(README).read()
    start = text.index("<!-- parity table")
    rows = []
    for line in text[start:].split("\n")[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("gang", "---") or set(cells[0]) <= set("-"):
            continue
        rows.append(cells)
    return rows


def _entries(cell):
    """`a.b(x, y)` entries of a cell: (name, [parameter names])."""
    for m in re.finditer(r"`([\w.]+)(?:\(([^)]*)\))?`", cell):
        params = [p.split("=")[0].strip() for p in (m.group(2) or "").split(",")]
        yield m.group(1), [p for p in params if p and p not in ("*", "...")]


def _resolve(name):
    head, _, rest = name.partition(".")
    obj = {"gang": gang, "Gang": gang.Gang, "Gangs": gang.Gangs}[head]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def _parameters(obj):
    target = obj.fget if isinstance(obj, property) else obj
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return set()


def test_readme_table_matches_the_package():
    rows = _table_rows()
    assert len(rows) >= 20, "the parity table is missing from bindings/README.md"
    for gang_cell, fairseq2_cell, _torch_cell in rows:
        ours = list(_entries(gang_cell))
        assert ours, gang_cell
        for name, params in ours:
            obj = _resolve(name)
            missing = set(params) - _parameters(obj)
            assert not missing, f"{name} lacks parameters {missing}"
        # fairseq2's names, with their keyword arguments, are gang's too
        ours_by_tail = {n.rsplit(".", 1)[-1]: n for n, _ in ours}
        for m in re.finditer(r"`([\w.]+)\(([^)]*)\)`", fairseq2_cell):
            tail = m.group(1).rsplit(".", 1)[-1]
            assert tail in ours_by_tail, (m.group(1), gang_cell)
            keywords = set(re.findall(r"(\w+)=", m.group(2)))
            accepted = _parameters(_resolve(ours_by_tail[tail]))
            assert keywords <= accepted, (m.group(0), keywords - accepted)
