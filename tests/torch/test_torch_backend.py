#!/usr/bin/env python3
"""gang as a torch.distributed backend (gang.torch), on a given PyTorch.

Usage: PYTHON test_torch_backend.py [--venv] [--cuda-double DIR | --cuda] BUILD_DIR [CASE...]

Each case runs tests/torch/backend_worker.py CASE in N real processes
(env:// rendezvous on a TCPStore of rank 0, as torchrun sets it up) and
passes when every rank exits 0; a rank that finds a wrong result says what
and exits 1. --venv runs the ranks with $GANG_TORCH_VENV/bin/python (the
PyPI torch .ci/torch-venv.sh makes) and skips (77) without one. The
backend (gang_torch, bindings/torch) is built first for that torch, into
BUILD_DIR (gang_torch_build.py).

Cases (default: all), each on the rank counts listed:
  ops       every c10d entry point, every dtype, blocking and async (1-4)
  init      env://, tcp://, file://, store=, timeout, subgroups, splits (3)
  mixed     "cpu:gang,cuda:gloo" (2)
  ddp       DDP on gang ends where DDP on gloo does (4)
  fsdp      fully_shard on gang matches one process (2)
  mesh      init_device_mesh over gang, collectives per dimension (4)
  fairseq2  fairseq2-style gangs on a default group that is gang (4)
  failure   a rank killed mid-collective: DistBackendError on the others (3)
  mismatch  ranks calling different collectives: gang's mismatch error (2)
  interrupt Ctrl-C in a blocking collective: KeyboardInterrupt at once (2)
  torchrun  the ops case under torchrun (its agent's store, its env) (2)
  shrink    DDP loses a rank; gang.torch.shrink() and DDP goes on (4)
  c10d      the group's name, polling a Work, monitored barriers naming the
            missing ranks, a barrier's timeout in PyTorch's words (3)
  powersgd  DDP's PowerSGD hook (collectives inside future callbacks)
            ends where it does on gloo (2)
  detail    TORCH_DISTRIBUTED_DEBUG=DETAIL (c10d's checking wrapper) (2)
  ctrl_c    Ctrl-C of a torchrun DDP job, GANG_TEST_CTRL_C_RUNS times in a
            row (default 20): every rank gets KeyboardInterrupt, torchrun
            ends with no worker left to kill (2)

CUDA tensors (tests/torch/cuda_worker.py), run only with --cuda-double DIR
(the host double of CUDA and NCCL built in DIR, preloaded into every rank:
torch's CUDA build then runs on it without a GPU) or --cuda (a real GPU,
one per rank where there are enough, else ranks share one with NCCL's
socket transport):
  cuda_ops      every collective gang runs on the device, blocking and
                async, current and side streams (2, 3)
  cuda_stream   calls and Work.wait() return while the stream is held;
                is_completed() follows the device (2)
  cuda_sync     GANG_TORCH_SYNC=1: the call waits for the device (2)
  cuda_future   CUDA-aware futures; a callback's own collective (2)
  cuda_graph    collectives captured into a CUDA graph, launched 3 times (2)
  cuda_ddp      DDP's buckets all-reduced through a comm hook (2)
  cuda_lazy     the device's gang made by the first call; subgroups;
                tensors of two devices refused (2)
  cuda_failure  a rank killed: DistBackendError on the others (3)
"""
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time

import gang_torch_build

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "backend_worker.py")
CUDA_WORKER = os.path.join(HERE, "cuda_worker.py")
FAIRSEQ2_SHIM = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bindings", "python",
                             "tests", "fairseq2_shim")

CASES = [
    ("ops", (1, 2, 3, 4), {}),
    ("init", (3,), {}),
    ("mixed", (2,), {}),
    ("ddp", (4,), {}),
    ("fsdp", (2,), {}),
    ("mesh", (4,), {}),
    ("fairseq2", (4,), {}),
    ("failure", (3,), {"GANG_TIMEOUT_MS": "20000"}),
    ("mismatch", (2,), {"GANG_DEBUG": "detail"}),
    ("interrupt", (2,), {}),
    ("torchrun", (2,), {}),
    ("shrink", (4,), {}),
    ("c10d", (3,), {}),
    ("powersgd", (2,), {}),
    ("detail", (2,), {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}),
    ("ctrl_c", (2,), {}),
    ("cuda_ops", (2, 3), {}),
    ("cuda_stream", (2,), {}),
    ("cuda_sync", (2,), {"GANG_TORCH_SYNC": "1"}),
    ("cuda_future", (2,), {}),
    ("cuda_graph", (2,), {}),
    ("cuda_ddp", (2,), {}),
    ("cuda_lazy", (2,), {}),
    ("cuda_failure", (3,), {}),
]

# How CUDA cases reach a device: the double's directory (--cuda-double), or
# "gpu" (--cuda); None runs no CUDA case.
CUDA = None


def cuda_env(rank, size):
    """A CUDA case's rank: on the double, its runtime preloaded (torch's
    CUDA libraries then bind to it), its driver and gang's libraries on the
    library path, gang's NCCL module pointed at its NCCL, strict; on a GPU
    with fewer GPUs than ranks, NCCL told that each rank is a host of its
    own (its socket transport over loopback)."""
    if CUDA != "gpu":
        return {"LD_PRELOAD": os.path.join(CUDA, "libcudart.so.13"),
                "LD_LIBRARY_PATH": os.pathsep.join([CUDA, os.environ.get("LD_LIBRARY_PATH", "")]),
                "GANG_NCCL_LIBRARY": os.path.join(CUDA, "libnccl.so.2"),
                "GANG_DOUBLE_STRICT": "1", "GANG_DOUBLE_SEED": str(100 + rank),
                "GANG_CUDA_DOUBLE_DEVICES": str(size)}
    env = {}
    if gpu_count() < size:
        env.update({"NCCL_HOSTID": f"gang-test-rank-{rank}", "NCCL_SOCKET_IFNAME": "lo"})
    return env


@functools.lru_cache(maxsize=None)
def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True)
        return out.stdout.count("GPU ")
    except OSError:
        return 0


def free_port():
    """A port p with p+1 and p+2 free too (the init case uses all three)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 65000:
            continue
        try:
            for extra in (1, 2):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + extra))
            return port
        except OSError:
            continue
    raise SystemExit("no free ports")


# Where gang_torch was built for the torch under test (main() sets it).
BACKEND_PATH = ""


def base_env(build, tmp):
    """A rank's environment without any launcher's variables: the packages
    under test and the fairseq2 stand-in of its tests on the path."""
    env = dict(os.environ)
    for k in ("GANG_INIT_METHOD", "GANG_RANK", "GANG_SIZE", "RANK", "WORLD_SIZE",
              "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(k, None)
    env.update({
        "GANG_TEST_TMP": tmp, "GLOO_SOCKET_IFNAME": "lo", "PYTHONDONTWRITEBYTECODE": "1",
        "GANG_TIMEOUT_MS": "60000", "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([BACKEND_PATH, os.path.join(build, "bindings", "python"),
                                       FAIRSEQ2_SHIM, env.get("PYTHONPATH", "")]),
    })
    return env


def launch(python, build, case, size, extra_env, timeout=300):
    """Runs `size` ranks of the case; (exit codes, output, seconds)."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix=f"gang-torch-{case}-")
    procs = []
    start = time.time()
    for rank in range(size):
        env = base_env(build, tmp)
        env.update({
            "RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        })
        worker, name = WORKER, case
        if case.startswith("cuda_"):
            worker, name = CUDA_WORKER, case[len("cuda_"):]
            env.update(cuda_env(rank, size))
        env.update(extra_env)
        out = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
        procs.append((subprocess.Popen([python, worker, name], env=env, stdout=out,
                                       stderr=subprocess.STDOUT), out))
    # Reaped as they exit (as torchrun's agent does): a dead rank must not
    # linger as a zombie, which its peers would still see alive.
    codes = [None] * size
    while any(c is None for c in codes):
        for rank, (p, _) in enumerate(procs):
            if codes[rank] is None:
                codes[rank] = p.poll()
        if time.time() - start > timeout:
            for rank, (p, _) in enumerate(procs):
                if codes[rank] is None:
                    p.kill()
                    p.wait()
                    codes[rank] = "timeout"
        time.sleep(0.05)
    text = []
    for rank, (p, out) in enumerate(procs):
        out.seek(0)
        text.append(f"--- rank {rank} ---\n" + out.read())
        out.close()
    return codes, "\n".join(text), time.time() - start


def torchrun(python, build, size, timeout=300):
    """The ops case under torchrun: RANK, WORLD_SIZE and the rest come from
    its agent, the default group meets through the agent's TCPStore."""
    env = base_env(build, tempfile.mkdtemp(prefix="gang-torch-torchrun-"))
    cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", str(size),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), WORKER, "ops"]
    start = time.time()
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=timeout)
        code, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        code, out = "timeout", e.stdout or ""
    ok = code == 0 and out.count("ops: rank") == size
    return [0 if ok else code or 1], out, time.time() - start


def ctrl_c(python, build, size, runs):
    """Ctrl-C (SIGINT to torchrun's process group, as a terminal sends it)
    of a DDP job on gang, `runs` times: each time every rank must report
    KeyboardInterrupt and torchrun must end well within its 30 s grace
    before it SIGKILLs workers (a worker whose exit waits on a collective
    stalls there)."""
    import signal
    start = time.time()
    out_all = []
    for run in range(runs):
        env = base_env(build, tempfile.mkdtemp(prefix="gang-torch-ctrl-c-"))
        cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", str(size),
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()), WORKER,
               "ddp_until_interrupted"]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, start_new_session=True)
        lines = []
        training = 0
        for line in p.stdout:
            lines.append(line)
            # Ranks' lines may interleave: count, not lines.
            training += line.count(": training")
            if training >= size:
                time.sleep(0.2 * (run % 5))  # at different points of a step
                os.killpg(p.pid, signal.SIGINT)
                break
        interrupted = time.time()
        try:
            rest, _ = p.communicate(timeout=25)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rest, _ = p.communicate()
            out_all.append("".join(lines) + rest)
            return [f"run {run}: torchrun still running 25 s after Ctrl-C"], \
                "".join(out_all), time.time() - start
        text = "".join(lines) + rest
        took = time.time() - interrupted
        got = text.count("KeyboardInterrupt at step")
        if got != size or "Cannot extract" in text:
            out_all.append(text)
            return [f"run {run}: {got} of {size} ranks got KeyboardInterrupt"], \
                "".join(out_all), time.time() - start
        print(f"test_torch_backend: ctrl_c run {run}: {size} ranks interrupted, torchrun "
              f"ended {took:.1f} s after Ctrl-C", flush=True)
    return [0], "", time.time() - start


def cuda_unusable(python, build):
    """Why the CUDA cases cannot run with this torch, or None."""
    env = base_env(build, tempfile.mkdtemp(prefix="gang-torch-cuda-probe-"))
    env.update(cuda_env(0, 2))
    probe = subprocess.run(
        [python, "-c", "import torch, gang_torch; print(torch.version.cuda, "
         "gang_torch._C.cuda_built, torch.cuda.is_available())"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    words = probe.stdout.split()[-3:] if probe.returncode == 0 else []
    if len(words) != 3:
        return f"torch or gang_torch did not load:\n{probe.stdout[-1500:]}"
    cuda, built, available = words
    if cuda == "None":
        return "this torch was built without CUDA"
    if CUDA != "gpu" and not cuda.startswith("13."):
        return f"the double stands in for CUDA 13's runtime; this torch has CUDA {cuda}"
    if built != "True":
        return "gang_torch was built without CUDA"
    if available != "True":
        return "torch sees no CUDA device" + (" on the double" if CUDA != "gpu" else "")
    return None


def main():
    args = sys.argv[1:]
    python = sys.executable
    if args and args[0] == "--venv":
        args = args[1:]
        venv = os.environ.get("GANG_TORCH_VENV")
        if not venv:
            print("SKIP: GANG_TORCH_VENV is not set (.ci/torch-venv.sh makes the "
                  "environment; .ci/run sets it)")
            return SKIP
        python = os.path.join(venv, "bin", "python")
    global CUDA
    if args and args[0] == "--cuda-double":
        CUDA, args = os.path.abspath(args[1]), args[2:]
    elif args and args[0] == "--cuda":
        CUDA, args = "gpu", args[1:]
    if not args:
        print(__doc__)
        return 2
    build, wanted = os.path.abspath(args[0]), args[1:]
    probe = subprocess.run(
        [python, "-c", "import torch, torch.distributed as d; "
         "from torch._C._distributed_c10d import Backend; "
         "print(torch.__version__, hasattr(d, 'DistBackendError'))"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if probe.returncode != 0:
        print(f"SKIP: {python} has no usable torch.distributed:\n{probe.stdout[-500:]}")
        return SKIP
    version = probe.stdout.split()[0]
    global BACKEND_PATH
    start = time.time()
    BACKEND_PATH, why = gang_torch_build.build(python, build)
    if BACKEND_PATH is None:
        print(f"FAIL: {why}")
        return 1
    print(f"test_torch_backend: torch {version} ({python}); gang_torch built in "
          f"{time.time() - start:.0f} s", flush=True)
    if CUDA is not None:
        why = cuda_unusable(python, build)
        if why:
            print(f"SKIP: the CUDA cases: {why}")
            return SKIP
    failed = []
    for case, sizes, extra in CASES:
        if wanted and case not in wanted:
            continue
        if case.startswith("cuda_") != (CUDA is not None):
            continue
        for size in sizes:
            if case == "torchrun":
                codes, out, took = torchrun(python, build, size)
            elif case == "ctrl_c":
                codes, out, took = ctrl_c(python, build, size,
                                          int(os.environ.get("GANG_TEST_CTRL_C_RUNS", "20")))
            else:
                codes, out, took = launch(python, build, case, size, extra)
            # The failure cases' last rank is killed (SIGKILL) on purpose.
            killed = case in ("failure", "shrink", "cuda_failure")
            ok = all(c == 0 or (killed and r == size - 1 and c == -9)
                     for r, c in enumerate(codes))
            skipped = all(c == SKIP for c in codes)
            status = "ok" if ok else "skipped" if skipped else f"FAILED {codes}"
            print(f"test_torch_backend: {case} on {size} ranks: {status} ({took:.1f} s)",
                  flush=True)
            if not ok:
                lines = out.strip().splitlines()
                print("\n".join("  | " + line for line in lines[-80:]), flush=True)
                if not skipped:
                    failed.append(f"{case}/{size}")
    if failed:
        print("FAIL:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
