"""Data-parallel SGD on a linear model, in Python with gang and numpy.

Every rank owns a shard of synthetic data y = w*.x + b* + noise, drawn from
a seed derived from its rank. Each step, every rank computes the gradient of
the squared error on a mini-batch of its shard; one all_reduce with
ReduceOperation.MEAN averages the gradients (and the loss, for printing)
across ranks, and every rank applies the same update. The averaged gradient
is bitwise identical on every rank, so the weights are too: the program
checks that at the end with all_gather, and that the model found w* and b*.
It exits nonzero if either check fails.

Run 4 ranks on this machine with a launcher that sets GANG_RANK, GANG_SIZE
and GANG_INIT_METHOD, e.g.

    gangrun --nproc-per-node 4 -- python3 examples/python/train_linear.py

(with PYTHONPATH pointing at <build>/bindings/python); without one it runs
as a single rank.
"""

import argparse
import sys

import numpy as np

import gang

TRUE_W = np.array([1.5, -2.0, 0.5, 3.0])
TRUE_B = 0.7
SHARD, BATCH = 512, 32


def make_shard(rank: int):
    rng = np.random.default_rng(1234 + rank)
    x = rng.uniform(-1.0, 1.0, size=(SHARD, TRUE_W.size))
    y = x @ TRUE_W + TRUE_B + rng.normal(0.0, 0.01, size=SHARD)
    return x, y


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    with gang.create() as g:
        x, y = make_shard(g.rank)
        # params = [w..., b]; rank 0 draws the start, everyone takes it.
        params = np.random.default_rng(99).normal(size=TRUE_W.size + 1)
        g.broadcast(params, source_rank=0)

        # One buffer for the gradient and the loss, reduced in one call.
        grad_and_loss = np.empty(params.size + 1)
        for step in range(args.steps):
            lo = (step * BATCH) % SHARD
            xb, yb = x[lo:lo + BATCH], y[lo:lo + BATCH]
            err = xb @ params[:-1] + params[-1] - yb
            grad_and_loss[:-2] = 2.0 * xb.T @ err / BATCH
            grad_and_loss[-2] = 2.0 * err.mean()
            grad_and_loss[-1] = (err ** 2).mean()
            g.all_reduce(grad_and_loss, gang.ReduceOperation.MEAN)
            params -= args.lr * grad_and_loss[:-1]
            if g.rank == 0 and step % 100 == 0:
                print(f"step {step:4d}  loss {grad_and_loss[-1]:.6f}")

        # Every rank must hold bitwise the same parameters...
        everyone = np.empty((g.size, params.size))
        g.all_gather(everyone, params)
        identical = all(np.array_equal(everyone[0], p) for p in everyone)
        # ...and they must be the true ones.
        found = np.allclose(params[:-1], TRUE_W, atol=0.02) and abs(params[-1] - TRUE_B) < 0.02
        if g.rank == 0:
            print(f"ranks {g.size}  w {np.round(params[:-1], 3)}  b {params[-1]:.3f}  "
                  f"identical {identical}  converged {found}")
        return 0 if identical and found else 1


if __name__ == "__main__":
    sys.exit(main())
