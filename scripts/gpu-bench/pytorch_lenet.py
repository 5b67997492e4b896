#!/usr/bin/env python3
"""Caffe's LeNet trained by PyTorch on one device: the baseline that
scripts/gpu-bench/run.sh puts beside caffe-geeps on the same GPU.

The net, solver and data match examples/caffe/models/lenet_*.prototxt:
conv 20@5x5, max pool 2x2/2, conv 50@5x5, max pool 2x2/2, inner product
500, ReLU, inner product 10, softmax loss; SGD with momentum 0.9, weight
decay 5e-4, lr 0.01 with Caffe's "inv" policy (gamma 1e-4, power 0.75);
batch 64; pixels scaled by 1/256; the bundled Fashion-MNIST subset.

Prints one line: `pytorch: N images/s (device D, I iterations, batch B)`.
"""

import argparse
import gzip
import pathlib
import struct
import sys
import time


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return data[4 + 4 * dims:], shape


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "data"))
    ap.add_argument("--device", default="cuda:0", help="cuda:N or cpu")
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        sys.exit("pytorch: not installed (pip install torch); skipped")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("pytorch: no CUDA device visible to PyTorch; skipped")

    pixels, shape = idx(pathlib.Path(args.data) / "train-images-idx3-ubyte.gz")
    labels, _ = idx(pathlib.Path(args.data) / "train-labels-idx1-ubyte.gz")
    n, h, w = shape
    dev = torch.device(args.device)
    x_all = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(n, 1, h, w).float().div_(256.0).to(dev)
    y_all = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long().to(dev)

    torch.manual_seed(1)
    net = nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2), nn.Flatten(),
        nn.Linear(50 * 4 * 4, 500), nn.ReLU(), nn.Linear(500, 10),
    ).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (1 + 1e-4 * it) ** -0.75)
    loss_fn = nn.CrossEntropyLoss()

    def step(it):
        lo = (it * args.batch) % (n - args.batch)
        xb, yb = x_all[lo:lo + args.batch], y_all[lo:lo + args.batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    for it in range(args.warmup):
        step(it)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    start = time.perf_counter()
    for it in range(args.iterations):
        loss = step(args.warmup + it)
    final = float(loss)  # waits for the device
    secs = time.perf_counter() - start
    print(f"pytorch: {args.iterations * args.batch / secs:.0f} images/s "
          f"(device {args.device}, {args.iterations} iterations, batch {args.batch}, final loss {final:.4f})")


if __name__ == "__main__":
    main()
