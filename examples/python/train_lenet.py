#!/usr/bin/env python3
"""LeNet on the bundled Fashion-MNIST subset, data-parallel over processes,
with geeps (``geeps.torch.DistributedOptimizer``) and with PyTorch DDP
(gloo) for comparison. Rank 0 prints each epoch's test accuracy and the
job's images/s, and a comparison line when both ran.

    geeps-launch -n 4 -- python examples/python/train_lenet.py --backend both
    torchrun --nproc-per-node 4 examples/python/train_lenet.py --backend both --slack 1

Each process trains on its shard of the training set (rank r takes every
world-th image of each epoch's shuffle) with a batch of ``--batch`` images;
an epoch is one pass over the whole set by the job.
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import geeps
import geeps.torch as gt

DATA = Path(__file__).resolve().parent.parent / "data"


def idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped), as numpy."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4 : 4 + 4 * dims])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data: Path, train_images: int):
    def images(name):
        x = idx(data / name).astype(np.float32) / 255.0
        return torch.from_numpy((x - 0.2860) / 0.3530).unsqueeze(1)  # Fashion-MNIST mean and std

    xtr, ytr = images("train-images-idx3-ubyte.gz"), torch.from_numpy(idx(data / "train-labels-idx1-ubyte.gz").astype(np.int64))
    xte, yte = images("t10k-images-idx3-ubyte.gz"), torch.from_numpy(idx(data / "t10k-labels-idx1-ubyte.gz").astype(np.int64))
    return xtr[:train_images], ytr[:train_images], xte, yte


class LeNet(nn.Module):
    """Caffe's LeNet: conv 20, pool, conv 50, pool, fc 500, ReLU, fc 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def accuracy(model, x, y) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum((model(x[i : i + 500]).argmax(1) == y[i : i + 500]).sum().item() for i in range(0, len(x), 500))
    model.train()
    return correct / len(x)


def train(args, backend: str, rank: int, world: int, data) -> dict:
    xtr, ytr, xte, yte = data
    torch.manual_seed(args.seed + rank)  # different initial weights: the start must be synced
    model = LeNet()
    base = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if backend == "geeps":
        opt = gt.DistributedOptimizer(base, model.named_parameters(), slack=args.slack, compensate=args.compensate)
        gt.broadcast_parameters(opt, root_rank=0)
        net = model
    else:
        net = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights
        opt = base
    steps = len(xtr) // (args.batch * world)
    result = {"epochs": []}
    trained, busy = 0, 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        mine = order[rank :: world]
        t0 = time.perf_counter()
        for s in range(steps):
            batch = mine[s * args.batch : (s + 1) * args.batch]
            opt.zero_grad()
            F.cross_entropy(net(xtr[batch]), ytr[batch]).backward()
            opt.step()
        dt = time.perf_counter() - t0
        trained += steps * args.batch * world
        busy += dt
        acc = accuracy(model, xte, yte)
        ips = steps * args.batch * world / dt
        result["epochs"].append((acc, ips))
        if rank == 0:
            print(f"[{backend}] epoch {epoch + 1}: test accuracy {acc * 100:.2f}%  {ips:.0f} images/s", flush=True)
    result["accuracy"] = result["epochs"][-1][0]
    result["images_per_s"] = trained / busy  # training time only, not the test passes
    if backend == "geeps":
        stats = opt.geeps_stats()
        if rank == 0:
            filled = (
                f", {opt.compensated_steps} of {steps * args.epochs} reads lacked the others' last clock "
                "(filled with own steps)"
                if args.compensate and args.slack
                else ""
            )
            print(
                f"[geeps] slack {args.slack}: stall {stats['stall_fraction'] * 100:.1f}% of wall time in geeps calls{filled}",
                flush=True,
            )
        opt.shutdown()
    return result


def ddp_group(rank: int, world: int) -> None:
    """A gloo process group: torchrun's store, or a file under geeps-launch."""
    import torch.distributed as dist

    if "MASTER_ADDR" in os.environ:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        run = os.environ.get("GEEPS_RUN_ID", str(os.getppid()))
        path = Path(tempfile.gettempdir()) / f"geeps-lenet-ddp-{run}"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["geeps", "ddp", "both"], default="geeps")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="images per process per step")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--slack", type=int, default=0, help="geeps staleness bound in clocks (0 = BSP)")
    p.add_argument(
        "--compensate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fill a stale read's missing clocks with the worker's own steps (DistributedOptimizer's compensate)",
    )
    p.add_argument("--train-images", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cluster = geeps.init()
    rank, world = cluster.rank, cluster.world
    data = load(args.data, args.train_images)
    results = {}
    if args.backend in ("geeps", "both"):
        results["geeps"] = train(args, "geeps", rank, world, data)
    if args.backend in ("ddp", "both"):
        ddp_group(rank, world)
        results["ddp"] = train(args, "ddp", rank, world, data)
        torch.distributed.destroy_process_group()
    if rank == 0:
        for name, r in results.items():
            print(f"final [{name}]: {world} processes, test accuracy {r['accuracy'] * 100:.2f}%, {r['images_per_s']:.0f} images/s")
        if len(results) == 2:
            g, d = results["geeps"], results["ddp"]
            print(
                f"geeps (slack {args.slack}) vs DDP (gloo): accuracy {100 * (g['accuracy'] - d['accuracy']):+.2f} points, "
                f"speed {g['images_per_s'] / d['images_per_s']:.2f}x"
            )
    geeps.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
