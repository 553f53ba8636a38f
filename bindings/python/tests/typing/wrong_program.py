"""Wrong uses of gang's API that mypy --strict must refuse: each line
marked "error" is one."""
from __future__ import annotations

import gang


def main() -> None:
    g = gang.FakeGang(rank=0, size=2)
    rank: str = g.rank  # error: a rank is an int
    total: str = g.all_sum(1.0)  # error: all_sum returns a float
    g.split("zero", 1)  # error: a color is an int
    gang.create(rank="0")  # error: rank is an int or None
    print(rank, total)
