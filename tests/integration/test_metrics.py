"""The hub's /metrics over real PostgreSQL: queue depth and wait by priority, cluster state and
heartbeat age, placements by cluster and vendor, wait at placement, and `suanpan_database_up`
(0, still answering 200, when the database cannot be reached)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from api.auth import CACHE_TTL_S
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from tests.integration.conftest import ADMIN_TOKEN, Hub
from tests.integration.test_hub_flow import _agent, _job, _loop, _node

pytestmark = pytest.mark.integration


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


async def _scrape(hub: Hub) -> dict[Any, float]:
    status, text = await hub.call("GET", "/metrics")
    assert status == 200
    return _samples(text)


async def test_queue_cluster_and_placement_metrics(hub: Hub) -> None:
    user = await hub.tenant_with_queue("acme")
    await _agent(hub, "east", [_node("n1")])
    for name, priority in (("a", "normal"), ("b", "normal"), ("c", "high")):
        await hub.call("POST", "/v1/jobs", user, json=_job(name, 1, 8, priority=priority))
    before = await _scrape(hub)
    assert _value(before, "suanpan_database_up") == 1
    queued = {
        dict(labels)["priority"]: v
        for (name, labels), v in before.items()
        if name == "suanpan_queue_pending_jobs"
    }
    assert sorted(queued.values()) == [1, 2] and len(queued) == 2
    assert _value(before, "suanpan_cluster_state", cluster="east", state="Ready") == 1
    assert _value(before, "suanpan_cluster_state", cluster="east", state="Offline") == 0
    assert 0 <= _value(before, "suanpan_cluster_heartbeat_age_seconds", cluster="east") < 30
    placed = before.get(
        ("suanpan_placements_total", frozenset({("cluster", "east"), ("vendor", "huawei")})), 0
    )

    assert (await (await _loop(hub)).cycle()).written.placed == 1
    after = await _scrape(hub)
    assert _value(after, "suanpan_placements_total", cluster="east", vendor="huawei") == placed + 1
    waits = [v for (n, _), v in after.items() if n == "suanpan_queue_wait_seconds_count"]
    assert sum(waits) >= 1


async def test_a_database_gone_away_is_reported_not_raised() -> None:
    server = EmbeddedPostgres()
    url = await server.start()
    await migrate.upgrade(url)
    db = Database(url)
    await ensure_admin_token(db, ADMIN_TOKEN)
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(db), host="127.0.0.1"))
    await client.start_server()
    try:
        for up in (1, 0):  # the token seen valid before the outage still passes during it
            resp = await client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            assert resp.status == 200
            assert _value(_samples(await resp.text()), "suanpan_database_up") == up
            await server.stop()
            await asyncio.sleep(CACHE_TTL_S + 0.1)  # past the cache: the outage grace answers
    finally:
        await client.close()
        await db.close()
