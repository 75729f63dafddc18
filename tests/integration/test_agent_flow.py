"""Agents over simulated clusters against the real hub: the whole flow and its faults.

Everything above the backend interface is the production agent; the hub is the real app on a
loopback port with PostgreSQL; the scheduling loop is the real controller.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from api.app import create_app
from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.hub_client import HubApi
from cluster_agents.backends.simulated import SimNodeSpec, SimulatedCluster
from deploy.local.profile import load_profile
from federation.catalog import load_catalog
from federation.controllers.scheduler import LoopConfig, SchedulerLoop
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from tests.integration.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.integration

PROFILE = load_profile(Path(__file__).resolve().parents[2] / "deploy/local/profiles/mixed.yaml")
CATALOG = load_catalog()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def eventually(what: str, check: Callable[[], Awaitable[bool]], seconds: float = 30) -> None:
    """Wait until `check` holds (bounded; the failure names what never happened)."""
    async with asyncio.timeout(seconds):
        while not await check():
            await asyncio.sleep(0.1)
    assert await check(), what


@dataclass
class Fleet:
    """A hub, its scheduling loop, and simulated clusters each with an agent."""

    db: Database
    port: int
    clusters: dict[str, SimulatedCluster] = field(default_factory=dict)
    agents: dict[str, tuple[Agent, asyncio.Event, asyncio.Task[None]]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    runner: web.AppRunner | None = None
    loop_stop: asyncio.Event = field(default_factory=asyncio.Event)
    loop_task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start_hub(self) -> None:
        self.runner = web.AppRunner(create_app(self.db), access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop_hub(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()
        self.runner = None

    def start_loop(self) -> None:
        loop = SchedulerLoop(self.db, CATALOG, config=LoopConfig(interval_s=0.2))
        self.loop_stop = asyncio.Event()
        self.loop_task = asyncio.create_task(loop.run(self.loop_stop))

    async def stop_loop(self) -> None:
        self.loop_stop.set()
        if self.loop_task is not None:
            await self.loop_task

    async def call(self, method: str, path: str, token: str = ADMIN_TOKEN, **kw: Any) -> Any:
        import aiohttp

        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as s:
            async with s.request(method, self.url + path, **kw) as r:
                return await r.json(content_type=None) if r.status != 204 else None

    async def add_cluster(self, name: str, profile_name: str) -> SimulatedCluster:
        nodes = next(c for c in PROFILE.clusters if c.name == profile_name).nodes
        sim = SimulatedCluster(
            CATALOG, [SimNodeSpec(n.name, n.labels, n.capacity) for n in nodes], time_scale=20
        )
        self.clusters[name] = sim
        issued = await self.call(
            "POST", "/v1/tokens", json={"name": f"{name}-agent", "role": "agent", "cluster": name}
        )
        self.tokens[name] = issued["token"]
        self.start_agent(name)
        return sim

    def start_agent(self, name: str) -> None:
        agent = Agent(
            AgentConfig(cluster=name, poll_wait_s=1.0, gang_timeout_s=600),
            self.clusters[name],
            CATALOG,
            HubApi(self.url, self.tokens[name]),
        )
        stop = asyncio.Event()
        self.agents[name] = (agent, stop, asyncio.create_task(agent.run(stop)))

    async def stop_agent(self, name: str) -> None:
        _, stop, task = self.agents.pop(name)
        stop.set()
        await task

    async def job(self, job_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/jobs/{job_id}"))


@pytest.fixture
async def fleet(db: Database) -> AsyncIterator[Fleet]:
    await ensure_admin_token(db, ADMIN_TOKEN)
    f = Fleet(db, _free_port())
    await f.start_hub()
    await f.call("POST", "/v1/tenants", json={"name": "acme"})
    await f.call("POST", "/v1/tenants/acme/queues", json={"name": "default"})
    f.start_loop()
    yield f
    for name in list(f.agents):
        await f.stop_agent(name)
    await f.stop_loop()
    if f.runner is not None:
        await f.stop_hub()


def manifest(
    name: str, flavor: str, count: int, replicas: int = 1, run_s: int = 30, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "suanpan.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "tenant": "acme"},
        "spec": {
            "queue": "default",
            "tasks": [
                {
                    "name": "main",
                    "replicas": replicas,
                    "image": "busybox",
                    "annotations": {"suanpan.io/run-seconds": str(run_s)},
                    "resources": {
                        "cpu": "4",
                        "memory": "16Gi",
                        "accelerators": {"count": count, "anyOf": [{"flavor": flavor}]},
                    },
                }
            ],
            **spec,
        },
    }


def our_pods(sim: SimulatedCluster, job_id: str) -> list[str]:
    return [p.name for p in sim.pods() if p.job == job_id]


async def test_inventory_matches_the_simulated_clusters(fleet: Fleet) -> None:
    sim = await fleet.add_cluster("bj", "dc-beijing")

    async def synced() -> bool:
        c = await fleet.call("GET", "/v1/clusters/bj")
        return bool(c.get("state") == "Ready" and c["nodes"] == len(sim.nodes()))

    await eventually("cluster bj registered with all nodes", synced)
    cluster = await fleet.call("GET", "/v1/clusters/bj")
    expected: dict[str, int] = {}
    for node in sim.nodes():
        for d in node.devices:
            expected[d.flavor] = expected.get(d.flavor, 0) + 1
    assert {f["flavor"]: f["total"] for f in cluster["flavors"]} == expected
    assert len(expected) >= 3  # NVIDIA and at least two domestic vendors


async def test_a_job_runs_to_success_on_the_cluster_with_its_flavor(fleet: Fleet) -> None:
    await fleet.add_cluster("bj", "dc-beijing")
    sh = await fleet.add_cluster("sh", "dc-shanghai")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("xpu", "kunlunxin/*", count=4, run_s=20)
    )

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    async def placed_on_sh() -> bool:
        return bool(our_pods(sh, job["id"]))

    await eventually("pods created on shanghai (the only Kunlunxin cluster)", placed_on_sh)
    await eventually("job Succeeded", done)
    final = await fleet.job(job["id"])
    assert final["cluster"] == "sh"
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    assert [e["reason"] for e in events["items"]][:4] == [
        "Submitted",
        "Placed",
        "Applied",
        "Running",
    ]


async def test_cancel_deletes_the_pods(fleet: Fleet) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("long", "nvidia/H100*", count=8, run_s=100_000)
    )

    async def running() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Running"

    await eventually("job Running", running)
    assert len(our_pods(bj, job["id"])) == 1
    await fleet.call("POST", f"/v1/jobs/{job['id']}/cancel")

    async def gone() -> bool:
        return not our_pods(bj, job["id"])

    await eventually("pods deleted after cancel", gone)
    assert (await fleet.job(job["id"]))["state"] == "Cancelled"


async def test_agent_restart_mid_dispatch_creates_no_duplicate_and_loses_no_status(
    fleet: Fleet,
) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("gang", "nvidia/H100*", count=4, replicas=4, run_s=60)
    )

    async def dispatched() -> bool:
        return (await fleet.job(job["id"]))["state"] in ("Dispatched", "Running")

    await eventually("job dispatched", dispatched)
    await fleet.stop_agent("bj")  # killed mid-flight
    created = sorted(our_pods(bj, job["id"]))
    fleet.start_agent("bj")  # a new agent process: no memory of the old one

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    await eventually("job Succeeded after the agent restart", done, 60)
    assert len(created) == 4 and len(set(created)) == 4
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    assert [e["reason"] for e in events["items"]].count("Succeeded") == 1


async def test_hub_restart_while_agents_run_loses_nothing(fleet: Fleet) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("survivor", "huawei/Ascend910B3", count=8, run_s=60)
    )

    async def running() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Running"

    await eventually("job Running", running)
    await fleet.stop_loop()
    await fleet.stop_hub()
    await asyncio.sleep(1.0)  # agents see the hub gone and back off
    await fleet.start_hub()
    fleet.start_loop()

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    await eventually("job Succeeded across the hub restart", done, 60)

    async def cleaned() -> bool:
        return not our_pods(bj, job["id"])

    await eventually("finished pods removed once the hub released the placement", cleaned)
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    reasons = [e["reason"] for e in events["items"]]
    assert reasons.count("Placed") == 1 and reasons.count("Succeeded") == 1


async def test_a_placement_moved_away_makes_the_old_cluster_delete_its_pods(fleet: Fleet) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    sz = await fleet.add_cluster("sz", "dc-shenzhen")
    await fleet.call("POST", "/v1/clusters/sz/cordon")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("mover", "nvidia/H100*", count=8, run_s=100_000)
    )

    async def on_bj() -> bool:
        return bool(our_pods(bj, job["id"]))

    await eventually("pods on bj", on_bj)
    await fleet.call("POST", "/v1/clusters/sz/uncordon")
    await fleet.call("POST", "/v1/clusters/bj/drain")  # the hub moves the job: a new epoch on sz

    async def moved() -> bool:
        return not our_pods(bj, job["id"]) and bool(our_pods(sz, job["id"]))

    await eventually("pods deleted on bj and created on sz", moved, 60)
    final = await fleet.job(job["id"])
    assert final["cluster"] == "sz" and final["epoch"] == 2
    assert all("-e2-" in name for name in our_pods(sz, job["id"]))
