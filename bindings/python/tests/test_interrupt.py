"""Ctrl-C: a blocked collective raises KeyboardInterrupt within a second of
SIGINT and aborts the gang, so that its peer fails at once with
GangPeerLostError rather than at the timeout; under gangrun, SIGINT lets
every rank's finally blocks run before the grace period ends."""

import os
import signal
import subprocess
import sys
import time

import pytest

from multirank import free_port

# Each rank waits in a receive nobody will satisfy, with a 30 s timeout,
# and reports how it ended, and after how long, in OUT/rank-R.
RANK = r'''
import os, signal, sys, time
# Ctrl-C raises KeyboardInterrupt even if this process was started with
# SIGINT ignored (as a background job of a shell without job control is);
# before gang is imported, which hooks the handler it finds.
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import gang

out, how_to_wait = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "blocking"
g = gang.create(timeout=30)
x = np.zeros(4)
open(f"{out}/ready-{g.rank}", "w").close()
start = time.monotonic()
how = "returned"
try:
    if how_to_wait == "work" and g.rank == 0:
        g.recv(x, src=1 - g.rank, async_op=True).wait()
    else:
        g.recv(x, src=1 - g.rank)
except KeyboardInterrupt:
    how = "KeyboardInterrupt"
    raise
except gang.GangError as e:
    how = type(e).__name__
    raise
finally:
    with open(f"{out}/rank-{g.rank}", "w") as f:
        f.write(f"{how} {time.monotonic() - start:.3f}")
'''


def _wait_for(paths, seconds):
    deadline = time.monotonic() + seconds
    while not all(os.path.exists(p) for p in paths):
        assert time.monotonic() < deadline, f"timed out waiting for {paths}"
        time.sleep(0.05)


def _report(path):
    how, seconds = open(path).read().split()
    return how, float(seconds)


@pytest.mark.parametrize("how_to_wait", ["blocking", "work"])
def test_sigint_interrupts_a_blocked_collective_and_fails_the_peer(tmp_path, how_to_wait):
    """Rank 0 blocked in a receive, or in Work.wait() of one."""
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    port = free_port()
    env = dict(os.environ, GANG_SIZE="2", GANG_INIT_METHOD=f"tcp://127.0.0.1:{port}")
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), how_to_wait],
                              env=dict(env, GANG_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    try:
        _wait_for([tmp_path / "ready-0", tmp_path / "ready-1"], 60)
        time.sleep(2.0)  # both are in the receive
        sent = time.monotonic()
        procs[0].send_signal(signal.SIGINT)
        out0 = procs[0].communicate(timeout=20)[0]
        ended = time.monotonic() - sent
        out1 = procs[1].communicate(timeout=20)[0]
    finally:
        for p in procs:
            p.kill()
    how0, _ = _report(tmp_path / "rank-0")
    how1, waited1 = _report(tmp_path / "rank-1")
    assert how0 == "KeyboardInterrupt", out0
    assert ended < 1.5, f"rank 0 took {ended:.2f} s to stop after SIGINT"
    assert procs[0].returncode != 0 and "KeyboardInterrupt" in out0
    # The peer's receive failed because rank 0 aborted, well before its
    # 30 s timeout.
    assert how1 == "GangPeerLostError", out1
    assert waited1 < 10, f"rank 1 waited {waited1:.1f} s"


def test_sigint_under_gangrun_runs_every_finally_block(tmp_path):
    gangrun = os.environ.get("GANG_TEST_GANGRUN")
    if not gangrun or not os.path.exists(gangrun):
        pytest.skip("GANG_TEST_GANGRUN (the gangrun binary) is not set; CTest sets it")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    run = subprocess.Popen([gangrun, "--nproc-per-node", "2", "--grace", "5", "--",
                            sys.executable, str(script), str(tmp_path)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for([tmp_path / "ready-0", tmp_path / "ready-1"], 60)
        time.sleep(1.0)
        sent = time.monotonic()
        run.send_signal(signal.SIGINT)
        out = run.communicate(timeout=30)[0]
        ended = time.monotonic() - sent
    finally:
        run.kill()
    assert "SIGKILL" not in out, out
    assert ended < 5.0, f"gangrun took {ended:.1f} s, the grace period is 5 s:\n{out}"
    for r in range(2):
        how, _ = _report(tmp_path / f"rank-{r}")
        # SIGINT reached both; a rank may also see its peer's abort first.
        assert how in ("KeyboardInterrupt", "GangPeerLostError"), (r, how, out)
    assert run.returncode != 0, out


# Rank 0 installs a SIGINT handler of its own (a graceful stop) and waits in
# a receive; rank 1 sends 3 s later. SIGINT at 1 s must not abort the gang:
# the receive completes with rank 1's data, then the handler has run.
GRACEFUL = r'''
import os, signal, sys, time
import numpy as np
import gang

out = sys.argv[1]
stop = []
g = gang.create(timeout=30)
if g.rank == 0:
    signal.signal(signal.SIGINT, lambda *_: stop.append(time.monotonic()))
    x = np.zeros(4)
    open(f"{out}/ready-0", "w").close()
    g.recv(x, src=1)
    with open(f"{out}/rank-0", "w") as f:
        f.write(f"{x[0]} {len(stop)}")
else:
    open(f"{out}/ready-1", "w").close()
    time.sleep(3.0)
    g.send(np.full(4, 7.0), dst=0)
g.barrier()
g.close()
'''


def test_a_handler_of_the_programs_own_keeps_the_gang(tmp_path):
    script = tmp_path / "graceful.py"
    script.write_text(GRACEFUL)
    port = free_port()
    env = dict(os.environ, GANG_SIZE="2", GANG_INIT_METHOD=f"tcp://127.0.0.1:{port}")
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                              env=dict(env, GANG_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    try:
        _wait_for([tmp_path / "ready-0", tmp_path / "ready-1"], 60)
        time.sleep(1.0)
        procs[0].send_signal(signal.SIGINT)
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    value, handled = open(tmp_path / "rank-0").read().split()
    assert (float(value), int(handled)) == (7.0, 1), outs
