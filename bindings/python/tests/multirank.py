"""Runs test functions as real ranks: one subprocess per rank, rendezvous
through a TCP store on 127.0.0.1 (GANG_RANK, GANG_SIZE, GANG_INIT_METHOD).

    def _body(size):            # runs in every rank, at module level
        with gang.create() as g:
            ...

    def test_something():
        run_ranks(3, _body, 3)   # passes if every rank exits 0

A rank's return value (picklable) comes back in RankResult.value.
"""

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
RANK_MAIN = os.path.join(TESTS_DIR, "rank_main.py")


@dataclass
class RankResult:
    rank: int
    returncode: int
    output: str
    value: object = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(size, fn, *args, timeout=120, env=None, check=True, local_size=None):
    """Runs fn(*args) in `size` rank processes; returns their RankResults.

    local_size, if given, places them local_size to a "node" (GANG_LOCAL_RANK
    and GANG_LOCAL_SIZE), as a launcher would.

    With check, fails the test unless every rank exited 0. Ranks still
    running after `timeout` seconds are killed (and fail the test).
    """
    port = free_port()
    base_env = dict(os.environ)
    base_env.update(
        GANG_SIZE=str(size),
        GANG_INIT_METHOD=f"tcp://127.0.0.1:{port}",
        PYTHONDONTWRITEBYTECODE="1",
    )
    base_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="gang-test-") as tmp:
        procs = []
        for rank in range(size):
            rank_env = dict(base_env, GANG_RANK=str(rank),
                            GANG_TEST_RESULT=os.path.join(tmp, f"{rank}.pickle"))
            if local_size:  # placed as a launcher places ranks on nodes
                rank_env.update(GANG_LOCAL_RANK=str(rank % local_size),
                                GANG_LOCAL_SIZE=str(local_size))
            procs.append(subprocess.Popen(
                [sys.executable, RANK_MAIN, fn.__module__, fn.__name__, repr(args)],
                env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=TESTS_DIR, text=True))
        deadline = time.monotonic() + timeout
        results = []
        for rank, proc in enumerate(procs):
            try:
                output, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                output, _ = proc.communicate()
                output += f"\n[killed after {timeout} s]"
            value = None
            path = os.path.join(tmp, f"{rank}.pickle")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    value = pickle.load(f)
            results.append(RankResult(rank, proc.returncode, output, value))
    if check:
        failed = [r for r in results if r.returncode != 0]
        if failed:
            report = "\n".join(f"--- rank {r.rank} exited {r.returncode}:\n{r.output}"
                               for r in failed)
            pytest.fail(f"{len(failed)} of {size} ranks failed\n{report}", pytrace=False)
    return results
