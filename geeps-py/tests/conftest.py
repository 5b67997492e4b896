"""Shared fixtures of the geeps Python suite: the torch policy and a runner
for multi-process jobs on loopback.

Torch: with ``GEEPS_TEST_TORCH=1`` (the CI lane sets it) a missing torch
fails the torch tests; without it they are skipped, and pytest's summary
says so. The runner starts N Python processes as the ranks of one geeps
cluster (``GEEPS_RANK``, ``GEEPS_WORLD_SIZE``, ``GEEPS_HOSTS`` on
127.0.0.1) and fails with every rank's output when one fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _torch_or_reason():
    try:
        import torch  # noqa: F401

        return None
    except ImportError as e:  # pragma: no cover - depends on the machine
        return str(e)


@pytest.fixture
def torch():
    missing = _torch_or_reason()
    if missing is not None:
        if os.environ.get("GEEPS_TEST_TORCH") == "1":
            pytest.fail(f"GEEPS_TEST_TORCH=1 but torch does not import: {missing}")
        pytest.skip(f"torch is not installed ({missing}); set GEEPS_TEST_TORCH=1 to require it")
    import torch as t

    t.set_num_threads(1)
    return t


def free_ports(n: int) -> list:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def clean_env() -> dict:
    """The environment without any cluster description."""
    drop = ("GEEPS_", "SLURM_", "OMPI_", "PMI_", "MASTER_", "TORCHELASTIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k not in ("RANK", "WORLD_SIZE")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_ranks(code: str, world: int, *, args=(), timeout: float = 120.0, env_extra=None) -> list:
    """Runs ``code`` as every rank of a loopback cluster; returns each rank's stdout."""
    hosts = ",".join(f"127.0.0.1:{p}" for p in free_ports(world))
    procs = []
    for rank in range(world):
        env = clean_env()
        env.update(GEEPS_RANK=str(rank), GEEPS_WORLD_SIZE=str(world), GEEPS_HOSTS=hosts)
        env.update(env_extra or {})
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs, failed = [], False
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(timed out)"
        failed |= p.returncode != 0
        outs.append(out)
    if failed:
        report = "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n{o}" for r, (p, o) in enumerate(zip(procs, outs)))
        pytest.fail(f"a rank failed:\n{report}")
    return outs


def last_line(out: str) -> str:
    return [line for line in out.splitlines() if line.strip()][-1]
