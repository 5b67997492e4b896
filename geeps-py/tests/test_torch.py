"""geeps.torch: tensors through DLPack, DistributedOptimizer (against plain
PyTorch on one worker, against averaged-gradient SGD on two processes, SSP,
checkpoint into another number of processes, torchrun), and offload of
saved activations within a budget."""

import subprocess
import sys

import numpy as np
import pytest

import geeps
from conftest import clean_env, free_ports, last_line, run_ranks


def model(torch, seed=0, width=16, depth=2):
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 3))


def batch(torch, seed, n=8, width=16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, generator=g), torch.randint(0, 3, (n,), generator=g)


def step(torch, m, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def test_tensor_is_the_buffer_memory(torch):
    import geeps.torch as gt

    b = geeps.Builder(row_width=4, device_memory=1 << 20)
    w = b.parameter_table("w", 2)
    ps = b.build()
    ps.finish_virtual_iteration()
    d = ps.pre_update_keys(w, range(2))
    t = gt.tensor(d)
    assert t.shape == (2, 4) and t.dtype == torch.float32 and t.data_ptr() == d.data_ptr
    t += 3
    del t
    d.update()
    ps.clock()
    with ps.read_keys(w, range(2)) as r:
        assert torch.equal(torch.from_dlpack(r).clone(), torch.full((2, 4), 3.0))
    ps.shutdown()


@pytest.mark.parametrize("make", ["sgd", "adam"])
def test_one_worker_matches_the_wrapped_optimizer_exactly(torch, make):
    import geeps.torch as gt

    def opt_of(m):
        if make == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        return torch.optim.Adam(m.parameters(), lr=0.01)

    ref, mine = model(torch), model(torch)
    ref_opt = opt_of(ref)
    opt = gt.DistributedOptimizer(opt_of(mine), mine.named_parameters(), slack=0, cluster=geeps.LocalCluster(1))
    assert isinstance(opt, type(ref_opt))
    torch.optim.lr_scheduler.StepLR(opt, step_size=1)  # schedulers accept it
    for i in range(5):
        x, y = batch(torch, i)
        # old + (new - old) rounds: equal to float32 precision, not bit for bit.
        assert step(torch, mine, opt, x, y) == pytest.approx(step(torch, ref, ref_opt, x, y), rel=1e-5)
    for a, b in zip(mine.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert opt.geeps_stats()["calls"]["update"][0] == 6  # the broadcast and five steps
    opt.shutdown()


def test_bad_inputs_are_refused(torch):
    import geeps.torch as gt

    m = model(torch)
    with pytest.raises(geeps.ArgumentError, match="torch.optim.Optimizer"):
        gt.DistributedOptimizer(object(), m.named_parameters())
    with pytest.raises(geeps.ArgumentError, match="slack"):
        gt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), slack=-1)
    d = torch.nn.Linear(2, 2).double()
    with pytest.raises(geeps.ArgumentError, match="float32"):
        gt.DistributedOptimizer(torch.optim.SGD(d.parameters(), lr=0.1), cluster=geeps.LocalCluster(1))
    other = torch.nn.Linear(2, 2)
    with pytest.raises(geeps.ArgumentError, match="not in the optimizer"):
        gt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), other.named_parameters())
    opt = gt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), cluster=geeps.LocalCluster(1))
    with pytest.raises(geeps.ArgumentError, match="root_rank"):
        gt.broadcast_parameters(opt, root_rank=1)
    with torch.no_grad():
        m[0].weight.add_(1.0)
    gt.broadcast_parameters(opt, root_rank=0)  # a later broadcast keeps the root's values
    assert m[0].weight.min() > 0.5
    with pytest.raises(geeps.ArgumentError):
        gt.broadcast_parameters(torch.optim.SGD(m.parameters(), lr=0.1))
    opt.shutdown()


TWO_RANKS = """
import sys, torch, geeps, geeps.torch as gt
torch.set_num_threads(1)
c = geeps.init()
slack, steps = int(sys.argv[1]), 6
torch.manual_seed(c.rank)  # different starts: the broadcast makes them rank 0's
m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
opt = gt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m.named_parameters(), slack=slack)
losses = []
for i in range(steps):
    g = torch.Generator().manual_seed(1000 * c.rank + i)
    x, y = torch.randn(8, 16, generator=g), torch.randint(0, 3, (8,), generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
print(repr(flat.tolist()))
"""


def test_two_processes_under_bsp_are_sgd_on_the_averaged_gradient(torch):
    outs = run_ranks(TWO_RANKS, 2, args=[0])
    finals = [eval(last_line(o)) for o in outs]
    assert finals[0] == finals[1], "BSP: both ranks end with the same parameters"
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    for i in range(6):
        grads = []
        for rank in range(2):
            g = torch.Generator().manual_seed(1000 * rank + i)
            x, y = torch.randn(8, 16, generator=g), torch.randint(0, 3, (8,), generator=g)
            ref.zero_grad()
            torch.nn.functional.cross_entropy(ref(x), y).backward()
            grads.append([p.grad.clone() for p in ref.parameters()])
        with torch.no_grad():
            for p, g0, g1 in zip(ref.parameters(), *grads):
                p -= 0.1 * (g0 + g1) / 2
    expect = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    np.testing.assert_allclose(np.array(finals[0]), expect.numpy(), rtol=1e-5, atol=1e-6)


def test_two_processes_under_ssp_finish(torch):
    outs = run_ranks(TWO_RANKS, 2, args=[1])
    for o in outs:
        assert all(np.isfinite(eval(last_line(o))))


SAVE = """
import sys, torch, geeps, geeps.torch as gt
torch.set_num_threads(1)
c = geeps.init()
torch.manual_seed(0)
m = torch.nn.Linear(8, 2)
opt = gt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), m.named_parameters())
for i in range(3):
    g = torch.Generator().manual_seed(10 * c.rank + i)
    opt.zero_grad()
    m(torch.randn(4, 8, generator=g)).pow(2).sum().backward()
    opt.step()
opt.checkpoint(sys.argv[1])
print(repr(torch.cat([m.weight.reshape(-1), m.bias]).tolist()))
"""

LOAD = """
import sys, torch, geeps, geeps.torch as gt
torch.set_num_threads(1)
c = geeps.init()
torch.manual_seed(5)
m = torch.nn.Linear(8, 2)
opt = gt.DistributedOptimizer(
    torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), m.named_parameters(), restore=sys.argv[1]
)
steps = opt.restored_steps
momentum = opt.state[m.weight]["momentum_buffer"]
print(steps, float(momentum.abs().sum()) > 0, repr(torch.cat([m.weight.reshape(-1), m.bias]).tolist()))
"""


def test_checkpoint_of_two_processes_resumes_in_one(torch, tmp_path):
    saved = [eval(last_line(o)) for o in run_ranks(SAVE, 2, args=[tmp_path])]
    assert saved[0] == saved[1]
    (out,) = run_ranks(LOAD, 1, args=[tmp_path])
    steps, has_momentum, params = last_line(out).split(" ", 2)
    assert steps == "3" and has_momentum == "True"
    np.testing.assert_allclose(eval(params), saved[0], rtol=0, atol=0)


def test_under_torchrun(torch, tmp_path):
    script = tmp_path / "job.py"
    # One short line per rank in one write: torchrun's ranks share a stdout.
    digest = "import hashlib\nsys.stdout.write('final ' + hashlib.sha1(flat.numpy().tobytes()).hexdigest() + '\\n')\n"
    script.write_text(TWO_RANKS.replace("print(repr(flat.tolist()))", "") + digest)
    port = free_ports(1)[0]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port)]
    out = subprocess.run(
        [*cmd, str(script), "0"], env=clean_env(), capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("final ")]
    assert len(lines) == 2 and lines[0] == lines[1], out.stdout + out.stderr[-3000:]


def deep(torch, seed=0):
    torch.manual_seed(seed)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(256, 10))


def train(torch, m, steps=4):
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)
    return [step(torch, m, opt, x, y) for _ in range(steps)]


def test_offload_trains_where_the_budget_alone_fails(torch):
    import geeps.torch as gt

    plain = train(torch, deep(torch))
    m = deep(torch)
    full = gt.offload(m, budget=64 << 20)
    assert train(torch, m) == plain  # bit for bit: the same values come back
    need = full.needed_bytes
    assert need > 0 and full.plan()["local_host_bytes"] == 0
    full.remove()

    tight = int(0.35 * need)
    m = deep(torch)
    budget = gt.activation_budget(m, tight)
    with pytest.raises(geeps.MemoryBudgetError, match="use geeps.torch.offload"):
        train(torch, m)
    budget.remove()

    m = deep(torch)
    off = gt.offload(m, budget=tight)
    assert train(torch, m) == plain
    plan = off.plan()
    assert plan["local_host_bytes"] > 0 and plan["local_device_bytes"] + plan["pool_bytes"] <= tight
    assert off.stats()["bytes_host_to_device"] > 0 and off.unplanned == 0
    off.remove()


def test_offload_keeps_a_changed_batch_correct(torch):
    import geeps.torch as gt

    m, ref = deep(torch), deep(torch)
    off = gt.offload(m, budget=16 << 20)
    o1, o2 = torch.optim.SGD(m.parameters(), lr=0.05), torch.optim.SGD(ref.parameters(), lr=0.05)
    for n in (32, 32, 16, 32):  # the third iteration differs from the recorded one
        x, y = batch(torch, n, n=n, width=256)
        y = y % 10
        assert step(torch, m, o1, x, y) == step(torch, ref, o2, x, y)
    assert off.unplanned > 0
    off.remove()


def test_offload_refuses_a_bad_budget(torch):
    import geeps.torch as gt

    with pytest.raises(geeps.ArgumentError):
        gt.offload(deep(torch), budget=0)


def on_two_threads(worker, errors):
    """Runs worker(0) and worker(1) on threads and fails with what they reported."""
    import threading

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


@pytest.mark.parametrize("slack", [2, None])
def test_threads_of_a_local_cluster_train_under_ssp_and_async(torch, slack):
    import geeps.torch as gt

    cluster, results, errors = geeps.LocalCluster(2), {}, []

    def worker(rank):
        try:
            m = model(torch, seed=rank)
            opt = gt.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=0.1), m.named_parameters(), slack=slack, cluster=cluster, rank=rank
            )
            assert opt.slack == slack
            losses = [step(torch, m, opt, *batch(torch, 10 * rank + i)) for i in range(8)]
            results[rank] = losses
            opt.shutdown()
        except Exception as e:  # reported below
            errors.append(e)

    on_two_threads(worker, errors)
    assert all(np.isfinite(results[r]).all() for r in range(2))


@pytest.mark.parametrize("compensate", [True, False])
def test_a_stale_read_is_filled_with_the_own_step_locally_and_never_in_the_table(torch, compensate):
    import threading

    import geeps.torch as gt

    cluster, lr = geeps.LocalCluster(2), 0.1
    ahead_done, errors, out = threading.Event(), [], {}

    def gradient(m, rank):
        g = torch.Generator().manual_seed(100 + rank)
        xs, ys = torch.randn(8, 16, generator=g), torch.randint(0, 3, (8,), generator=g)
        m.zero_grad()
        torch.nn.functional.cross_entropy(m(xs), ys).backward()
        return [p.grad.clone() for p in m.parameters()]

    start = model(torch, seed=0)
    # Built here: torch's seed is global, and two threads seeding it at once mix their models.
    models = [model(torch, seed=r) for r in range(2)]
    g = [gradient(model(torch, seed=0), r) for r in range(2)]

    def flat(m):
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()])

    def worker(rank):
        try:
            m = models[rank]  # rank 0's start wins at construction
            opt = gt.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=lr),
                m.named_parameters(),
                slack=1,
                cluster=cluster,
                rank=rank,
                compensate=compensate,
            )
            if rank == 1:
                ahead_done.wait(60)  # rank 0 steps first, one clock ahead
            gradient(m, rank)
            opt.step()
            if rank == 0:
                out["ahead"], out["compensated"] = flat(m), opt.compensated_steps
                ahead_done.set()
            opt.broadcast_parameters(0)  # a BSP read of the table
            out[rank] = flat(m)
            opt.shutdown()
        except Exception as e:  # reported below
            errors.append(e)
            ahead_done.set()

    on_two_threads(worker, errors)
    with torch.no_grad():
        own = flat(start) - lr * torch.cat([p.reshape(-1) for p in g[0]])
        mean = flat(start) - lr * torch.cat([(a + b).reshape(-1) / 2 for a, b in zip(*g)])
        half = flat(start) - lr * torch.cat([p.reshape(-1) / 2 for p in g[0]])
    # Rank 0 read before rank 1 stepped: it lacked rank 1's clock.
    assert out["compensated"] == (1 if compensate else 0)
    np.testing.assert_allclose(out["ahead"].numpy(), (own if compensate else half).numpy(), rtol=1e-5, atol=1e-6)
    # The table got the two real steps and nothing else.
    for rank in range(2):
        np.testing.assert_allclose(out[rank].numpy(), mean.numpy(), rtol=1e-5, atol=1e-6)
