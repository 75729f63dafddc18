"""Services at the hub: the service controller with the real scheduling loop over a fleet of
agents (their reports sent through the agent route): shards spread over clusters and grown to
their caps, autoscaling from the reported metric with overflow onto another cluster, scale-in
closing the overflow shard first, an update renewing the shards' placements, a delete
cancelling the shards."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from federation.catalog import load_catalog
from federation.compiler import compile_service
from federation.controllers.scheduler import SchedulerLoop
from federation.hubconfig import HubConfig, ServiceConfig
from federation.spec import ServiceManifest
from federation.store import service_shards
from federation.store.service_shards import Shard, live_shards
from federation.store.tables import events, jobs, queues, services, tenants
from tests.integration.conftest import Hub
from tests.integration.test_hub_flow import FLAVOR, _agent, _node

pytestmark = pytest.mark.integration
CATALOG = load_catalog()


def _manifest(
    name: str, *, spread: int, count: int, image: str = "serve:1", **server: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "suanpan.io/v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "queue": "default",
            "spread": {"clusters": spread},
            "ports": [{"name": "http", "port": 8080}],
            "server": {
                "images": {"huawei": image},
                "resources": {
                    "cpu": "4",
                    "memory": "16Gi",
                    "accelerators": {"count": count, "anyOf": [{"flavor": FLAVOR}]},
                },
                **server,
            },
        },
    }
    return body


SCALING = {
    "metric": {"name": "requests_in_flight", "target": 4.0, "port": 9090},
    "scaleDownStabilizationSeconds": 0,
}


async def _service(hub: Hub, body: dict[str, Any], generation: int = 1) -> uuid.UUID:
    """Store a service as the API does: its row with `desired` and no shards."""
    manifest = ServiceManifest.model_validate(body)
    compiled = compile_service(CATALOG, manifest, generation)
    assert compiled.service is not None
    service_id = uuid.uuid4()
    async with hub.db.transaction() as conn:
        tenant_id, queue_id = (
            await conn.execute(
                sa.select(tenants.c.id, queues.c.id)
                .join(queues, queues.c.tenant_id == tenants.c.id)
                .where(tenants.c.name == "acme", queues.c.name == "default")
            )
        ).one()
        await conn.execute(
            sa.insert(services).values(
                id=service_id,
                tenant_id=tenant_id,
                queue_id=queue_id,
                name=manifest.metadata.name,
                spec=body,
                compiled=compiled.model_dump(mode="json", by_alias=True),
                priority=0,
                priority_class="normal",
                preemptible=False,
                desired=compiled.service.min_replicas,
                generation=generation,
            )
        )
    return service_id


async def _loop(hub: Hub) -> SchedulerLoop:
    config = HubConfig(services=ServiceConfig(interval_s=0.0, stuck_after_s=0.0))
    loop = SchedulerLoop(hub.db, CATALOG, config=config)
    assert await loop.leadership.acquire()
    return loop


async def _shards(hub: Hub, service_id: uuid.UUID) -> list[Shard]:
    async with hub.db.transaction() as conn:
        return (await live_shards(conn, [service_id])).get(service_id, [])


async def _settle(hub: Hub, loop: SchedulerLoop, rounds: int = 6) -> None:
    """Controller and loop, in turns."""
    for _ in range(rounds):
        await loop.run_services()
        await loop.cycle()


async def _report(
    hub: Hub, agents: dict[str, str], shard: Shard, metric: float | None = None
) -> None:
    """The shard's agent says its replicas are ready (Running) and serving `metric` in all."""
    assert shard.cluster is not None
    async with hub.db.transaction() as conn:
        epoch = await conn.scalar(sa.select(jobs.c.epoch).where(jobs.c.id == shard.id))
    serving = {
        "address": f"svc.acme.svc.cluster.local-{shard.n}",
        "clusterIP": "10.0.0.1",
        "ports": [{"name": "http", "port": 8080}],
        "ready": shard.held,
        "updated": shard.held,
        "metricSum": metric,
        "sampled": shard.held if metric is not None else 0,
    }
    update = {"job": str(shard.id), "epoch": epoch, "state": "Running", "serving": serving}
    status, ack = await hub.call(
        "POST", "/v1/agent/status", agents[shard.cluster], json={"updates": [update]}
    )
    assert status == 200, ack


async def _reasons(hub: Hub, service_id: uuid.UUID) -> list[tuple[str, str]]:
    async with hub.db.transaction() as conn:
        rows = await conn.execute(
            sa.select(events.c.reason, events.c.message)
            .where(events.c.service_id == service_id)
            .order_by(events.c.id)
        )
        return [(r.reason, r.message) for r in rows]


async def _fleet(hub: Hub, *names: str) -> dict[str, str]:
    await hub.tenant_with_queue("acme")
    return {name: await _agent(hub, name, [_node(f"{name}-n1")]) for name in names}


async def test_a_fixed_service_spreads_over_two_clusters_and_grows_to_its_caps(hub: Hub) -> None:
    await _fleet(hub, "east", "west")
    service_id = await _service(hub, _manifest("web", spread=2, count=2, replicas=4))
    loop = await _loop(hub)
    await _settle(hub, loop)
    shards = await _shards(hub, service_id)
    assert [(s.name, s.cap, s.held) for s in shards] == [("web-0", 2, 2), ("web-1", 2, 2)]
    assert sorted(s.cluster or "" for s in shards) == ["east", "west"]
    reasons = [r for r, _ in await _reasons(hub, service_id)]
    assert reasons == ["ShardOpened", "ShardOpened"]


async def test_autoscaling_overflows_onto_a_third_cluster_and_scales_in_from_it(
    hub: Hub,
) -> None:
    agents = await _fleet(hub, "east", "west", "north")  # 8 devices each: 2 replicas of 4
    body = _manifest("chat", spread=2, count=4, minReplicas=2, maxReplicas=8)
    body["spec"]["autoscaling"] = SCALING
    service_id = await _service(hub, body)
    loop = await _loop(hub)
    await _settle(hub, loop)
    shards = await _shards(hub, service_id)
    assert [(s.cap, s.held) for s in shards] == [(1, 1), (1, 1)]
    for shard in shards:
        await _report(hub, agents, shard, metric=12.0)  # 12 per replica, target 4: x3
    await _settle(hub, loop)
    async with hub.db.transaction() as conn:
        assert await conn.scalar(sa.select(services.c.desired)) == 6
    shards = await _shards(hub, service_id)
    assert [(s.name, s.cap, s.held) for s in shards] == [
        ("chat-0", 2, 2),
        ("chat-1", 2, 2),
        ("chat-2", 2, 2),
    ]
    assert len({s.cluster for s in shards}) == 3
    said = await _reasons(hub, service_id)
    assert ("Scaled", "2 -> 6: average requests_in_flight 12.0 over target 4.0") in said
    assert [r for r, _ in said].count("ShardOpened") == 3
    (job,) = await _jobs_named(hub, "chat-0")
    assert job["state"] == "Running" and job["replica_cap"] == 2

    for shard in shards:  # 16 over 6 ready replicas: 2.67 each, target 4: 4 replicas
        await _report(hub, agents, shard, metric=16.0 / 3)
    await _settle(hub, loop, rounds=1)  # (the reports then stand for fewer replicas)
    shards = await _shards(hub, service_id)
    assert [(s.name, s.cap, s.held) for s in shards] == [("chat-0", 2, 2), ("chat-1", 2, 2)]
    said = await _reasons(hub, service_id)
    assert any(r == "ShardClosed" and "chat-2" in m for r, m in said)


async def _jobs_named(hub: Hub, name: str) -> list[dict[str, Any]]:
    async with hub.db.transaction() as conn:
        rows = await conn.execute(sa.select(jobs).where(jobs.c.name == name))
        return [dict(r._mapping) for r in rows]


async def test_an_update_renews_the_placements_and_a_delete_cancels_the_shards(
    hub: Hub,
) -> None:
    agents = await _fleet(hub, "east", "west")
    body = _manifest("web", spread=2, count=2, replicas=2)
    service_id = await _service(hub, body)
    loop = await _loop(hub)
    await _settle(hub, loop)
    shards = await _shards(hub, service_id)
    assert len(shards) == 2 and all(s.placed for s in shards)
    _, before = await hub.call(
        "GET", "/v1/agent/assignments", agents["east"], params={"after": "0"}
    )
    (east,) = [a for a in before["items"] if a["state"] == "Active"]
    assert east["service"]["generation"] == 1 and east["service"]["service"] == "web"

    body["spec"]["server"]["images"] = {"huawei": "serve:2"}
    newer = compile_service(CATALOG, ServiceManifest.model_validate(body), 2)
    async with hub.db.transaction() as conn:
        await conn.execute(
            sa.update(services)
            .where(services.c.id == service_id)
            .values(compiled=newer.model_dump(mode="json", by_alias=True), generation=2)
        )
        assert await service_shards.update_shards(conn, service_id) == 2
    _, after = await hub.call(
        "GET", "/v1/agent/assignments", agents["east"], params={"after": str(east["revision"])}
    )
    (renewed,) = after["items"]
    assert (renewed["epoch"], renewed["service"]["generation"]) == (east["epoch"], 2)
    assert renewed["tasks"][0]["task"]["options"][0]["image"] == "serve:2"
    await loop.cycle()  # the changed form reaches the loop: nothing is placed twice
    assert {s.id for s in await _shards(hub, service_id)} == {s.id for s in shards}

    async with hub.db.transaction() as conn:
        await conn.execute(
            sa.update(services)
            .where(services.c.id == service_id)
            .values(state="Deleted", deleted_at=sa.func.now())
        )
    await _settle(hub, loop, rounds=1)
    assert await _shards(hub, service_id) == []
    states = {j["state"] for s in shards for j in await _jobs_named(hub, s.name)}
    assert states == {"Cancelled"}
    _, gone = await hub.call(
        "GET", "/v1/agent/assignments", agents["east"], params={"after": str(renewed["revision"])}
    )
    assert [a["state"] for a in gone["items"]] == ["Released"]


async def test_a_lost_clusters_shard_waits_there_and_the_other_shard_takes_its_replicas(
    hub: Hub,
) -> None:
    agents = await _fleet(hub, "east", "west")  # 8 devices each: 4 replicas of 2
    service_id = await _service(hub, _manifest("web", spread=2, count=2, replicas=4))
    loop = await _loop(hub)
    await _settle(hub, loop)
    shards = await _shards(hub, service_id)
    assert [(s.cap, s.held) for s in shards] == [(2, 2), (2, 2)]
    for shard in shards:
        await _report(hub, agents, shard)
    lost = next(s for s in shards if s.cluster == "west")
    async with hub.db.transaction() as conn:  # west's agent falls silent for 10 minutes
        await conn.exec_driver_sql(
            "UPDATE clusters SET last_heartbeat = now() - interval '10 minutes' WHERE name = 'west'"
        )
    loop.leading_since = datetime.now(UTC) - timedelta(minutes=20)
    assert "west Offline" in await loop.check_health()
    await _settle(hub, loop)
    by_name = {s.name: s for s in await _shards(hub, service_id)}
    # its shard waits for west (confined there: east holds its sibling) with a cap of 1; the
    # east shard holds all 4 replicas meanwhile
    assert (by_name[lost.name].placed, by_name[lost.name].cap) == (False, 1)
    survivor = by_name[next(n for n in by_name if n != lost.name)]
    assert (survivor.cluster, survivor.cap, survivor.held) == ("east", 4, 4)


async def test_replicas_the_clusters_scheduler_cannot_place_move_to_another_cluster(
    hub: Hub,
) -> None:
    agents = await _fleet(hub, "east", "west")  # 8 devices each: the hub sees room for 4 x 2
    service_id = await _service(hub, _manifest("web", spread=1, count=2, replicas=4))
    loop = await _loop(hub)
    await _settle(hub, loop)
    (shard,) = await _shards(hub, service_id)
    assert (shard.cap, shard.held) == (4, 4)
    assert shard.cluster is not None
    async with hub.db.transaction() as conn:
        epoch = await conn.scalar(sa.select(jobs.c.epoch).where(jobs.c.id == shard.id))

    def replica(index: int) -> dict[str, Any]:  # the cluster's scheduler finds no node for #3
        pending = index == 3
        return {
            "task": "server",
            "replica": index,
            "pod": f"web-{index}",
            "phase": "Pending" if pending else "Running",
            "reason": "Unschedulable" if pending else "",
        }

    update = {
        "job": str(shard.id),
        "epoch": epoch,
        "state": "Running",
        "replicas": [replica(i) for i in range(4)],
    }
    status, _ = await hub.call(
        "POST", "/v1/agent/status", agents[shard.cluster], json={"updates": [update]}
    )
    assert status == 200
    await _settle(hub, loop)
    shards = await _shards(hub, service_id)
    # the shard keeps the 3 its cluster placed; the fourth replica opens on the other cluster
    assert [(s.name, s.cap, s.held) for s in shards] == [("web-0", 3, 3), ("web-1", 1, 1)]
    assert shards[1].cluster not in (None, shard.cluster)
