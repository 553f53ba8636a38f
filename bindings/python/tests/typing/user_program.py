"""A program that uses gang's public API as a user would, fully annotated:
mypy --strict must accept it against gang's own annotations (py.typed)."""
from __future__ import annotations

from typing import Any, Optional

import gang
import gang.torch


def train_step(g: gang.Gang, grad: Any) -> float:
    g.all_reduce(grad, gang.ReduceOperation.MEAN)
    work: Any = g.barrier(async_op=True)
    if isinstance(work, gang.Work):
        done: bool = work.wait(timeout=5.0)
        assert done
    loss: float = g.all_sum(1.0)
    return loss / g.size


def main() -> None:
    g: gang.Gang = gang.FakeGang(rank=0, size=2)
    rank: int = g.rank
    name: str = g.name
    config: Any = g.broadcast_object({"lr": 0.1})
    flag: bool = g.broadcast_flag(True)
    objs: list[Any] = g.all_gather_object(rank)
    child: Optional[gang.Gang] = g.split(0, rank)
    gangs: gang.Gangs = gang.split_parallel(g, tp=1)
    ranks: list[int] = gang.layout(8, gang.Axis.TP, 3, tp=2)
    env: dict[str, Any] = gang.detect_env()
    try:
        g.broadcast(bytearray(4), source_rank=5)
    except gang.GangInvalidArgumentError as e:
        status: int = e.status
        print(status)
    print(rank, name, config, flag, objs, child, gangs, ranks, env, train_step(g, bytearray(8)))
    if False:  # typed, not run: needs torch
        pg: Any = gang.torch.as_process_group(g)
        print(pg)


if __name__ == "__main__":
    main()
