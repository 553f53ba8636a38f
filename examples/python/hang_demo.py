"""A hang to diagnose (README, Troubleshooting): rank 2 stops after three
all-reduces, as a slow data loader would, while the others wait in the
fourth. Run it under gangrun with GANG_FLIGHT_RECORDER set, send the ranks
SIGURG, and read the dumps with gang-trace."""
import time

import numpy as np

import gang

g = gang.create()  # rank and size from the launcher
x = np.ones(4, dtype=np.float32)
for step in range(3):
    g.all_reduce(x)
if g.rank == 2:
    time.sleep(30)  # stuck
g.all_reduce(x)
g.close()
