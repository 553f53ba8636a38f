"""A hang to diagnose (docs/errors.md, Troubleshooting): rank 2 stops after three
all-reduces, as a slow data loader would, while the others wait in the
fourth. Run it under gangrun, send gangrun SIGUSR2 (every rank then dumps
its recent operations) and read the dumps with gang-trace.
HANG_DEMO_SECONDS: how long rank 2 is stuck (default 30)."""
import os
import time

import numpy as np

import gang

g = gang.create()  # rank and size from the launcher
x = np.ones(4, dtype=np.float32)
for step in range(3):
    g.all_reduce(x)
print("rank %d: after 3 all-reduces" % g.rank, flush=True)
if g.rank == 2:
    time.sleep(float(os.environ.get("HANG_DEMO_SECONDS", "30")))  # stuck
g.all_reduce(x)
g.close()
