"""Elastic jobs at the hub: placed at min, grown into idle devices, shrunk for an urgent job
instead of evicting, each resize written to the placement (a new revision the agent reads)
with a `Resized` event; bad bounds answer 422."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Hub
from tests.integration.test_hub_flow import _agent, _job, _loop, _node, _status

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
    loop = await _loop(hub)
    assert (await loop.cycle()).written.placed == 1
    placed = await _assigned(hub, agent, 0)
    assert placed["tasks"][0]["task"]["replicas"] == 2 and len(placed["hints"]) == 2
    await _status(hub, agent, job, "Applied")
    await _status(hub, agent, job, "Running")
    await _inventory(hub, agent, 2, used=2)

    assert (await loop.cycle()).written.resized == 1
    grown = await _assigned(hub, agent, placed["revision"])
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

    _, events = await hub.call("GET", f"/v1/jobs/{job['id']}/events", user)
    resized = [e for e in events["items"] if e["reason"] == "Resized"]
    assert [e["data"]["replicas"] for e in resized] == [{"trainer": 6}, {"trainer": 4}]
    assert "idle" in resized[0]["message"] or "capacity" in resized[0]["message"]
    assert rush["id"] in resized[1]["message"]


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
