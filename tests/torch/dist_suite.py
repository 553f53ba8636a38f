#!/usr/bin/env python3
"""PyTorch's own DistributedTest on gang and on gloo, side by side.

Usage: PYTHON dist_suite.py [--venv] BUILD_DIR [--world 2,4] [--on gang,gloo]
                            [--select ci|all|TEST,...]

Runs torch.testing._internal.distributed.distributed_test's tests (the
suite PyTorch's test_distributed_spawn.py runs for gloo, shipped in the
torch wheel) through dist_suite_case.py, exactly as for gloo (BACKEND=gloo:
gloo's selection, skips and expectations), once with its process groups on
gloo and once with every one of them on gang, at each world size, and
compares: every test that passes on gloo must pass on gang. Two tests
assert a backend name no out-of-tree backend can give (NAMES_GLOO); they
are reported on their own and not held against gang.

--select ci (the default) is the bounded selection CI runs; all is the
whole suite (the long mode: about 5 s a test and a world size on a 2-core
machine). With gang alone (--on gang) every selected test must pass or skip
as it does on gloo. Exit status 0 when that holds, 1 when not, 77 (skip)
without the PyPI torch (--venv: $GANG_TORCH_VENV) or its expecttest.
The last lines summarise: "dist_suite: world W: gloo P passed, F failed,
S skipped; gang ...".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import gang_torch_build

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "dist_suite_case.py")

# Tests that assert a backend's name, which no backend from outside torch
# can give them: held apart, not against gang.
NAMES_GLOO = {
    # dist.get_backend() == "gloo": on gang it is "gang", by design.
    "test_get_backend",
    # DDP's logging data names the backend by c10d's C++ ProcessGroup, whose
    # getBackendName() is "custom" for every backend registered from outside
    # torch; the test wants dist.get_backend()'s "gang".
    "test_ddp_logging_data_cpu",
}

# The bounded selection CI runs (each passes on gloo at world sizes 2 and
# 4 on a 2-core machine): the collectives over their dtypes and groups,
# async works and their futures, object collectives, barriers and their
# timeouts, send/recv with and without a source, monitored barriers,
# sparse all-reduce, DDP with a hook that chains a future, and groups'
# destruction. About 8 minutes at world sizes 2 and 4.
CI_SELECTION = [
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_full_group_max",
    "test_all_reduce_sum_complex", "test_all_reduce_complex_unsupported_ops",
    "test_all_reduce_coalesced_sum", "test_all_reduce_coalesced_full_group_product",
    "test_all_gather", "test_all_gather_coalesced_with_empty",
    "test_all_gather_object_default_pg", "test_all_gather_object_subgroup", "test_broadcast",
    "test_broadcast_full_group", "test_gather", "test_gather_checks", "test_scatter",
    "test_scatter_checks", "test_scatter_object_list", "test_reduce_sum",
    "test_reduce_full_group_min", "test_barrier", "test_barrier_timeout_full_group",
    "test_send_recv", "test_send_recv_any_source", "test_send_recv_with_tag", "test_isend",
    "test_irecv", "test_batch_isend_irecv_gloo", "test_monitored_barrier_gloo",
    "test_monitored_barrier_gloo_rank_0_timeout", "test_monitored_barrier_gloo_subgroup",
    "test_sparse_all_reduce_sum", "test_DistributedDataParallelCPU",
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook", "test_ddp_create_graph",
    "test_static_graph_api_cpu", "test_get_future", "test_destroy_group",
    "test_get_rank_size_group",
]


def selected(python, env, select):
    """The test names to run (those the suite has, for a list)."""
    out = subprocess.run([python, CASE, "--list"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if out.returncode != 0:
        raise SystemExit("listing the suite failed:\n" + out.stderr[-3000:])
    names = [n for n in out.stdout.split() if n.startswith("test_")]
    if select == "all":
        return names
    wanted = CI_SELECTION if select == "ci" else select.split(",")
    missing = [n for n in wanted if n not in names]
    if missing:
        print(f"dist_suite: not in this torch's suite (left out): {' '.join(missing)}")
    return [n for n in wanted if n in names]


def run(python, env, names, on, world):
    """{test: (outcome, detail)} for one backend and world size."""
    tmp = tempfile.mkdtemp(prefix=f"gang-dist-{on}-{world}-")
    results = os.path.join(tmp, "results.jsonl")
    run_env = dict(env, GANG_DIST_SUITE_ON=on, BACKEND="gloo", WORLD_SIZE=str(world),
                   TEMP_DIR=tmp, GANG_DIST_SUITE_RESULTS=results)
    log = os.path.join(tmp, "log.txt")
    start = time.time()
    with open(log, "w") as f:
        subprocess.run([python, CASE] + names, env=run_env, stdout=f, stderr=subprocess.STDOUT,
                       cwd=HERE)
    got = {}
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                r = json.loads(line)
                got[r["test"]] = (r["outcome"], r["detail"])
    for n in names:
        got.setdefault(n, ("failed", f"no outcome recorded (see {log})"))
    print(f"dist_suite: world {world} on {on}: {len(names)} tests in {time.time() - start:.0f} s "
          f"(log {log})", flush=True)
    return got


def counts(got):
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome, _ in got.values():
        c[outcome] += 1
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", action="store_true")
    ap.add_argument("build")
    ap.add_argument("--world", default="2")
    ap.add_argument("--on", default="gang,gloo")
    ap.add_argument("--select", default="ci")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)

    python = sys.executable
    if args.venv:
        venv = os.environ.get("GANG_TORCH_VENV")
        if not venv or not os.path.exists(os.path.join(venv, "bin", "python")):
            print("skipped: no PyPI torch (GANG_TORCH_VENV unset; .ci/torch-venv.sh makes one)")
            return SKIP
        python = os.path.join(venv, "bin", "python")
    probe = subprocess.run([python, "-c", "import torch.distributed, expecttest"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if probe.returncode != 0:
        print(f"skipped: {python} lacks torch.distributed or expecttest "
              "(torch.testing._internal needs it; .ci/torch-venv.sh adds it)")
        return SKIP
    lib, why = gang_torch_build.build(python, args.build)
    if lib is None:
        print(f"building gang_torch failed: {why}")
        return 1
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
              "GANG_INIT_METHOD", "GANG_RANK", "GANG_SIZE"):
        env.pop(k, None)
    env.update({
        "PYTHONPATH": os.pathsep.join([lib, os.path.join(args.build, "bindings", "python"),
                                       env.get("PYTHONPATH", "")]),
        "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
        "PYTORCH_PRINT_REPRO_ON_FAILURE": "0", "BACKEND": "gloo", "WORLD_SIZE": "2",
        "TEMP_DIR": tempfile.gettempdir(),
        # A hung test ends in 2 minutes, not the suite's default 5.
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": env.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120"),
    })
    names = selected(python, env, args.select)
    backends = args.on.split(",")
    ok = True
    summary = []
    for world in (int(w) for w in args.world.split(",")):
        got = {on: run(python, env, names, on, world) for on in backends}
        line = f"dist_suite: world {world}: " + "; ".join(
            f"{on} {counts(got[on])}" for on in backends)
        gang = got.get("gang")
        if gang is None:
            summary.append(line)
            continue
        gloo = got.get("gloo")
        # Held against gang: a test passing on gloo (or, gang alone, any
        # selected test) that does not pass on gang.
        bad = []
        for n in names:
            if n in NAMES_GLOO:
                continue
            want = gloo[n][0] if gloo else "passed"
            if want == "passed" and gang[n][0] != "passed":
                if gloo is None and gang[n][0] == "skipped":
                    continue  # skipped as on gloo: the selection's skips are gloo's
                bad.append(n)
        named = [n for n in names if n in NAMES_GLOO and gang[n][0] == "failed"]
        if named:
            line += f" ({len(named)} assert a backend name: {' '.join(named)})"
        if gloo is not None:
            extra = [n for n in names if gang[n][0] == "passed" and gloo[n][0] != "passed"]
            if extra:
                line += f"; gang passes {len(extra)} gloo does not: {' '.join(extra)}"
        for n in bad:
            ok = False
            print(f"--- {n}, world {world}: gang {gang[n][0]}"
                  + (f", gloo {gloo[n][0]}" if gloo else "") + "\n" + gang[n][1])
        if bad:
            line += f"; NOT ON GANG ({len(bad)}): {' '.join(bad)}"
        summary.append(line)
    for line in summary:
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
