#!/usr/bin/env python3
"""Activations past device memory with geeps.torch.offload: a deep MLP
whose saved activations need N bytes fails at 35% of N without offload
(``activation_budget``: what a device of that size does) and trains with
it; the script prints images/s at the full budget and at 35%, and the
ratio.

    python examples/python/offload_mlp.py --fraction 0.35
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import geeps
import geeps.torch as gt


def mlp(depth: int, width: int) -> nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train(model, x, y, steps: int) -> tuple:
    """Images/s over ``steps`` steps after two warm-up steps, and the last loss."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def one():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    one(), one()  # the first plans the offload; both warm up
    start = time.perf_counter()
    for _ in range(steps):
        loss = one()
    return steps * len(x) / (time.perf_counter() - start), loss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--fraction", type=float, default=0.35, help="budget as a fraction of what the activations need")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(args.batch, args.width, generator=g), torch.randint(0, 10, (args.batch,), generator=g)

    plain_ips, _ = train(mlp(args.depth, args.width), x, y, args.steps)
    print(f"plain PyTorch, no budget: {plain_ips:.0f} images/s")
    probe = mlp(args.depth, args.width)
    off = gt.offload(probe, budget=1 << 40)
    full_ips, full_loss = train(probe, x, y, args.steps)
    need = off.needed_bytes
    off.remove()
    budget = int(args.fraction * need)
    print(f"saved activations need {need / 2**20:.1f} MiB; budget at {args.fraction:.0%}: {budget / 2**20:.1f} MiB")
    print(f"offload, full budget: {full_ips:.0f} images/s (loss {full_loss:.4f})")

    m = mlp(args.depth, args.width)
    limit = gt.activation_budget(m, budget)
    try:
        train(m, x, y, 1)
        print("without offload at the budget: trained (the budget was not short)")
    except geeps.MemoryBudgetError as e:
        print(f"without offload at the budget: fails: {e}")
    limit.remove()

    m = mlp(args.depth, args.width)
    off = gt.offload(m, budget=budget)
    ips, loss = train(m, x, y, args.steps)
    plan = off.plan()
    print(
        f"offload at {args.fraction:.0%}: {ips:.0f} images/s (loss {loss:.4f}); "
        f"{plan['local_device_bytes'] / 2**20:.1f} MiB on the device, {plan['local_host_bytes'] / 2**20:.1f} MiB in host memory, "
        f"pool {plan['pool_bytes'] / 2**20:.1f} MiB"
    )
    print(f"speed at {args.fraction:.0%} of the activations' memory: {ips / full_ips:.2f}x the full budget's")
    off.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
