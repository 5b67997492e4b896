#!/usr/bin/env python3
"""`caffe-geeps time` on a deploy file beside PyTorch's forward and backward
of the same net, built from the same prototxt, at the same batch, on the
same CPU (or with `--gpu N` the same GPU), in the same run (docs/caffe.md,
"time against PyTorch"). Runs
alternate, `--repeat` times each, so a busy moment hits both sides alike;
the figure is each side's median forward-backward time and their ratio.

    python3 examples/caffe/scripts/time_vs_pytorch.py --batch 16 \\
        examples/caffe/models/zoo/bvlc_alexnet/deploy.prototxt ...

Needs a Python with torch. The net is read from the prototxt's text
format (Convolution, Pooling, ReLU, LRN, InnerProduct, Dropout, Concat,
BatchNorm, Scale, Eltwise, Softmax); any other layer type stops the run
naming it. Weights are random: time does not depend on them.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


# --- the prototxt text format -------------------------------------------------

TOKEN = re.compile(r'\s*(?:#[^\n]*\n?|("(?:[^"\\]|\\.)*")|([{}:])|([^\s{}:"#]+))')


def parse(text):
    """A message as a list of (field, value) pairs; a value is a string,
    or a nested message (list)."""
    tokens = [m.group(1) or m.group(2) or m.group(3) for m in TOKEN.finditer(text) if m.group(1) or m.group(2) or m.group(3)]
    pos = 0

    def message(closing):
        nonlocal pos
        fields = []
        while pos < len(tokens) and tokens[pos] != closing:
            name = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
            if tokens[pos] == "{":
                pos += 1
                fields.append((name, message("}")))
                pos += 1
            else:
                fields.append((name, tokens[pos].strip('"')))
                pos += 1
        return fields

    return message(None)


def get(msg, name, default=None):
    for k, v in msg:
        if k == name:
            return v
    return default


def get_all(msg, name):
    return [v for k, v in msg if k == name]


def with_batch(text, batch):
    """The deploy file with its first input's batch dimension set to `batch`
    (legacy `input_dim`, `input_shape { dim }` or an Input layer's shape)."""
    m = re.search(r"(input_dim\s*:\s*)(\d+)", text) or re.search(r"(shape\s*:?\s*\{\s*dim\s*:\s*)(\d+)", text)
    if not m:
        sys.exit("time_vs_pytorch: no input_dim or shape { dim } in the deploy file to set the batch in")
    return text[: m.start(2)] + str(batch) + text[m.end(2):]


def input_shape(net):
    dims = [int(d) for d in get_all(net, "input_dim")]
    if not dims:
        shape = get(net, "input_shape")
        if shape is None:
            for layer in get_all(net, "layer"):
                if get(layer, "type") == "Input":
                    shape = get(get(layer, "input_param"), "shape")
        dims = [int(d) for d in get_all(shape or [], "dim")]
    return dims


# --- the net in PyTorch -------------------------------------------------------

def torch_net(net):
    import torch
    import torch.nn.functional as F

    def pair(p, name, default):
        v = get(p, name)
        return int(v) if v is not None else default

    shapes = {}
    params = []
    steps = []
    first = (get_all(net, "input") or ["data"])[0]
    shapes[first] = input_shape(net)

    def new(*shape):
        t = torch.randn(*shape) * 0.01
        t.requires_grad_(True)
        params.append(t)
        return t

    for layer in get_all(net, "layer"):
        kind, name = get(layer, "type"), get(layer, "name")
        bottoms, tops = get_all(layer, "bottom"), get_all(layer, "top")
        if kind == "Input":
            continue
        s = shapes[bottoms[0]] if bottoms else None
        if kind == "Convolution":
            p = get(layer, "convolution_param")
            k = pair(p, "kernel_size", 1)
            stride, pad, group = pair(p, "stride", 1), pair(p, "pad", 0), pair(p, "group", 1)
            dil = pair(p, "dilation", 1)
            out = int(get(p, "num_output"))
            w = new(out, s[1] // group, k, k)
            b = new(out) if get(p, "bias_term", "true") == "true" else None
            steps.append((tops[0], lambda x, w=w, b=b, st=stride, pd=pad, g=group, d=dil: F.conv2d(x[0], w, b, st, pd, d, g), bottoms))
            h = (s[2] + 2 * pad - dil * (k - 1) - 1) // stride + 1
            wd = (s[3] + 2 * pad - dil * (k - 1) - 1) // stride + 1
            shapes[tops[0]] = [s[0], out, h, wd]
        elif kind == "Pooling":
            p = get(layer, "pooling_param")
            ave = get(p, "pool", "MAX") == "AVE"
            if get(p, "global_pooling") == "true":
                k, stride, pad = s[2], 1, 0
            else:
                k, stride, pad = pair(p, "kernel_size", 1), pair(p, "stride", 1), pair(p, "pad", 0)
            ceil = get(p, "round_mode", "CEIL") == "CEIL"
            if ave:
                f = lambda x, k=k, st=stride, pd=pad, c=ceil: F.avg_pool2d(x[0], k, st, pd, ceil_mode=c)
            else:
                f = lambda x, k=k, st=stride, pd=pad, c=ceil: F.max_pool2d(x[0], k, st, pd, ceil_mode=c)
            steps.append((tops[0], f, bottoms))
            rnd = (lambda a: -(-a // stride)) if ceil else (lambda a: a // stride)
            h, wd = rnd(s[2] + 2 * pad - k) + 1, rnd(s[3] + 2 * pad - k) + 1
            shapes[tops[0]] = [s[0], s[1], h, wd]
        elif kind == "ReLU":
            steps.append((tops[0], lambda x: F.relu(x[0]), bottoms))
            shapes[tops[0]] = s
        elif kind == "LRN":
            p = get(layer, "lrn_param") or []
            n, a, b = pair(p, "local_size", 5), float(get(p, "alpha", 1.0)), float(get(p, "beta", 0.75))
            steps.append((tops[0], lambda x, n=n, a=a, b=b: F.local_response_norm(x[0], n, a, b, 1.0), bottoms))
            shapes[tops[0]] = s
        elif kind == "InnerProduct":
            out = int(get(get(layer, "inner_product_param"), "num_output"))
            inputs = 1
            for d in s[1:]:
                inputs *= d
            w, b = new(out, inputs), new(out)
            steps.append((tops[0], lambda x, w=w, b=b: F.linear(x[0].flatten(1), w, b), bottoms))
            shapes[tops[0]] = [s[0], out]
        elif kind == "Dropout":
            ratio = float(get(get(layer, "dropout_param") or [], "dropout_ratio", 0.5))
            steps.append((tops[0], lambda x, r=ratio: F.dropout(x[0], r, True), bottoms))
            shapes[tops[0]] = s
        elif kind == "Concat":
            steps.append((tops[0], lambda x: torch.cat(x, 1), bottoms))
            shapes[tops[0]] = [s[0], sum(shapes[b][1] for b in bottoms)] + s[2:]
        elif kind == "BatchNorm":
            c = s[1]
            mean, var = torch.zeros(c), torch.ones(c)
            steps.append((tops[0], lambda x, m=mean, v=var: F.batch_norm(x[0], m, v, training=False, eps=1e-5), bottoms))
            shapes[tops[0]] = s
        elif kind == "Scale":
            c = s[1]
            g = new(1, c, 1, 1)
            b = new(1, c, 1, 1) if get(get(layer, "scale_param") or [], "bias_term") == "true" else None
            steps.append((tops[0], lambda x, g=g, b=b: x[0] * g + b if b is not None else x[0] * g, bottoms))
            shapes[tops[0]] = s
        elif kind == "Eltwise":
            steps.append((tops[0], lambda x: sum(x[1:], x[0]), bottoms))
            shapes[tops[0]] = s
        elif kind == "Softmax":
            steps.append((tops[0], lambda x: F.softmax(x[0], 1), bottoms))
            shapes[tops[0]] = s
        else:
            sys.exit(f"time_vs_pytorch: layer `{name}` of type {kind} has no PyTorch counterpart here")

    def forward(x):
        blobs = {first: x}
        for top, f, bottoms in steps:
            blobs[top] = f([blobs[b] for b in bottoms])
        return blobs[steps[-1][0]]

    return forward, shapes[first]


def pytorch_ms(net, iterations):
    import torch

    forward, shape = torch_net(net)
    x = torch.randn(*shape)
    forward(x).sum().backward()  # warm-up, as Caffe's time runs one pass first
    # A GPU's work is queued: time from an idle GPU to an idle GPU.
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        forward(x).sum().backward()
    sync()
    return (time.perf_counter() - start) * 1e3 / iterations


def caffe_ms(binary, model, iterations, gpu):
    cmd = [binary, "time", "--model", model, "--iterations", str(iterations)]
    if gpu is not None:
        cmd += ["--gpu", str(gpu)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    m = re.search(r"Average Forward-Backward: ([0-9.]+) ms", out.stdout + out.stderr)
    if out.returncode != 0 or not m:
        sys.exit(f"time_vs_pytorch: caffe-geeps time failed on {model}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deploy", nargs="+", help="deploy prototxt files")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=3, help="forward-backward passes per measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpu", type=int, help="time both sides on this GPU (caffe-geeps --gpu N, torch cuda:N)")
    ap.add_argument("--caffe", default=os.path.join(ROOT, os.environ.get("CARGO_TARGET_DIR", "target"), "release", "caffe-geeps"))
    a = ap.parse_args()
    import torch

    if a.gpu is not None:
        if not torch.cuda.is_available() or a.gpu >= torch.cuda.device_count():
            sys.exit(f"time_vs_pytorch: --gpu {a.gpu}: torch sees {torch.cuda.device_count()} GPUs")
        torch.set_default_device(f"cuda:{a.gpu}")
        where = f"GPU {a.gpu}: {torch.cuda.get_device_name(a.gpu)}"
    else:
        where = f"{os.cpu_count()} cores, torch with {torch.get_num_threads()} threads"
    print(f"{where}; torch {torch.__version__}; batch {a.batch}")
    print("| net | caffe-geeps ms | PyTorch ms | caffe-geeps / PyTorch |")
    print("|---|---|---|---|")
    for path in a.deploy:
        text = with_batch(open(path).read(), a.batch)
        with tempfile.NamedTemporaryFile("w", suffix=".prototxt", delete=False) as f:
            f.write(text)
        net = parse(text)
        caffe, torch_side = [], []
        try:
            for _ in range(a.repeat):
                caffe.append(caffe_ms(a.caffe, f.name, a.iterations, a.gpu))
                torch_side.append(pytorch_ms(net, a.iterations))
        finally:
            os.unlink(f.name)
        c, t = statistics.median(caffe), statistics.median(torch_side)
        name = get(net, "name", os.path.basename(path))
        print(f"| {name} | {c:.1f} | {t:.1f} | {c / t:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
