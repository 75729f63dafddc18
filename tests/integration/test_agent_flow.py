"""Agents over simulated clusters against the real hub: the whole flow and its faults.

Everything above the backend interface is the production agent; the hub is the real app on a
loopback port with PostgreSQL; the scheduling loop is the real controller.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cluster_agents.backends.simulated import SimulatedCluster
from deploy.fleet import Fleet
from deploy.local.kube import wait_for
from deploy.local.pki import write_serving_pki
from federation.store.database import Database
from tests.integration.conftest import ADMIN_TOKEN, serving

pytestmark = pytest.mark.integration


class JobFleet(Fleet):
    """The shared fleet with a job lookup."""

    async def job(self, job_id: str) -> dict[str, Any]:
        return dict(await self.call("GET", f"/v1/jobs/{job_id}"))


@pytest.fixture
async def fleet(db: Database, tmp_path: Path) -> AsyncIterator[JobFleet]:
    async with serving(db, JobFleet(db, ADMIN_TOKEN, pki=write_serving_pki(tmp_path / "pki"))) as f:
        yield f


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


async def test_inventory_matches_the_simulated_clusters(fleet: JobFleet) -> None:
    sim = await fleet.add_cluster("bj", "dc-beijing")

    async def synced() -> bool:
        c = await fleet.call("GET", "/v1/clusters/bj")
        return bool(c.get("state") == "Ready" and c["nodes"] == len(sim.nodes()))

    await wait_for("cluster bj registered with all nodes", synced, 30)
    cluster = await fleet.call("GET", "/v1/clusters/bj")
    expected: dict[str, int] = {}
    for node in sim.nodes():
        for d in node.devices:
            expected[d.flavor] = expected.get(d.flavor, 0) + 1
    assert {f["flavor"]: f["total"] for f in cluster["flavors"]} == expected
    assert len(expected) >= 3  # NVIDIA and at least two domestic vendors


async def test_a_job_runs_to_success_on_the_cluster_with_its_flavor(fleet: JobFleet) -> None:
    await fleet.add_cluster("bj", "dc-beijing")
    sh = await fleet.add_cluster("sh", "dc-shanghai")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("xpu", "kunlunxin/*", count=4, run_s=20)
    )

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    async def placed_on_sh() -> bool:
        return bool(our_pods(sh, job["id"]))

    await wait_for("pods created on shanghai (the only Kunlunxin cluster)", placed_on_sh, 30)
    await wait_for("job Succeeded", done, 30)
    final = await fleet.job(job["id"])
    assert final["cluster"] == "sh"
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    assert [e["reason"] for e in events["items"]][:4] == [
        "Submitted",
        "Placed",
        "Applied",
        "Running",
    ]


async def test_cancel_deletes_the_pods(fleet: JobFleet) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("long", "nvidia/H100*", count=8, run_s=100_000)
    )

    async def running() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Running"

    await wait_for("job Running", running, 30)
    assert len(our_pods(bj, job["id"])) == 1
    await fleet.call("POST", f"/v1/jobs/{job['id']}/cancel")

    async def gone() -> bool:
        return not our_pods(bj, job["id"])

    await wait_for("pods deleted after cancel", gone, 30)
    assert (await fleet.job(job["id"]))["state"] == "Cancelled"


async def test_agent_restart_mid_dispatch_creates_no_duplicate_and_loses_no_status(
    fleet: JobFleet,
) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("gang", "nvidia/H100*", count=4, replicas=4, run_s=60)
    )

    async def dispatched() -> bool:
        return (await fleet.job(job["id"]))["state"] in ("Dispatched", "Running")

    await wait_for("job dispatched", dispatched, 30)
    await fleet.stop_agent("bj")  # killed mid-flight
    created = sorted(our_pods(bj, job["id"]))
    fleet.start_agent("bj")  # a new agent process: no memory of the old one

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    await wait_for("job Succeeded after the agent restart", done, 60)
    assert len(created) == 4 and len(set(created)) == 4
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    assert [e["reason"] for e in events["items"]].count("Succeeded") == 1


async def test_hub_restart_while_agents_run_loses_nothing(fleet: JobFleet) -> None:
    fleet.keep_finished_s = 0  # finished pods go as soon as the release is heard
    bj = await fleet.add_cluster("bj", "dc-beijing")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("survivor", "huawei/Ascend910B3", count=8, run_s=60)
    )

    async def running() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Running"

    await wait_for("job Running", running, 30)
    await fleet.stop_loop()
    await fleet.stop_hub()
    await asyncio.sleep(1.0)  # agents see the hub gone and back off
    await fleet.start_hub()
    fleet.start_loop()

    async def done() -> bool:
        return (await fleet.job(job["id"]))["state"] == "Succeeded"

    await wait_for("job Succeeded across the hub restart", done, 60)

    async def cleaned() -> bool:
        return not our_pods(bj, job["id"])

    await wait_for("finished pods removed once the hub released the placement", cleaned, 30)
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    reasons = [e["reason"] for e in events["items"]]
    assert reasons.count("Placed") == 1 and reasons.count("Succeeded") == 1


async def test_a_placement_moved_away_makes_the_old_cluster_delete_its_pods(
    fleet: JobFleet,
) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")
    sz = await fleet.add_cluster("sz", "dc-shenzhen")
    await fleet.call("POST", "/v1/clusters/sz/cordon")
    job = await fleet.call(
        "POST", "/v1/jobs", json=manifest("mover", "nvidia/H100*", count=8, run_s=100_000)
    )

    async def on_bj() -> bool:
        return bool(our_pods(bj, job["id"]))

    await wait_for("pods on bj", on_bj, 30)
    await fleet.call("POST", "/v1/clusters/sz/uncordon")
    await fleet.call("POST", "/v1/clusters/bj/drain")  # the hub moves the job: a new epoch on sz

    async def moved() -> bool:
        return not our_pods(bj, job["id"]) and bool(our_pods(sz, job["id"]))

    await wait_for("pods deleted on bj and created on sz", moved, 60)
    final = await fleet.job(job["id"])
    assert final["cluster"] == "sz" and final["epoch"] == 2
    assert all("-e2-" in name for name in our_pods(sz, job["id"]))
