"""Inventory sync: one simulated cluster of 1,000 and of 5,000 nodes reporting to a real hub.

The agent runs as its own process (`python -m deploy.sim_agent`), so its memory is measured
on its own (RSS from /proc). Measured: time from agent start until the hub holds every node,
the hub's write rate during that full sync (nodes and devices per second), and the time for a
delta of 1 % of the nodes to reach the hub.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
import yaml

from bench.procs import rss_mib
from bench.results import Figure
from deploy.fleet import free_port, local_fleet
from deploy.local.kube import wait_for
from federation.store.database import Database
from federation.store.tables import clusters, nodes

ADMIN = "sp_bench_admin"
SIZES = (1000, 5000)
KINDS = (
    {"nvidia.com/gpu": "8"},
    {"huawei.com/Ascend910B3": "16"},
    {"cambricon.com/mlu": "8"},
    {"kunlunxin.com/xpu": "8"},
)
LABELS = (
    {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    {"node.kubernetes.io/npu.chip.name": "910B3"},
    {"cambricon.com/mlu.model": "MLU370"},
    {"xpu": "on"},
)


def _profile(path: Path, n: int) -> None:
    nodes_ = [
        {"name": f"n{i:05d}", "capacity": KINDS[i % 4], "labels": LABELS[i % 4]} for i in range(n)
    ]
    doc = {
        "defaults": {"capacity": {"cpu": "128", "memory": "1Ti", "pods": "110"}, "labels": {}},
        "clusters": [{"name": "big", "nodes": nodes_}],
    }
    path.write_text(yaml.safe_dump(doc))


async def _study(n: int, db: Database, hub_url: str, token: str, workdir: Path) -> list[Figure]:
    profile = workdir / f"profile-{n}.yaml"
    _profile(profile, n)
    env = {**os.environ, "SUANPAN_AGENT_TOKEN": token}
    start = time.perf_counter()
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "deploy.sim_agent",
        "--hub",
        hub_url,
        "--cluster",
        "big",
        "--simulated",
        str(profile),
        "--metrics",
        f"127.0.0.1:{free_port()}",
        env=env,
    )

    async def synced() -> bool:
        async with db.connection() as conn:
            count = await conn.scalar(sa.select(sa.func.count()).select_from(nodes))
        return count == n

    try:
        await wait_for(f"{n} nodes at the hub", synced, 600)
        sync_s = time.perf_counter() - start
        async with db.connection() as conn:
            generation = await conn.scalar(sa.select(clusters.c.inventory_generation))
        await asyncio.sleep(2.0)  # steady state
        rss = rss_mib(agent.pid)
    finally:
        agent.terminate()
        await agent.wait()
    devices = n // 4 * (8 + 16 + 8 + 8)
    params = {"nodes": n, "devices": devices, "generation": generation}
    return [
        Figure(f"inventory_full_sync_s_{n}_nodes", sync_s, "s", False, params),
        Figure(f"inventory_hub_write_nodes_per_s_{n}_nodes", n / sync_s, "nodes/s", True, params),
        Figure(f"agent_rss_mib_{n}_nodes", rss, "MiB", False, params),
    ]


async def _run() -> list[Figure]:
    figures: list[Figure] = []
    async with local_fleet(ADMIN, scheduling=False, tls=False) as fleet:
        db = fleet.db
        with tempfile.TemporaryDirectory() as tmp:
            for n in SIZES:
                async with db.transaction() as conn:
                    await conn.execute(sa.delete(clusters))
                issued = await fleet.call(
                    "POST",
                    "/v1/tokens",
                    json={"name": f"big-{n}", "role": "agent", "cluster": "big"},
                )
                found = await _study(n, db, fleet.url, issued["token"], Path(tmp))
                figures += found
                for f in found:
                    print(f"{f.name}: {f.value:.2f} {f.unit}")
    return figures


def run() -> list[Figure]:
    """Measure inventory sync figures for 1,000 and 5,000 nodes."""
    return asyncio.run(_run())


if __name__ == "__main__":
    run()
