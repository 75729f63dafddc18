"""The agent protocol over HTTP: register, inventory, assignments (long-poll), status."""

from __future__ import annotations

import time

from pydantic import Field

from api.context import ctx
from api.registry import Call, Reply
from api.routes import API
from api.schemas import QueryFloat, QueryInt, _In
from federation.store import agents
from federation.store import telemetry as telemetry_store
from federation.store.database import retrying_collisions
from federation.store.listener import PLACEMENTS
from federation.store.records import Role
from federation.validation import INT64_MAX
from federation.wire.agent import (
    AssignmentBatch,
    InventoryAck,
    InventoryReport,
    LeaseRenewal,
    LeaseReply,
    Registration,
    RegistrationReply,
    StatusAck,
    StatusReport,
)
from federation.wire.telemetry import TelemetryAck, TelemetryReport

AGENT: frozenset[Role] = frozenset({"agent"})


class AssignmentQuery(_In):
    """Resume point and how long to hold the request when nothing changed."""

    after: QueryInt = Field(default=0, ge=0, le=INT64_MAX)
    wait: QueryFloat = Field(default=0, ge=0, le=60)


@API.op(
    "POST",
    "/v1/agent/register",
    summary="Register an agent",
    tag="agent",
    roles=AGENT,
    body=Registration,
    response=RegistrationReply,
    errors=(404,),
)
async def agent_register(call: Call) -> Reply:
    """(Re)register the token's cluster and learn the inventory generation the hub holds."""
    assert call.who.cluster_id is not None
    hub = ctx(call.request)
    async with hub.db.transaction() as conn:
        name, generation = await agents.register(
            conn, call.who.cluster_id, call.body_as(Registration)
        )
    return Reply(
        200,
        RegistrationReply(
            cluster=name,
            inventory_generation=generation,
            heartbeat_interval_s=hub.config.health.renew_s,
            lease_s=hub.config.health.offline_after_s,
            gang_timeout_s=hub.config.gang_timeout_s,
        ),
    )


@API.op(
    "POST",
    "/v1/agent/lease",
    summary="Renew the cluster's lease",
    tag="agent",
    roles=AGENT,
    body=LeaseRenewal,
    response=LeaseReply,
    errors=(404,),
)
async def agent_lease(call: Call) -> Reply:
    """Renew the lease of the token's (registered) cluster, saying whether the agent reaches
    its kube-apiserver: one that does not gets no new work, and is lost after the lease."""
    cluster_id = call.who.cluster_id
    assert cluster_id is not None
    hub = ctx(call.request)

    async def renew() -> None:
        async with hub.db.connection() as conn:  # one statement: its own transaction
            await agents.heartbeat(conn, cluster_id, call.body_as(LeaseRenewal))

    # a renewal that collided with another transaction is made again here: refused, the agent
    # would send it again a second later, and its cluster may turn NotReady meanwhile
    await retrying_collisions(renew)
    health = hub.config.health
    return Reply(200, LeaseReply(lease_s=health.offline_after_s, renew_s=health.renew_s))


@API.op(
    "POST",
    "/v1/agent/inventory",
    summary="Report inventory",
    tag="agent",
    roles=AGENT,
    body=InventoryReport,
    response=InventoryAck,
    max_body=64 << 20,  # a full snapshot of 10,000 nodes
    errors=(404,),
)
async def agent_inventory(call: Call) -> Reply:
    """Store a full inventory snapshot or the next delta."""
    assert call.who.cluster_id is not None
    async with ctx(call.request).db.transaction() as conn:
        ack = await agents.apply_inventory(conn, call.who.cluster_id, call.body_as(InventoryReport))
    return Reply(200, ack)


@API.op(
    "POST",
    "/v1/agent/telemetry",
    summary="Report device telemetry",
    tag="agent",
    roles=AGENT,
    body=TelemetryReport,
    response=TelemetryAck,
    max_body=16 << 20,
    errors=(404,),
)
async def agent_telemetry(call: Call) -> Reply:
    """Store the latest exporter readings of the cluster's devices; a newly fatal one is an
    event on the cluster and on the jobs holding the device."""
    assert call.who.cluster_id is not None
    async with ctx(call.request).db.transaction() as conn:
        ack = await telemetry_store.apply_telemetry(
            conn, call.who.cluster_id, call.body_as(TelemetryReport)
        )
    return Reply(200, ack)


@API.op(
    "GET",
    "/v1/agent/assignments",
    summary="Wait for assignments",
    tag="agent",
    roles=AGENT,
    query=AssignmentQuery,
    response=AssignmentBatch,
    errors=(404,),
)
async def agent_assignments(call: Call) -> Reply:
    """Placements changed after `after`; holds the request up to `wait` s while none did.

    Only the request's arrival counts as a heartbeat: a poll whose agent died meanwhile (the
    handler runs on after its client is gone) must not keep the cluster's lease alive."""
    assert call.who.cluster_id is not None
    cluster_id = call.who.cluster_id
    q = call.query_as(AssignmentQuery)
    hub = ctx(call.request)
    deadline = time.monotonic() + q.wait
    async with hub.db.connection() as conn:
        await agents.heartbeat(conn, cluster_id)
    while True:
        async with hub.db.transaction() as conn:
            items = await agents.assignments(
                conn, cluster_id, q.after, default_failover=hub.config.health.default_failover
            )
        left = deadline - time.monotonic()
        if items or left <= 0 or hub.listener is None:
            break
        await hub.listener.wait(PLACEMENTS, str(cluster_id), seconds=min(left, 5.0))
    revision = max((a.revision for a in items), default=q.after)
    return Reply(200, AssignmentBatch(revision=revision, items=items))


@API.op(
    "POST",
    "/v1/agent/status",
    summary="Report status",
    tag="agent",
    roles=AGENT,
    body=StatusReport,
    response=StatusAck,
    max_body=64 << 20,  # every replica of every placement: a 16,384-replica job is some 5 MiB
    errors=(404,),
)
async def agent_status(call: Call) -> Reply:
    """Apply status updates in order; replays and stale epochs change nothing."""
    assert call.who.cluster_id is not None
    counts = {"applied": 0, "duplicate": 0, "stale": 0}
    hub = ctx(call.request)
    async with hub.db.connection() as conn:
        await agents.heartbeat(conn, call.who.cluster_id)
    async with hub.db.transaction() as conn:
        updates = call.body_as(StatusReport).updates
        for outcome in await agents.apply_statuses(
            conn, call.who.cluster_id, updates, hub.config.retry
        ):
            counts[outcome.kind] += 1
    return Reply(200, StatusAck(**counts))
