#!/usr/bin/env python3
"""geeps-bench's sync scenario on PyTorch's gloo backend: one all_reduce
(sum) of a float32 table per clock, timed, on a rank started by geeps-bench
(RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment). Prints
one JSON line: the seconds of each timed clock."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

table_bytes, clocks = int(sys.argv[1]), int(sys.argv[2])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world)
t = torch.empty(table_bytes // 4, dtype=torch.float32)
want = world * (world + 1) / 2
seconds = []
for clock in range(clocks + 1):
    t.fill_(rank + 1)
    start = time.perf_counter()
    dist.all_reduce(t)
    took = time.perf_counter() - start
    for i in (0, t.numel() // 2, t.numel() - 1):
        if t[i].item() != want:
            sys.exit(f"gloo: element {i} holds {t[i].item()}, expected {want}")
    if clock > 0:
        seconds.append(took)
dist.destroy_process_group()
print(json.dumps({"seconds": seconds}))
