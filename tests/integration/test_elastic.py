"""Elastic jobs at the hub: placed at min, grown into idle devices, shrunk for an urgent job
instead of evicting, each resize written to the placement (a new revision the agent reads)
with a `Resized` event; bad bounds answer 422. And the real agent over a simulated cluster
adding and removing the pods of the replicas a resize adds and removes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cluster_agents.backends.simulated import SimulatedCluster
from deploy.local.kube import wait_for
from deploy.local.pki import write_serving_pki
from federation.store.database import Database
from federation.wire import annotations as ann
from tests.integration.conftest import ADMIN_TOKEN, Hub, serving
from tests.integration.test_agent_flow import JobFleet, manifest, our_pods
from tests.integration.test_hub_flow import FLAVOR, _agent, _job, _loop, _node, _status
from tests.integration.test_replica_status import _describe

pytestmark = pytest.mark.integration


def _elastic(low: int, high: int) -> dict[str, Any]:
    manifest = _job("elastic", replicas=1, count=1)
    task = manifest["spec"]["tasks"][0]
    del task["replicas"]
    task.update(minReplicas=low, maxReplicas=high)
    return manifest


async def _assigned(hub: Hub, agent: str, after: int) -> dict[str, Any]:
    _, batch = await hub.call("GET", "/v1/agent/assignments", agent, params={"after": str(after)})
    (item,) = batch["items"]
    return dict(item)


async def _inventory(hub: Hub, agent: str, generation: int, used: int) -> None:
    status, _ = await hub.call(
        "POST",
        "/v1/agent/inventory",
        agent,
        json={"generation": generation, "full": True, "nodes": [_node("n1", used=used)]},
    )
    assert status == 200


async def test_an_elastic_job_grows_then_shrinks_for_an_urgent_job(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_elastic(2, 6))
    _, pending = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert pending["elastic"] == [
        {"task": "trainer", "replicas": None, "minReplicas": 2, "maxReplicas": 6}
    ]
    _, doc = await hub.call("GET", "/openapi.json", None)
    detail_schema = doc["components"]["schemas"]["JobDetail"]["properties"]["elastic"]
    assert detail_schema["items"]["$ref"].endswith("/ElasticTaskOut")
    loop = await _loop(hub)
    assert (await loop.cycle()).written.placed == 1
    placed = await _assigned(hub, agent, 0)
    assert placed["tasks"][0]["task"]["replicas"] == 2 and len(placed["hints"]) == 2
    await _status(hub, agent, job, "Applied")
    await _status(hub, agent, job, "Running")
    await _inventory(hub, agent, 2, used=2)

    assert (await loop.cycle()).written.resized == 1
    grown = await _assigned(hub, agent, placed["revision"])
    _, detail = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert detail["elastic"][0]["replicas"] == 6
    _, queue = await hub.call("GET", "/v1/tenants/acme/queues/default", user)
    assert queue["usage"][FLAVOR] == 6 * 1000  # the replicas it holds, as the scheduler charges
    status, problem = await hub.call(
        "GET", f"/v1/jobs/{job['id']}/logs", user, params={"replica": "6"}
    )
    assert (status, "0 to 5" in str(problem)) == (422, True), problem  # a grown one has logs
    assert (grown["epoch"], grown["tasks"][0]["task"]["replicas"]) == (1, 6)
    assert [h["replica"] for h in grown["hints"]] == list(range(6))
    await _inventory(hub, agent, 3, used=6)
    assert (await loop.cycle()).written.resized == 0  # at max

    urgent = _job("urgent", replicas=1, count=4, priority="critical")
    _, rush = await hub.call("POST", "/v1/jobs", user, json=urgent)
    report = await loop.cycle()
    assert (report.written.preempted, report.written.resized) == (1, 1)
    shrunk = await _assigned(hub, agent, grown["revision"])
    assert shrunk["tasks"][0]["task"]["replicas"] == 4 and len(shrunk["hints"]) == 4
    _, detail = await hub.call("GET", f"/v1/jobs/{job['id']}", user)
    assert detail["state"] == "Running"  # shrunk, not evicted
    assert detail["elastic"] == [
        {"task": "trainer", "replicas": 4, "minReplicas": 2, "maxReplicas": 6}
    ]

    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", user)
    resized = [e for e in events["items"] if e["reason"] == "Resized"]
    assert [e["data"]["replicas"] for e in resized] == [{"trainer": 6}, {"trainer": 4}]
    assert "idle" in resized[0]["message"] or "capacity" in resized[0]["message"]
    assert rush["id"] in resized[1]["message"]


async def test_replicas_a_job_grew_by_are_held_until_their_cluster_reports_them(
    hub: Hub,
) -> None:
    user = await hub.tenant_with_queue("acme")
    agent = await _agent(hub, "east", [_node("n1")])
    _, job = await hub.call("POST", "/v1/jobs", user, json=_elastic(2, 6))
    loop = await _loop(hub)
    assert (await loop.cycle()).written.placed == 1
    await _status(hub, agent, job, "Applied")
    await _status(hub, agent, job, "Running")
    await _inventory(hub, agent, 2, used=2)
    assert (await loop.cycle()).written.resized == 1  # onto devices 2..5, not reported yet

    await hub.call("POST", "/v1/jobs", user, json=_job("next", replicas=1, count=4))
    assert (await loop.cycle()).written.placed == 0  # 2 devices free, not 6
    _, batch = await hub.call("GET", "/v1/agent/assignments", agent, params={"after": "0"})
    handed = [
        (h["node"], d)
        for a in batch["items"]
        if a["state"] == "Active"
        for h in a["hints"]
        for d in h["devices"]
    ]
    assert len(handed) == len(set(handed))


@pytest.mark.parametrize(
    ("bounds", "says"),
    [
        ({"minReplicas": 2}, "both minReplicas and maxReplicas"),
        ({"minReplicas": 3, "maxReplicas": 2}, "must not exceed maxReplicas"),
        ({"replicas": 2, "minReplicas": 1, "maxReplicas": 4}, "not both"),
    ],
)
async def test_bad_elastic_bounds_are_a_precise_422(
    hub: Hub, bounds: dict[str, int], says: str
) -> None:
    user = await hub.tenant_with_queue("acme")
    manifest = _job("bad", replicas=1, count=1)
    task = manifest["spec"]["tasks"][0]
    del task["replicas"]
    task.update(bounds)
    status, problem = await hub.call("POST", "/v1/jobs", user, json=manifest)
    assert status == 422, problem
    assert says in str(problem)


@pytest.fixture
async def fleet(db: Database, tmp_path: Path) -> AsyncIterator[JobFleet]:
    async with serving(db, JobFleet(db, ADMIN_TOKEN, pki=write_serving_pki(tmp_path / "pki"))) as f:
        yield f


def _replicas(sim: SimulatedCluster, job_id: str) -> list[int]:
    """The replica indexes of the job's pods in the cluster, deleted ones gone."""
    return sorted(p.replica for p in sim.pods() if p.job == job_id and not p.deleting)


async def test_the_agent_adds_and_removes_replicas_of_a_resized_job(fleet: JobFleet) -> None:
    bj = await fleet.add_cluster("bj", "dc-beijing")  # one node of 8 MLUs
    body = manifest("grow", "cambricon/*", count=2, run_s=100_000)
    task = body["spec"]["tasks"][0]
    del task["replicas"]
    task.update(minReplicas=1, maxReplicas=4)
    task["annotations"][ann.STOP_SECONDS] = "600"  # removed pods linger, terminating
    job = await fleet.call("POST", "/v1/jobs", json=body)

    async def grown() -> bool:
        return _replicas(bj, job["id"]) == [0, 1, 2, 3]

    await wait_for("the job grown to its maximum", grown, 30)
    described = await _describe(fleet, job["id"])
    assert re.search(r"elastic:\n +TASK +REPLICAS +MIN +MAX\n +main +4 +1 +4\n", described)
    pods = [p for p in bj.pod_specs() if p.job == job["id"]]
    assert {p.service for p in pods} == {f"sp-{job['id']}-e1"}
    assert [p.hostname for p in sorted(pods, key=lambda p: p.replica)] == [
        f"grow-main-{r}" for r in range(4)
    ]
    assert sorted(p.env["RANK"] for p in pods) == ["0", "1", "2", "3"]

    urgent = manifest("urgent", "cambricon/*", count=4, run_s=100_000, priorityClass="critical")
    rush = await fleet.call("POST", "/v1/jobs", json=urgent)

    async def shrunk() -> bool:
        return _replicas(bj, job["id"]) == [0, 1] and bool(our_pods(bj, rush["id"]))

    await wait_for("the job shrunk to two replicas for the urgent one", shrunk, 30)
    await asyncio.sleep(1)  # what the agent reports of the removed replicas reaches the hub
    detail = await fleet.job(job["id"])
    assert detail["state"] == "Running"
    assert [(r["task"], r["replica"]) for r in detail["replicas"]] == [("main", 0), ("main", 1)]
    events = await fleet.call("GET", f"/v1/jobs/{job['id']}/events")
    reasons = [e["reason"] for e in events["items"]]
    assert "Resized" in reasons and not {"Failed", "PodsLost", "ReplicaFailed"} & set(reasons)
