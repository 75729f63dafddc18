"""The fail-fast check re-reads the fleet when its shape changes, and only then.

`fleet_shape` changes with a node's capacity and devices, not with what runs on them; the
check (here revalidated at every submission) refuses a job no node could hold and accepts it
once a node that can has registered.
"""

from __future__ import annotations

import pytest

from api.context import CONTEXT
from federation.controllers.snapshot import fleet_shape
from tests.integration.conftest import Hub
from tests.integration.test_hub_flow import _agent, _job, _node

pytestmark = pytest.mark.integration


async def test_the_fleet_shape_follows_capacity_not_usage(hub: Hub) -> None:
    token = await _agent(hub, "east", [_node("n1")])

    async def shape() -> int:
        async with hub.db.connection() as conn:
            return await fleet_shape(conn)

    async def report(generation: int, node: dict[str, object]) -> None:
        status, _ = await hub.call(
            "POST",
            "/v1/agent/inventory",
            token,
            json={"generation": generation, "full": False, "nodes": [node]},
        )
        assert status == 200

    empty = await shape()
    await report(2, {**_node("n1", used=4), "usedCpuMilli": 64_000})
    assert await shape() == empty
    await report(3, _node("n1", devices=16))
    grown = await shape()
    assert grown != empty
    await report(4, {**_node("n1", devices=16), "taints": [{"key": "gpu", "effect": "NoSchedule"}]})
    assert await shape() != grown


async def test_a_refused_job_is_accepted_once_a_node_can_hold_it(hub: Hub) -> None:
    hub.client.app[CONTEXT].fleet_check.ttl_s = 0.0  # revalidate at every submission
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1")])
    status, problem = await hub.call("POST", "/v1/jobs", user, json=_job("wide", 1, count=16))
    assert status == 422 and "16" in problem["clusters"]["east"]
    await _agent(hub, "west", [_node("big", devices=16)])
    status, job = await hub.call("POST", "/v1/jobs", user, json=_job("wide", 1, count=16))
    assert status == 201 and job["state"] == "Queued"
