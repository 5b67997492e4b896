#!/usr/bin/env python3
"""The geeps Python package on a real GPU: buffers of the CUDA device
exported through DLPack as CUDA memory (device (2, N)), refused as numpy,
and their rows written and read with the CUDA driver (ctypes), so that no
torch is needed; with torch present, torch.from_dlpack on the GPU too.
Prints one line per check and exits non-zero on the first failure.
``--no-torch``: the driver checks only (the emulated driver's way:
``scripts/with-cuda-emu python geeps-py/gpu/check_cuda.py --no-torch``)."""

import ctypes
import struct
import sys

import geeps


def driver():
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    return cuda


def main() -> int:
    print("probe:", geeps.cuda_probe(0))
    width, rows = 64, 8
    b = geeps.Builder(row_width=width, device_memory=64 << 20, device="cuda:0")
    w = b.parameter_table("w", rows)
    ps = b.build()
    ps.finish_virtual_iteration()
    assert ps.dlpack_device == (2, 0), ps.dlpack_device
    cuda = driver()
    n = rows * width
    up = ps.pre_update_keys(w, range(rows))
    assert up.__dlpack_device__() == (2, 0)
    try:
        up.numpy()
        raise AssertionError("numpy() of GPU memory must fail")
    except geeps.StateError as e:
        print("numpy refused:", e)
    host = (ctypes.c_float * n)(*[float(i) for i in range(n)])
    assert cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(up.data_ptr), host, ctypes.c_size_t(4 * n)) == 0
    up.update()
    ps.clock()
    r = ps.read_keys(w, range(rows), slack=0)
    out = (ctypes.c_float * n)()
    assert cuda.cuMemcpyDtoH_v2(out, ctypes.c_uint64(r.data_ptr), ctypes.c_size_t(4 * n)) == 0
    assert list(out) == [float(i) for i in range(n)], list(out)[:8]
    print("rows through the GPU: ok", struct.pack("f", out[n - 1]).hex())
    try:
        if "--no-torch" in sys.argv:
            raise ImportError("--no-torch")
        import torch
    except ImportError:
        print("torch: not used here, DLPack to torch not checked")
        r.post()
        ps.shutdown()
        return 0
    t = torch.from_dlpack(r)
    assert t.is_cuda and t.data_ptr() == r.data_ptr and float(t[-1, -1]) == n - 1
    print("torch.from_dlpack on", t.device, ": ok")
    del t
    r.post()
    ps.shutdown()
    return torch_checks(torch)


def torch_checks(torch) -> int:
    """DistributedOptimizer and offload with the model and geeps on the GPU,
    against the same training without geeps."""
    import geeps.torch as gt

    def net(seed=0):
        torch.manual_seed(seed)
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers, torch.nn.Linear(512, 10)).cuda()

    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(128, 512, generator=g).cuda(), torch.randint(0, 10, (128,), generator=g).cuda()

    def train(m, opt, steps=5):
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    ref = net()
    expect = train(ref, torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9))
    m = net()
    opt = gt.DistributedOptimizer(
        torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), m.named_parameters(), device="cuda:0"
    )
    got = train(m, opt)
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(got, expect)), (got, expect)
    print("DistributedOptimizer on cuda:0: ok", opt.geeps_stats()["text"][:60])
    opt.shutdown()
    m = net()
    off = gt.offload(m, budget=1 << 30, device="cuda:0")
    train(m, torch.optim.SGD(m.parameters(), lr=0.05), steps=1)
    need = off.needed_bytes
    off.remove()
    m = net()
    off = gt.offload(m, budget=int(0.35 * need), device="cuda:0")
    got = train(m, torch.optim.SGD(m.parameters(), lr=0.05))
    ref = net()
    expect = train(ref, torch.optim.SGD(ref.parameters(), lr=0.05))
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(got, expect)), (got, expect)
    plan = off.plan()
    print(f"offload on cuda:0 at 35%: ok, {plan['local_host_bytes']} bytes in host memory")
    off.remove()
    return stale_read_check(torch)


def stale_read_check(torch) -> int:
    """Two workers of a LocalCluster on cuda:0 at slack 1: rank 0 steps first,
    so its read lacks rank 1's clock and is filled with its own step
    (compensate), in its local parameters only; a BSP read then gives both the
    mean of the two real steps."""
    import threading

    import geeps.torch as gt

    def model(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).cuda()

    def gradient(m, rank):
        g = torch.Generator().manual_seed(100 + rank)
        xs, ys = torch.randn(8, 16, generator=g).cuda(), torch.randint(0, 3, (8,), generator=g).cuda()
        m.zero_grad()
        torch.nn.functional.cross_entropy(m(xs), ys).backward()
        return [p.grad.clone() for p in m.parameters()]

    def flat(m):
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()])

    lr, cluster = 0.1, geeps.LocalCluster(2)
    start, models = flat(model(0)), [model(r) for r in range(2)]
    g = [torch.cat([p.reshape(-1) for p in gradient(model(0), r)]) for r in range(2)]
    ahead_done, errors, out = threading.Event(), [], {}

    def worker(rank):
        try:
            m = models[rank]
            opt = gt.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=lr), m.named_parameters(),
                slack=1, cluster=cluster, rank=rank, device="cuda:0",
            )
            if rank == 1:
                ahead_done.wait(60)
            gradient(m, rank)
            opt.step()
            if rank == 0:
                out["ahead"], out["compensated"] = flat(m), opt.compensated_steps
                ahead_done.set()
            opt.broadcast_parameters(0)
            out[rank] = flat(m)
            opt.shutdown()
        except Exception as e:  # reported below
            errors.append(e)
            ahead_done.set()

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    own, mean = start - lr * g[0], start - lr * (g[0] + g[1]) / 2
    assert out["compensated"] == 1, out["compensated"]
    assert torch.allclose(out["ahead"], own, rtol=1e-5, atol=1e-6), (out["ahead"] - own).abs().max()
    for rank in range(2):
        assert torch.allclose(out[rank], mean, rtol=1e-5, atol=1e-6), (rank, (out[rank] - mean).abs().max())
    print("stale read at slack 1 filled with the own step on cuda:0, the table the mean of the real steps: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
