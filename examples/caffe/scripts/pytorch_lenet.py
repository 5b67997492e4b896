#!/usr/bin/env python3
"""PyTorch CPU baseline for docs/caffe.md: Caffe's LeNet (the same layers,
fillers aside) trained with the same solver settings (SGD, momentum 0.9,
weight decay 5e-4, lr 0.01 with the "inv" policy, batch 64) on the bundled
Fashion-MNIST subset, one process. Prints training images/s, measured over
the iterations after a warm-up, and the test accuracy at the end.

    python3 examples/caffe/scripts/pytorch_lenet.py --iters 300 --threads 2
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data")


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(prefix):
    x = idx(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz")).astype(np.float32) * 0.00390625
    y = idx(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.ip1 = nn.Linear(800, 500)
        self.ip2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2, 2)
        x = F.max_pool2d(self.conv2(x), 2, 2)
        x = F.relu(self.ip1(x.flatten(1)))
        return self.ip2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1701)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    net = LeNet()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (1 + 1e-4 * it) ** -0.75)
    n = xtr.shape[0]
    start = None
    for it in range(a.warmup + a.iters):
        if it == a.warmup:
            start = time.perf_counter()
        lo = (it * a.batch) % (n - a.batch + 1)
        x, y = xtr[lo:lo + a.batch], ytr[lo:lo + a.batch]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        sched.step()
    secs = time.perf_counter() - start
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    print(f"pytorch {torch.__version__} threads {a.threads}: {a.iters * a.batch / secs:.0f} images/s "
          f"({a.iters} iterations of batch {a.batch} in {secs:.2f} s), loss {loss.item():.4f}, "
          f"test accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
