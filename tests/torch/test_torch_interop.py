#!/usr/bin/env python3
"""gang with a given PyTorch: torch:// against its TCPStore, gang programs
under its torchrun, torch.distributed and gang in the same processes,
elastic restarts, and torch.distributed under gangrun.

Usage: PYTHON test_torch_interop.py [--venv] BUILD_DIR [PART...]

PYTHON is the interpreter whose torch is tested: Debian's python3-torch
(1.13, TCPStore's legacy protocol) or the PyPI environment that
.ci/torch-venv.sh makes (current protocol). BUILD_DIR is gang's build
directory. --venv runs it with $GANG_TORCH_VENV/bin/python instead, and
skips without one. Exits 77 (skipped) when PYTHON has no torch or BUILD_DIR lacks
what every part needs; a part whose program was not built (the Go example
with -DGANG_BUILD_GO=OFF) says so and is skipped alone.

Parts (default: all, in this order):
  store    tests/torchrun_rank store URL against a TCPStore this script
           serves, with each server the version has (libuv and classic)
  poll     40 gets of 50 ms that time out on one torch:// store, then the
           key: the store goes on, and a current server keeps the
           connection (CANCEL_WAIT) instead of a reconnect per get
  c        torchrun --nproc_per_node 3 --no_python examples/train_linear
  python   the same with python3 examples/python/train_linear.py
  go       the same with the Go example
  mixed    torchrun of tests/torch/mixed_worker.py: torch.distributed (gloo)
           and gang in the same processes; gang's keys in the agent store
  elastic  the same with --max_restarts 1, rank 1 failing once (gang only)
  gangrun  gangrun of mixed_worker.py: torch.distributed's env:// on the
           MASTER_PORT gangrun hands out, gang on gangrun's store
"""
import datetime
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PARTS = ("store", "poll", "c", "python", "go", "mixed", "elastic", "gangrun")


def fail(what):
    print("FAIL:", what, flush=True)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Env:
    def __init__(self, build):
        import torch
        self.torch_version = torch.__version__
        self.major_minor = tuple(int(x) for x in
                                 self.torch_version.split("+")[0].split(".")[:2])
        self.build = os.path.abspath(build)
        self.python = sys.executable
        self.helper = os.path.join(self.build, "tests", "torchrun_rank")
        self.train_c = os.path.join(self.build, "examples", "train_linear")
        self.py_path = os.path.join(self.build, "bindings", "python")
        self.train_go = os.path.join(self.build, "bindings", "go", "train_linear")
        self.gangrun = os.path.join(self.build, "gangrun")
        self.log_dirs = []

    def environ(self):
        env = dict(os.environ)
        for k in ("GANG_INIT_METHOD", "GANG_RANK", "GANG_SIZE", "RANK",
                  "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        env["GLOO_SOCKET_IFNAME"] = "lo"  # torch's gloo; gang finds loopback
        env["GANG_TIMEOUT_MS"] = "60000"
        env["PYTHONPATH"] = self.py_path + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # The interpreter under test first, so "python3" in a command is it.
        env["PATH"] = os.path.dirname(self.python) + os.pathsep + env["PATH"]
        return env

    def torchrun(self, nproc, program, extra=()):
        """torchrun as a person types it, on a port of its own."""
        cmd = [self.python, "-m", "torch.distributed.run",
               "--nproc_per_node", str(nproc),
               "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
        if self.major_minor < (2, 0):
            log_dir = tempfile.mkdtemp(prefix="gang-torchrun-")
            self.log_dirs.append(log_dir)
            # Debian's torchrun 1.13 on Python 3.11 cannot parse its default
            # --redirects/--tee (iterating an IntFlag yields only its
            # single-bit members there): send the workers' stdout through
            # log files to the console.
            cmd += ["--redirects", "1", "--tee", "1", "--log_dir", log_dir]
        return cmd + list(extra) + list(program)


def run(env, cmd, timeout=240):
    print("$", " ".join(os.path.relpath(c, SOURCE) if c.startswith(SOURCE) else c
                        for c in cmd), flush=True)
    start = time.time()
    r = subprocess.run(cmd, env=env.environ(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout,
                       universal_newlines=True)
    took = time.time() - start
    return r.returncode, r.stdout, took


def show(out, lines=200):
    tail = out.strip().splitlines()[-lines:]
    print("\n".join("  | " + line for line in tail), flush=True)


def part_store(env):
    import torch.distributed as dist
    for name, kwargs in store_servers(env):
        store = dist.TCPStore("127.0.0.1", 0, is_master=True,
                              wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=30), **kwargs)
        store.set("gang/from_torch", b"hi")
        store.add("gang/counter", 5)
        url = "torch://127.0.0.1:%d" % store.port
        rc, out, took = run(env, [env.helper, "store", url], timeout=120)
        if rc != 0:
            show(out)
        check(rc == 0, "torchrun_rank store against the %s server exited %d" % (name, rc))
        check(store.get("gang/to_torch") == b"pong", "gang's key seen from PyTorch")
        check(store.get("gang/counter") == b"7", "gang's add seen from PyTorch")
        print("store: the %s TCPStore server of torch %s: ok (%.1f s)"
              % (name, env.torch_version, took), flush=True)


def store_servers(env):
    """(name, TCPStore keyword arguments) of each server the version has."""
    if env.major_minor >= (2, 2):
        # 2.2 and later have both servers; libuv is the default from 2.4.
        return [("libuv", {"use_libuv": True}), ("classic", {"use_libuv": False})]
    return [("default", {})]


def client_time_waits(port):
    """Connections to 127.0.0.1:port this machine closed first (TIME_WAIT)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == "06" and int(remote.split(":")[1], 16) == port:
                n += 1
    return n


def part_poll(env):
    """What gang's rendezvous does while it waits for rank 0: gets of 50 ms
    that time out, many times, on one store, then the key comes. Through
    gang's C API (ctypes), since the Python package has no stores."""
    import ctypes as C
    import torch.distributed as dist
    lib = C.CDLL(os.path.join(env.build, "libgang.so"))
    lib.gang_store_create.argtypes = [C.c_char_p, C.c_int, C.c_int64,
                                      C.POINTER(C.c_void_p)]
    lib.gang_store_get.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(C.c_void_p),
                                   C.POINTER(C.c_size_t)]
    lib.gang_store_destroy.argtypes = [C.c_void_p]
    lib.gang_free.argtypes = [C.c_void_p]
    lib.gang_status_name.argtypes = [C.c_int]
    lib.gang_status_name.restype = C.c_char_p
    lib.gang_last_error.restype = C.c_char_p

    def status(rc):
        return lib.gang_status_name(rc).decode()

    polls = 40
    for name, kwargs in store_servers(env):
        store = dist.TCPStore("127.0.0.1", 0, is_master=True,
                              wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=30), **kwargs)
        url = "torch://127.0.0.1:%d" % store.port
        s = C.c_void_p()
        rc = lib.gang_store_create(url.encode(), 0, 50, C.byref(s))
        check(rc == 0, "gang_store_create(%s, 50 ms): %s: %s"
              % (url, status(rc), lib.gang_last_error().decode()))
        value, n = C.c_void_p(), C.c_size_t()
        closed_before = client_time_waits(store.port)
        start = time.time()
        for i in range(polls):
            rc = lib.gang_store_get(s, b"late", C.byref(value), C.byref(n))
            check(status(rc) == "GANG_ERR_TIMEOUT",
                  "get %d of a missing key: %s: %s"
                  % (i, status(rc), lib.gang_last_error().decode()))
        took = time.time() - start
        reconnects = client_time_waits(store.port) - closed_before
        check(took < polls * 0.05 + 5, "%d gets of 50 ms took %.1f s" % (polls, took))
        store.set("gang/late", b"here")
        rc = lib.gang_store_get(s, b"late", C.byref(value), C.byref(n))
        check(rc == 0, "get after the key came: %s: %s"
              % (status(rc), lib.gang_last_error().decode()))
        check(C.string_at(value, n.value) == b"here", "the late value")
        lib.gang_free(value)
        lib.gang_store_destroy(s)
        if env.major_minor >= (2, 2):
            # CANCEL_WAIT keeps the connection on a current server.
            check(reconnects <= 2, "%d of %d timed-out gets reconnected to the "
                  "%s server" % (reconnects, polls, name))
        print("poll: %d timed-out gets of 50 ms, then the key, on the %s server "
              "of torch %s: ok (%.1f s, %d reconnects)"
              % (polls, name, env.torch_version, took, reconnects), flush=True)


def expect_example(env, what, program, success, nproc=3):
    """Runs an example under torchrun; `success` is what it prints when
    every rank ends identical and converged (%d: the number of ranks)."""
    rc, out, took = run(env, env.torchrun(nproc, program))
    if rc != 0 or any(("%d" in s and s % nproc or s) not in out for s in success):
        show(out)
        fail("%s under torchrun exited %d" % (what, rc))
    print("%s: %d ranks under torchrun %s: ok (%.1f s)"
          % (what, nproc, env.torch_version, took), flush=True)


def part_c(env):
    expect_example(env, "c", ["--no_python", env.train_c],
                   ["OK: parameters identical and converged on all %d ranks"])


def part_python(env):
    expect_example(env, "python",
                   ["--no_python", "python3",
                    os.path.join(SOURCE, "examples", "python", "train_linear.py")],
                   ["ranks %d  w", "identical True  converged True"])


def part_go(env):
    if not os.access(env.train_go, os.X_OK):
        print("go: skipped, %s was not built" % env.train_go, flush=True)
        return
    expect_example(env, "go", ["--no_python", env.train_go], ["ranks %d  params", "identical true  converged true"])


def expect_mixed(env, out, world, attempt):
    for rank in range(world):
        line = "mixed rank %d of %d (attempt %d): torch %g, gang %g" % (
            rank, world, attempt, world * (world + 1) / 2, world * (world + 1) / 2)
        check(line in out, "missing %r" % line)
        check("mixed rank %d: clean shutdown" % rank in out,
              "rank %d did not shut down cleanly" % rank)


def part_mixed(env):
    worker = os.path.join(HERE, "mixed_worker.py")
    rc, out, took = run(env, env.torchrun(2, [worker, "--agent-keys"]))
    if rc != 0:
        show(out)
    check(rc == 0, "torchrun of mixed_worker.py exited %d" % rc)
    expect_mixed(env, out, 2, 0)
    print("mixed: torch.distributed and gang in the same 2 processes under "
          "torchrun %s: ok (%.1f s)" % (env.torch_version, took), flush=True)


def part_elastic(env):
    worker = os.path.join(HERE, "mixed_worker.py")
    # Gang only: see mixed_worker.py --gang-only for torch.distributed's own
    # trouble with restarts.
    rc, out, took = run(env, env.torchrun(2, [worker, "--fail-once", "--gang-only"],
                                          extra=["--max_restarts", "1"]))
    if rc != 0:
        show(out)
    check(rc == 0, "torchrun --max_restarts 1 exited %d" % rc)
    check("mixed rank 1: failing on purpose (attempt 0)" in out,
          "rank 1 did not fail in the first attempt")
    expect_mixed(env, out, 2, 1)
    print("elastic: rank 1 failed once, the second attempt's gang works "
          "(torchrun %s): ok (%.1f s)" % (env.torch_version, took), flush=True)


def part_gangrun(env):
    worker = os.path.join(HERE, "mixed_worker.py")
    rc, out, took = run(env, [env.gangrun, "--nproc-per-node", "2", "--timeout",
                              "200", "--", "python3", worker])
    if rc != 0:
        show(out)
    check(rc == 0, "gangrun of mixed_worker.py exited %d" % rc)
    expect_mixed(env, out, 2, 0)
    print("gangrun: torch.distributed (env://, gangrun's MASTER_PORT) and gang "
          "in the same 2 processes, torch %s: ok (%.1f s)"
          % (env.torch_version, took), flush=True)


def use_venv():
    """--venv: runs this script again with $GANG_TORCH_VENV/bin/python (the
    environment .ci/torch-venv.sh made), or skips without one."""
    venv = os.environ.get("GANG_TORCH_VENV", "")
    python = os.path.join(venv, "bin", "python")
    if not venv or not os.access(python, os.X_OK):
        print("SKIP: GANG_TORCH_VENV does not name a PyPI torch environment "
              "(make one with .ci/torch-venv.sh, then "
              "GANG_TORCH_VENV=$(.ci/torch-venv.sh) ctest -L torch)")
        sys.exit(SKIP)
    args = [a for a in sys.argv[1:] if a != "--venv"]
    os.execv(python, [python, os.path.abspath(__file__)] + args)


def main():
    if "--venv" in sys.argv:
        use_venv()
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        import torch.distributed  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print("SKIP: %s has no torch or numpy (%s)" % (sys.executable, e))
        sys.exit(SKIP)
    env = Env(sys.argv[1])
    parts = sys.argv[2:] or list(PARTS)
    for p in parts:
        check(p in PARTS, "unknown part %r (parts: %s)" % (p, " ".join(PARTS)))
    missing = [p for p in (env.helper, env.train_c, env.gangrun,
                           os.path.join(env.py_path, "gang", "capi.py"))
               if not os.path.exists(p)]
    if missing:
        print("SKIP: not built: %s" % ", ".join(missing))
        sys.exit(SKIP)
    print("torch %s (%s), gang build %s" % (env.torch_version, sys.executable,
                                            env.build), flush=True)
    start = time.time()
    try:
        for p in parts:
            globals()["part_" + p](env)
    finally:
        for d in env.log_dirs:
            shutil.rmtree(d, ignore_errors=True)
    print("test_torch_interop: torch %s: %d parts passed in %.1f s"
          % (env.torch_version, len(parts), time.time() - start))


if __name__ == "__main__":
    main()
