"""torch_ddp: torch.distributed on gloo and on gang, side by side, in one run.

    PYTHONPATH=build/bindings/torch/torch-2.15.0/lib:build/bindings/python \\
      /var/cache/gang-torch-venv/torch-2.15.0/bin/torchrun --nproc_per_node N \\
      bench/torch_ddp.py [--quick] [--models 1M,8M,50M] [--sizes 8,64K,1M,16M]

Both rank counts, 2 and 4, with one command and one table (the script
starts torchrun itself, once per count, and prints what rank 0 of each
reported):

    PYTHONPATH=build/bindings/torch/torch-2.15.0/lib:build/bindings/python \\
      /var/cache/gang-torch-venv/torch-2.15.0/bin/python bench/torch_ddp.py --launch 2,4

Each rank makes the default process group on the gang backend
(init_process_group("gang"): gang_torch, built by tests/torch/gang_torch_build.py) and a
second group of the same ranks on gloo (new_group(backend="gloo")), then,
in the same processes:

  DDP       trains one MLP (`layers` Linear(w, w) + ReLU, w chosen for each
            requested parameter count, a small batch so that communication
            dominates, SGD) twice from the same weights: one copy wrapped in
            DistributedDataParallel on the gloo group, one on the gang group.
            Warm-up steps, then timed steps in rounds that alternate the two,
            so that load from elsewhere hits both alike. Also times the same
            step without DDP (compute only, no communication), and checks
            that both copies end with the same weights.
  all_reduce  float32 SUM in place, blocking, by size, three ways:
            dist.all_reduce on the gloo group, dist.all_reduce on the gang
            group (through torch.distributed and the gang.torch backend), and
            gang's own Gang.all_reduce on the very gang behind the gang group
            (gang.torch.gang_of()). Variants interleaved in rounds; each round
            starts with a barrier on the variant's group and a few untimed
            calls; every call is timed alone.

Rank 0 times and prints (medians, and means where shown). One thread per
rank (torch.set_num_threads(1)). --launch 2,4 takes about 50 s on a quiet
2-core machine, --quick about 20 s. Not a test: run it by hand, on a machine
as quiet as you can find; with more ranks than cores the figures show how
each transport copes with sharing a core as much as its speed.
"""

import argparse
import copy
import datetime
import gc
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_MODELS = "1M,8M,50M"
QUICK_MODELS = "1M,8M"
DEFAULT_SIZES = "8,64K,1M,16M"

# The backend's overhead over gang's own all_reduce that the gang backend
# aims at: (from this many bytes on, at most this ratio).
TARGETS = [(0, 1.5), (64 << 10, 1.1)]


# ---- options -----------------------------------------------------------------


def _parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmg]?)(i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8, 64K, 1M, 16MiB)")
    n = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if n <= 0 or n % 4:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are whole float32s (a multiple of 4 B)")
    return n


def _parse_params(text: str):
    """A parameter count ("1M", "500K", "2500000") or an explicit width
    ("w1024"): returns ("params", n) or ("width", w)."""
    t = text.strip().lower()
    if t.startswith("w") and t[1:].isdigit():
        return ("width", int(t[1:]))
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([km]?)", t)
    if not m:
        raise argparse.ArgumentTypeError(f"not a parameter count: {text!r} (e.g. 1M, 500K, w1024)")
    return ("params", int(float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2)]))


def _list(parse):
    def parse_list(text):
        if text.strip().lower() in ("", "none", "0"):
            return []
        return [parse(piece) for piece in text.split(",") if piece.strip()]
    return parse_list


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="DDP step time and all_reduce time on gloo and on gang's torch.distributed "
                    "backend (run under torchrun, or with --launch)")
    p.add_argument("--quick", action="store_true",
                   help=f"fewer steps and calls, models {QUICK_MODELS} unless --models says")
    p.add_argument("--models", type=_list(_parse_params), default=None,
                   help=f"DDP model sizes: parameter counts (1M, 500K) or widths (w1024), "
                        f"comma-separated; 'none' skips DDP (default {DEFAULT_MODELS})")
    p.add_argument("--sizes", type=_list(_parse_bytes), default=None,
                   help=f"all_reduce sizes in bytes (8, 64K, 1M, 16MiB), comma-separated; "
                        f"'none' skips it (default {DEFAULT_SIZES})")
    p.add_argument("--layers", type=int, default=4, help="Linear(w, w) layers of the MLP (4)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank per step (8)")
    p.add_argument("--warmup", type=int, default=None,
                   help="DDP warm-up steps per backend (2; --quick 1)")
    p.add_argument("--steps", type=int, default=None,
                   help="DDP timed steps per backend (8; --quick 4)")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds the timed steps and calls are split over (4; --quick 2)")
    p.add_argument("--launch", nargs="?", const="2,4", default=None, metavar="N,...",
                   help="start torchrun for each rank count (default 2,4) and print one table")
    p.add_argument("--json", default=None, metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.models is None:
        args.models = _list(_parse_params)(QUICK_MODELS if args.quick else DEFAULT_MODELS)
    if args.sizes is None:
        args.sizes = _list(_parse_bytes)(DEFAULT_SIZES)
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2
    if args.steps is None:
        args.steps = 4 if args.quick else 8
    if args.rounds is None:
        args.rounds = 2 if args.quick else 4
    args.rounds = max(1, args.rounds)
    if args.steps < 1 or args.warmup < 0 or args.layers < 1 or args.batch < 1:
        p.error("--steps, --layers and --batch must be at least 1, --warmup at least 0")
    return args


def _passthrough(args) -> list:
    """The options of a --launch run, for its workers."""
    out = ["--models", ",".join(f"w{v}" if k == "width" else str(v) for k, v in args.models)
           or "none",
           "--sizes", ",".join(str(b) for b in args.sizes) or "none",
           "--layers", str(args.layers), "--batch", str(args.batch),
           "--warmup", str(args.warmup), "--steps", str(args.steps),
           "--rounds", str(args.rounds)]
    return out + (["--quick"] if args.quick else [])


# ---- figures -------------------------------------------------------------------


def _stats(samples) -> dict:
    if not samples:
        return {"median": float("nan"), "mean": float("nan"), "n": 0}
    return {"median": statistics.median(samples), "mean": statistics.fmean(samples),
            "n": len(samples)}


def _label(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f} M" if n >= 1e6 else f"{n / 1e3:.0f} K"


def _calls(nbytes: int, quick: bool) -> int:
    """Timed all_reduce calls per variant at this size."""
    n = max(40, min(1000, (16 << 20) // nbytes))
    return max(10, n // 5) if quick else n


def _split(n: int, rounds: int) -> list:
    """n split over rounds as evenly as can be (no round empty)."""
    rounds = max(1, min(rounds, n))
    return [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]


def _width(kind_value, layers: int) -> int:
    kind, v = kind_value
    if kind == "width":
        return v
    # layers * (w*w + w) parameters; w a multiple of 8.
    w = (-1 + (1 + 4 * v / layers) ** 0.5) / 2
    return max(8, int(round(w / 8)) * 8)


# ---- the run of one rank ------------------------------------------------------------


def worker(args) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gang.torch

    torch.set_num_threads(1)
    dist.init_process_group("gang", timeout=datetime.timedelta(minutes=5))
    rank, size = dist.get_rank(), dist.get_world_size()
    gang_pg = dist.group.WORLD
    gloo_pg = dist.new_group(backend="gloo")
    g = gang.torch.gang_of(gang_pg)
    result = {"torch": torch.__version__, "ranks": size, "gang_backend": g.backend,
              "cpus": os.cpu_count(), "quick": args.quick, "layers": args.layers,
              "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
              "rounds": args.rounds, "ddp": [], "allreduce": []}
    perf = time.perf_counter
    began = perf()

    # ---- all_reduce by size ----
    barriers = {"gloo": lambda: dist.barrier(group=gloo_pg),
                "backend": lambda: dist.barrier(group=gang_pg),
                "own": lambda: g.barrier()}
    for nbytes in args.sizes:
        t = torch.zeros(nbytes // 4, dtype=torch.float32)
        variants = {"gloo": lambda: dist.all_reduce(t, group=gloo_pg),
                    "backend": lambda: dist.all_reduce(t, group=gang_pg),
                    "own": lambda: g.all_reduce(t)}
        want = size * (size + 1) / 2
        for name, call in variants.items():  # each must add: rank r gives r + 1
            t.fill_(rank + 1)
            call()
            if t[0].item() != want or t[-1].item() != want:
                raise RuntimeError(f"all_reduce {name}, {_label(nbytes)}: got {t[0].item()}, "
                                   f"expected {want}")
        t.zero_()  # sums of zeros stay zero
        calls = _split(_calls(nbytes, args.quick), args.rounds)
        warm = max(5, min(50, calls[0] // 5))
        samples = {name: [] for name in variants}
        for r, per_round in enumerate(calls):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in order:
                call = variants[name]
                barriers[name]()
                for _ in range(warm):
                    call()
                s = samples[name]
                for _ in range(per_round):
                    t0 = perf()
                    call()
                    s.append((perf() - t0) * 1e6)
        result["allreduce"].append({"bytes": nbytes, "calls": sum(calls),
                                    **{name: _stats(s) for name, s in samples.items()}})
        del t
    result["allreduce_s"] = perf() - began
    began = perf()

    # ---- DDP training ----
    for spec in args.models:
        model_began = perf()
        width = _width(spec, args.layers)
        torch.manual_seed(1234)
        layers = []
        for _ in range(args.layers):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1])
        params = sum(p.numel() for p in model.parameters())
        gen = torch.Generator().manual_seed(rank)
        x = torch.randn(args.batch, width, generator=gen)
        y = torch.randn(args.batch, width, generator=gen)

        def step(net, opt):
            opt.zero_grad(set_to_none=True)
            F.mse_loss(net(x), y).backward()
            opt.step()

        def sgd(net):
            return torch.optim.SGD(net.parameters(), lr=0.01)

        # Compute only: the same step on a local copy, no communication
        # (every rank at once, as under DDP).
        local = copy.deepcopy(model)
        opt = sgd(local)
        for _ in range(args.warmup):
            step(local, opt)
        compute = []
        dist.barrier(group=gloo_pg)
        for _ in range(args.steps):
            t0 = perf()
            step(local, opt)
            compute.append((perf() - t0) * 1e3)
        del local, opt

        nets = {"gloo": DDP(copy.deepcopy(model), process_group=gloo_pg),
                "gang": DDP(model, process_group=gang_pg)}
        opts = {name: sgd(net) for name, net in nets.items()}
        group_of = {"gloo": gloo_pg, "gang": gang_pg}
        for name, net in nets.items():
            dist.barrier(group=group_of[name])
            for _ in range(args.warmup):
                step(net, opts[name])
        times = {name: [] for name in nets}
        for r, per_round in enumerate(_split(args.steps, args.rounds)):
            order = list(nets) if r % 2 == 0 else list(reversed(nets))
            for name in order:
                net, opt = nets[name], opts[name]
                dist.barrier(group=group_of[name])
                for _ in range(per_round):
                    t0 = perf()
                    step(net, opt)
                    times[name].append((perf() - t0) * 1e3)
        # Same start, same data, same number of steps: the same weights, up
        # to the order in which each backend sums.
        dw = max((a - b).abs().max().item() for a, b in
                 zip(nets["gloo"].module.parameters(), nets["gang"].module.parameters()))
        result["ddp"].append({"params": params, "width": width, "compute": _stats(compute),
                              **{name: _stats(s) for name, s in times.items()}, "dw": dw,
                              "seconds": perf() - model_began})
        del nets, opts, model
        gc.collect()
    result["ddp_s"] = perf() - began

    dist.barrier(group=gloo_pg)
    if rank == 0:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f)
        else:
            report([result])
    dist.destroy_process_group()
    return 0


# ---- the table -----------------------------------------------------------------------


def _target(nbytes: int) -> float:
    limit = TARGETS[0][1]
    for at, ratio in TARGETS:
        if nbytes >= at:
            limit = ratio
    return limit


def report(results: list) -> None:
    first = results[0]
    ranks = ", ".join(str(r["ranks"]) for r in results)
    quick = " (--quick)" if first["quick"] else ""
    print(f"torch.distributed on gloo and on gang: torch {first['torch']}, ranks {ranks}, "
          f"{first['cpus']} CPUs, 1 thread per rank{quick}")
    print(f"gang backend: \"gang\" (gang.torch) on gang's {first['gang_backend']!r} transport; "
          f"gloo: torch's ProcessGroupGloo over TCP on 127.0.0.1")
    shared = [str(r["ranks"]) for r in results if r["ranks"] > r["cpus"]]
    if shared:
        print(f"{' and '.join(shared)} ranks on {first['cpus']} CPUs share cores: those rows "
              f"show how each transport copes with that as much as its speed")
    print("times on rank 0; ratios > 1: gang is faster")

    if any(r["ddp"] for r in results):
        print()
        print(f"DDP training step: MLP of {first['layers']} Linear(w, w) layers, batch "
              f"{first['batch']} per rank, float32, MSE, SGD; ms per step (forward, backward "
              f"with DDP's all-reduce, optimizer step)")
        print(f"  median and mean over {first['steps']} timed steps per backend after "
              f"{first['warmup']} warm-up, in {len(_split(first['steps'], first['rounds']))} "
              f"rounds alternating the two")
        print("  compute    the same step on a local copy, no DDP (no communication)")
        print("  gloo/gang  ratio of the median step times")
        print("  comm ratio (gloo med - compute) / (gang med - compute): what each adds to compute")
        print("  max|dw|    largest difference between the two copies' weights at the end")
        print(f"{'ranks':>5} {'params':>9} {'w':>5} {'compute':>8} {'gloo med':>9} {'mean':>8} "
              f"{'gang med':>9} {'mean':>8} {'gloo/gang':>10} {'comm ratio':>11} {'max|dw|':>8}")
        for r in results:
            for d in r["ddp"]:
                c, lo, ga = d["compute"]["median"], d["gloo"]["median"], d["gang"]["median"]
                comm = (lo - c) / (ga - c) if ga - c > 0.05 * ga else float("nan")
                print(f"{r['ranks']:>5} {_count(d['params']):>9} {d['width']:>5} {c:8.2f} "
                      f"{lo:9.2f} {d['gloo']['mean']:8.2f} {ga:9.2f} {d['gang']['mean']:8.2f} "
                      f"{lo / ga:10.2f} {comm:11.2f} {d['dw']:8.1e}")

    if any(r["allreduce"] for r in results):
        print()
        print(f"all_reduce: float32 SUM, in place, blocking; us per call, median over the timed "
              f"calls, in {first['rounds']} rounds")
        print("  alternating the variants, each round after a barrier on the variant's group "
              "and untimed warm-up calls")
        print("  gloo       dist.all_reduce on the gloo group")
        print("  backend    dist.all_reduce on the gang group (torch.distributed -> gang.torch)")
        print("  own        gang's own Gang.all_reduce on the same gang (gang.torch.gang_of())")
        print("  gloo/bk    gloo / backend")
        print("  bk/own     backend / own: the backend's overhead; target "
              + ", ".join(f"<= {ratio} from {_label(at) if at else '0 B'}"
                          for at, ratio in TARGETS) + " (* misses it)")
        print(f"{'ranks':>5} {'size':>8} {'calls':>6} {'gloo':>9} {'backend':>9} {'own':>9} "
              f"{'gloo/bk':>8} {'bk/own':>7}")
        for r in results:
            for a in r["allreduce"]:
                lo, bk, own = (a[k]["median"] for k in ("gloo", "backend", "own"))
                mark = " *" if bk / own > _target(a["bytes"]) else ""
                print(f"{r['ranks']:>5} {_label(a['bytes']):>8} {a['calls']:>6} {lo:9.1f} "
                      f"{bk:9.1f} {own:9.1f} {lo / bk:8.2f} {bk / own:7.2f}{mark}")

    print()
    for r in results:
        parts = [f"all_reduce {r['allreduce_s']:.0f} s"] if r["allreduce"] else []
        if r["ddp"]:
            models = ", ".join(f"{_count(d['params'])} {d['seconds']:.0f} s" for d in r["ddp"])
            parts.append(f"DDP {r['ddp_s']:.0f} s ({models})")
        print(f"{r['ranks']} ranks: " + ", ".join(parts))


# ---- --launch --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args) -> int:
    counts = [int(n) for n in args.launch.split(",") if n.strip()]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results = []
    with tempfile.TemporaryDirectory(prefix="gang-torch-ddp-") as tmp:
        for n in counts:
            out = os.path.join(tmp, f"{n}.json")
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n),
                   "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
                   os.path.abspath(__file__),
                   *_passthrough(args), "--json", out]
            print(f"torch_ddp: {n} ranks ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            rc = subprocess.run(cmd, env=env).returncode
            if rc != 0 or not os.path.exists(out):
                print(f"torch_ddp: torchrun with {n} ranks failed (exit status {rc})",
                      file=sys.stderr)
                return rc or 1
            print(f"torch_ddp: {n} ranks took {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)
            with open(out) as f:
                results.append(json.load(f))
    report(results)
    return 0


def main() -> int:
    args = parse_args()
    if args.launch is not None:
        return launch(args)
    if "RANK" not in os.environ:
        print("torch_ddp: run under torchrun (see the docstring), or with --launch",
              file=sys.stderr)
        return 2
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
