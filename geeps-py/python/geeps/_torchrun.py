"""The addresses of a torchrun job's keepers, exchanged through torchrun's
own store.

torchrun's agent already listens on ``MASTER_ADDR:MASTER_PORT`` (its
TCPStore), so rank 0 cannot host geeps' rendezvous there: each rank picks a
free port, publishes ``host:port`` in the agent's store and reads everyone
else's. Used by :func:`geeps.init` only under torchrun with no ``GEEPS_*``
address set; it must not be imported where torch may be absent.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import List, Optional

ADDRESS_VARS = ("GEEPS_HOSTS", "GEEPS_HOSTFILE", "GEEPS_RENDEZVOUS")


def under_torchrun() -> bool:
    """Whether torchrun started this process and nothing else says where the keepers are."""
    return "TORCHELASTIC_RUN_ID" in os.environ and not any(v in os.environ for v in ADDRESS_VARS)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def addresses(timeout_s: float = 300.0) -> tuple:
    """``(rank, [host:port of every rank])`` through the agent's store."""
    import torch.distributed as dist

    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    one_node = int(env.get("LOCAL_WORLD_SIZE", "0")) == world
    host = env.get("GEEPS_LISTEN") or ("127.0.0.1" if one_node else socket.getfqdn())
    store = dist.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=timeout_s)
    )
    prefix = f"geeps/{env['TORCHELASTIC_RUN_ID']}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/addr/"
    store.set(prefix + str(rank), f"{host}:{_free_port(host)}")
    found: List[Optional[str]] = [store.get(prefix + str(r)).decode() for r in range(world)]
    return rank, found
