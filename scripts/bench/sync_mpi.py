#!/usr/bin/env python3
"""geeps-bench's sync scenario on MPI (mpi4py): one Allreduce (sum) of a
float32 table per clock, timed, on each rank started by mpirun. Prints one
JSON line per rank (all from rank 0, so mpirun's merged output keeps
lines whole): the seconds of each timed clock."""
import json
import sys
import time

import numpy as np
from mpi4py import MPI

table_bytes, clocks = int(sys.argv[1]), int(sys.argv[2])
comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
t = np.empty(table_bytes // 4, dtype=np.float32)
want = world * (world + 1) / 2
seconds = []
for clock in range(clocks + 1):
    t.fill(rank + 1)
    start = time.perf_counter()
    comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)
    took = time.perf_counter() - start
    for i in (0, t.size // 2, t.size - 1):
        if t[i] != want:
            sys.exit(f"mpi: element {i} holds {t[i]}, expected {want}")
    if clock > 0:
        seconds.append(took)
every = comm.gather(seconds, root=0)
if rank == 0:
    print("\n".join(json.dumps({"seconds": s}) for s in every), flush=True)
