"""An agent whose event loop is busy still renews its cluster's lease on time.

The hub (`suanpan-hub serve`, its loop applying the default lease: NotReady after 4 s, lost
after 8 s) runs in a process of its own; the agent runs in this one, and the test then holds
the agent's event loop for longer than the lease, as a burst of assignments to reconcile
would. The lease renews from its own thread, so the hub never sees the cluster silent.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.hub_client import HubApi
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from deploy.fleet import Fleet, free_port
from deploy.local.kube import wait_for
from federation.catalog import load_catalog
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.tables import clusters, events
from tests.integration.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.integration

NODE = SimNodeSpec(
    "n0",
    {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
)


@pytest.fixture
def hub_process(db: Database, tmp_path: Path) -> Iterator[str]:
    """`suanpan-hub serve` on the test's database; its URL."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db.url, "SUANPAN_ADMIN_TOKEN": ADMIN_TOKEN}
    log = (tmp_path / "hub.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.hub_cli", "serve", f"--port={port}"],
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


async def test_a_busy_agent_keeps_its_lease(db: Database, hub_process: str) -> None:
    await ensure_admin_token(db, ADMIN_TOKEN)
    admin = Fleet(db, ADMIN_TOKEN, port=int(hub_process.rsplit(":", 1)[1]))

    async def serving() -> bool:
        try:
            return (await admin.text("/readyz"))[0] == 200
        except OSError:
            return False

    await wait_for("the hub serving", serving, 60)
    issued = await admin.call(
        "POST", "/v1/tokens", json={"name": "busy-agent", "role": "agent", "cluster": "busy"}
    )
    catalog = load_catalog()
    agent = Agent(
        AgentConfig(cluster="busy"),
        SimulatedCluster(catalog, [NODE]),
        catalog,
        HubApi(hub_process, issued["token"]),
    )
    stop = asyncio.Event()
    running = asyncio.create_task(agent.run(stop))
    try:

        async def ready() -> bool:
            async with db.connection() as conn:
                state = await conn.scalar(
                    sa.select(clusters.c.state).where(clusters.c.name == "busy")
                )
            return state == "Ready"

        await wait_for("the cluster Ready", ready, 60)
        time.sleep(12.0)  # noqa: ASYNC251 (the point: the agent's loop held past the 8 s lease)
        await asyncio.sleep(1.0)
        async with db.connection() as conn:
            said = await conn.scalars(
                sa.select(events.c.reason)
                .join(clusters, clusters.c.id == events.c.cluster_id)
                .where(clusters.c.name == "busy", events.c.reason.in_(("NotReady", "Offline")))
            )
            assert list(said) == []
        assert await ready()
    finally:
        stop.set()
        await running
