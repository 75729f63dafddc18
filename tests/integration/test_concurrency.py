"""Every documented-idempotent operation holds under 10 concurrent identical calls: each call
gets the answer one call would get, and the change (and its event) happens once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa

from federation.store.tables import events, jobs, nodes
from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration

N = 10


async def _many(
    hub: Hub, method: str, path: str, token: str | None = None, **kw: Any
) -> Counter[int]:
    args = (token,) if token is not None else ()
    replies = await asyncio.gather(*(hub.call(method, path, *args, **kw) for _ in range(N)))
    return Counter(status for status, _ in replies)


async def _events(hub: Hub, reason: str) -> int:
    async with hub.db.connection() as conn:
        query = sa.select(sa.func.count()).select_from(events).where(events.c.reason == reason)
        return int(await conn.scalar(query) or 0)


async def _agent(hub: Hub, cluster: str = "c1") -> str:
    _, issued = await hub.call(
        "POST", "/v1/tokens", json={"name": f"{cluster}-agent", "role": "agent", "cluster": cluster}
    )
    return str(issued["token"])


async def test_concurrent_cancels_all_succeed_and_write_one_event(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    _, job = await hub.call("POST", "/v1/jobs", token, json=job_manifest())
    assert await _many(hub, "POST", f"/v1/jobs/{job['id']}/cancel", token) == {200: N}
    assert await _events(hub, "Cancelled") == 1
    _, got = await hub.call("GET", f"/v1/jobs/{job['id']}")
    assert got["state"] == "Cancelled" and got["version"] == job["version"] + 1


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        (["cordon"], "Cordoned"),
        (["drain"], "Draining"),
        (["cordon", "uncordon"], "Uncordoned"),
    ],
)
async def test_concurrent_cluster_flags_change_once(
    hub: Hub, steps: list[str], reason: str
) -> None:
    await _agent(hub)
    for step in steps[:-1]:
        assert (await hub.call("POST", f"/v1/clusters/c1/{step}"))[0] == 200
    assert await _many(hub, "POST", f"/v1/clusters/c1/{steps[-1]}") == {200: N}
    assert await _events(hub, reason) == 1


async def test_repeating_a_cluster_flag_changes_nothing(hub: Hub) -> None:
    await _agent(hub)
    for _ in range(3):
        status, cluster = await hub.call("POST", "/v1/clusters/c1/cordon")
        assert status == 200 and cluster["cordoned"]
    assert await _events(hub, "Cordoned") == 1
    assert (await hub.call("POST", "/v1/clusters/nope/cordon"))[0] == 404


async def test_concurrent_revokes_all_succeed(hub: Hub) -> None:
    _, issued = await hub.call("POST", "/v1/tokens", json={"name": "t", "role": "viewer"})
    assert await _many(hub, "DELETE", f"/v1/tokens/{issued['id']}") == {204: N}
    assert (await hub.call("GET", "/v1/clusters", issued["token"]))[0] == 401


async def test_concurrent_identical_queue_updates_change_it_once(hub: Hub) -> None:
    await hub.tenant_with_queue("acme")
    body = {"weight": 2.5, "quota": {"cpu": {"nominal": 8}}}
    assert await _many(hub, "PATCH", "/v1/tenants/acme/queues/default", json=body) == {200: N}
    _, queue = await hub.call("GET", "/v1/tenants/acme/queues/default")
    assert queue["weight"] == 2.5 and queue["version"] == 2


async def test_concurrent_versioned_queue_updates_let_exactly_one_win(hub: Hub) -> None:
    await hub.tenant_with_queue("acme")
    body = {"weight": 3, "version": 1}
    assert await _many(hub, "PATCH", "/v1/tenants/acme/queues/default", json=body) == {
        200: 1,
        409: N - 1,
    }


async def test_concurrent_submissions_with_one_key_make_one_job(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    statuses = await _many(
        hub, "POST", "/v1/jobs", token, json=job_manifest(), headers={"Idempotency-Key": "k-1"}
    )
    assert statuses == {201: 1, 200: N - 1}
    async with hub.db.connection() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(jobs)) == 1
    assert await _events(hub, "Submitted") == 1


async def test_concurrent_agent_messages_are_applied_once(hub: Hub) -> None:
    token = await _agent(hub)
    assert await _many(hub, "POST", "/v1/agent/register", token, json={"cluster": "c1"}) == {200: N}
    assert await _events(hub, "Registered") == 1
    node = {"name": "n1", "cpuMilli": 8000, "memoryMib": 65536}
    report = {"generation": 1, "full": True, "nodes": [node]}
    assert await _many(hub, "POST", "/v1/agent/inventory", token, json=report) == {200: N}
    async with hub.db.connection() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(nodes)) == 1
