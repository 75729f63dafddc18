"""Tenants, queues and priority classes."""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncConnection

from api.auth import tenant_scope
from api.context import ctx
from api.registry import ADMIN, Call, Reply
from api.routes import API
from api.schemas import (
    QueueIn,
    QueueList,
    QueueOut,
    QueuePatch,
    TenantIn,
    TenantList,
    TenantOut,
    WaitingJob,
    WaitingList,
    WaitingQuery,
)
from federation.controllers.snapshot import queue_models
from federation.errors import NotFound
from federation.scheduling.quota import QuotaLedger
from federation.store import jobs as job_store
from federation.store import tenancy
from federation.store.queue_usage import queue_usages
from federation.store.records import Principal, Queue, Tenant
from federation.tenant_policy import TenantPolicy


def _tenant_out(t: Tenant) -> TenantOut:
    return TenantOut(id=t.id, name=t.name, display_name=t.display_name, created_at=t.created_at)


def _queue_out(q: Queue, usage: dict[str, int], counts: dict[str, int], share: float) -> QueueOut:
    return QueueOut(
        id=q.id,
        tenant=q.tenant,
        name=q.name,
        cohort=q.cohort,
        weight=q.weight,
        quota=q.quota,
        usage=usage,
        jobs=counts,
        fair_share=share,
        version=q.version,
        created_at=q.created_at,
    )


async def _queue_outs(conn: AsyncConnection, visible: list[Queue]) -> list[QueueOut]:
    """Queues with their usage and fair-share standing: the weighted dominant share the
    scheduler orders queues by, over the usage of every queue of their cohorts."""
    everyone = await tenancy.list_queues(conn)
    usage = await queue_usages(conn, [q.id for q in everyone])
    ledger = QuotaLedger(await queue_models(conn))
    for q in everyone:
        ledger.charge(f"{q.tenant}/{q.name}", usage[q.id][0])
    return [
        _queue_out(q, *usage[q.id], ledger.dominant_share(f"{q.tenant}/{q.name}")) for q in visible
    ]


async def _visible_tenant(conn: AsyncConnection, who: Principal, name: str) -> Tenant:
    tenant = await tenancy.get_tenant(conn, name)
    scope = tenant_scope(who)
    if scope is not None and tenant.id != scope:
        raise NotFound("tenant", name)
    return tenant


@API.op("GET", "/v1/tenants", summary="List tenants", tag="tenants", response=TenantList)
async def list_tenants(call: Call) -> Reply:
    """Tenants visible to the caller."""
    async with ctx(call.request).db.connection() as conn:
        found = await tenancy.list_tenants(conn, tenant_scope(call.who))
    return Reply(200, TenantList(items=[_tenant_out(t) for t in found]))


@API.op(
    "POST",
    "/v1/tenants",
    summary="Create a tenant",
    tag="tenants",
    roles=ADMIN,
    body=TenantIn,
    response=TenantOut,
    status=201,
    errors=(409,),
)
async def create_tenant(call: Call) -> Reply:
    """Create a tenant."""
    body = call.body_as(TenantIn)
    async with ctx(call.request).db.transaction() as conn:
        tenant = await tenancy.create_tenant(conn, body.name, body.display_name)
    return Reply(201, _tenant_out(tenant), {"Location": f"/v1/tenants/{tenant.name}"})


@API.op(
    "GET",
    "/v1/tenants/{tenant}",
    summary="Get a tenant",
    tag="tenants",
    response=TenantOut,
    errors=(404,),
)
async def get_tenant(call: Call) -> Reply:
    """One tenant."""
    async with ctx(call.request).db.connection() as conn:
        tenant = await _visible_tenant(conn, call.who, call.path("tenant"))
    return Reply(200, _tenant_out(tenant))


@API.op(
    "GET",
    "/v1/tenants/{tenant}/policy",
    summary="Get a tenant's policy",
    tag="tenants",
    response=TenantPolicy,
    errors=(404,),
)
async def get_tenant_policy(call: Call) -> Reply:
    """What the tenant's pod templates may ask of the nodes."""
    async with ctx(call.request).db.connection() as conn:
        tenant = await _visible_tenant(conn, call.who, call.path("tenant"))
    return Reply(200, TenantPolicy.model_validate(tenant.policy))


@API.op(
    "PUT",
    "/v1/tenants/{tenant}/policy",
    summary="Set a tenant's policy",
    tag="tenants",
    roles=ADMIN,
    body=TenantPolicy,
    response=TenantPolicy,
    errors=(404,),
)
async def set_tenant_policy(call: Call) -> Reply:
    """Allow or forbid host paths, host network and privileged containers for a tenant."""
    policy = call.body_as(TenantPolicy)
    async with ctx(call.request).db.transaction() as conn:
        tenant = await tenancy.set_policy(
            conn, call.path("tenant"), policy.model_dump(mode="json", by_alias=True)
        )
    ctx(call.request).targets.clear()
    return Reply(200, TenantPolicy.model_validate(tenant.policy))


@API.op(
    "DELETE",
    "/v1/tenants/{tenant}",
    summary="Delete a tenant",
    tag="tenants",
    roles=ADMIN,
    status=204,
    errors=(404, 409),
)
async def delete_tenant(call: Call) -> Reply:
    """Delete a tenant that has no queues."""
    async with ctx(call.request).db.transaction() as conn:
        await tenancy.delete_tenant(conn, call.path("tenant"))
    ctx(call.request).targets.clear()
    return Reply(204)


@API.op("GET", "/v1/queues", summary="List all visible queues", tag="queues", response=QueueList)
async def list_all_queues(call: Call) -> Reply:
    """Queues of every tenant the caller sees, with usage."""
    async with ctx(call.request).db.connection() as conn:
        found = await tenancy.list_queues(conn, tenant_scope(call.who))
        items = await _queue_outs(conn, found)
    return Reply(200, QueueList(items=items))


@API.op(
    "GET",
    "/v1/tenants/{tenant}/queues",
    summary="List a tenant's queues",
    tag="queues",
    response=QueueList,
    errors=(404,),
)
async def list_queues(call: Call) -> Reply:
    """Queues of one tenant, with usage."""
    async with ctx(call.request).db.connection() as conn:
        tenant = await _visible_tenant(conn, call.who, call.path("tenant"))
        items = await _queue_outs(conn, await tenancy.list_queues(conn, tenant.id))
    return Reply(200, QueueList(items=items))


def _quota(body: QueueIn | QueuePatch) -> dict[str, dict[str, int | None]]:
    return {
        res: {"nominal": q.nominal, "borrowingLimit": q.borrowing_limit}
        for res, q in (body.quota or {}).items()
    }


@API.op(
    "POST",
    "/v1/tenants/{tenant}/queues",
    summary="Create a queue",
    tag="queues",
    roles=ADMIN,
    body=QueueIn,
    response=QueueOut,
    status=201,
    errors=(404, 409),
)
async def create_queue(call: Call) -> Reply:
    """Create a queue with quota, cohort and weight."""
    body = call.body_as(QueueIn)
    async with ctx(call.request).db.transaction() as conn:
        tenant = await tenancy.get_tenant(conn, call.path("tenant"))
        queue = await tenancy.create_queue(
            conn, tenant, body.name, cohort=body.cohort, weight=body.weight, quota=_quota(body)
        )
        out = (await _queue_outs(conn, [queue]))[0]
    return Reply(201, out, {"Location": f"/v1/tenants/{tenant.name}/queues/{queue.name}"})


@API.op(
    "GET",
    "/v1/tenants/{tenant}/queues/{queue}",
    summary="Get a queue",
    tag="queues",
    response=QueueOut,
    errors=(404,),
)
async def get_queue(call: Call) -> Reply:
    """One queue with its usage against quota."""
    async with ctx(call.request).db.connection() as conn:
        tenant = await _visible_tenant(conn, call.who, call.path("tenant"))
        queue = await tenancy.get_queue(conn, tenant.id, call.path("queue"))
        out = (await _queue_outs(conn, [queue]))[0]
    return Reply(200, out)


@API.op(
    "GET",
    "/v1/tenants/{tenant}/queues/{queue}/waiting",
    summary="List a queue's waiting jobs",
    tag="queues",
    query=WaitingQuery,
    response=WaitingList,
    errors=(404,),
)
async def queue_waiting(call: Call) -> Reply:
    """Queued jobs of one queue with their position: the order the scheduler takes them from
    this queue (priority, then age). Across queues, fair sharing interleaves the heads."""
    limit = call.query_as(WaitingQuery).limit
    async with ctx(call.request).db.connection() as conn:
        tenant = await _visible_tenant(conn, call.who, call.path("tenant"))
        queue = await tenancy.get_queue(conn, tenant.id, call.path("queue"))
        found = await job_store.waiting(conn, queue.id, limit=limit)
    items = [
        WaitingJob(
            position=i,
            id=j.id,
            name=j.name,
            priority=j.priority,
            priority_class=j.priority_class,
            reason=j.reason,
            created_at=j.created_at,
        )
        for i, j in enumerate(found, 1)
    ]
    return Reply(200, WaitingList(items=items))


@API.op(
    "PATCH",
    "/v1/tenants/{tenant}/queues/{queue}",
    summary="Change a queue",
    tag="queues",
    roles=ADMIN,
    body=QueuePatch,
    response=QueueOut,
    errors=(404, 409),
)
async def update_queue(call: Call) -> Reply:
    """Change cohort, weight or quota; `version` guards against lost updates."""
    body = call.body_as(QueuePatch)
    changes: dict[str, object] = {}
    fields = body.model_fields_set
    if "cohort" in fields:
        changes["cohort"] = body.cohort
    if body.weight is not None:
        changes["weight"] = body.weight
    if body.quota is not None:
        changes["quota"] = _quota(body)
    async with ctx(call.request).db.transaction() as conn:
        tenant = await tenancy.get_tenant(conn, call.path("tenant"))
        queue = await tenancy.get_queue(conn, tenant.id, call.path("queue"))
        queue = await tenancy.update_queue(
            conn, queue, expected_version=body.version, changes=changes
        )
        out = (await _queue_outs(conn, [queue]))[0]
    return Reply(200, out)


@API.op(
    "DELETE",
    "/v1/tenants/{tenant}/queues/{queue}",
    summary="Delete a queue",
    tag="queues",
    roles=ADMIN,
    status=204,
    errors=(404, 409),
)
async def delete_queue(call: Call) -> Reply:
    """Delete a queue without unfinished jobs."""
    async with ctx(call.request).db.transaction() as conn:
        tenant = await tenancy.get_tenant(conn, call.path("tenant"))
        queue = await tenancy.get_queue(conn, tenant.id, call.path("queue"))
        await tenancy.delete_queue(conn, queue)
    ctx(call.request).targets.clear()
    return Reply(204)


class PriorityClassOut(BaseModel):
    """A priority class."""

    name: str
    value: int
    preemptible_default: bool = Field(serialization_alias="preemptibleDefault")
    description: str


class PriorityClassList(BaseModel):
    """Priority classes, highest first."""

    items: list[PriorityClassOut]


@API.op(
    "GET",
    "/v1/priority-classes",
    summary="List priority classes",
    tag="queues",
    response=PriorityClassList,
)
async def list_priority_classes(call: Call) -> Reply:
    """Priority classes jobs may name."""
    async with ctx(call.request).db.connection() as conn:
        rows = await tenancy.list_priority_classes(conn)
    return Reply(200, PriorityClassList(items=[PriorityClassOut(**r) for r in rows]))


class FlavorOut(BaseModel):
    """An accelerator model of the catalog: what `anyOf` flavors may name."""

    flavor: str
    vendor: str
    model: str
    memory_mib: int = Field(serialization_alias="memoryMib")
    fp16_tflops: float = Field(serialization_alias="fp16Tflops")
    speed: float
    resource: str
    sharing: bool
    aliases: list[str]


class FlavorList(BaseModel):
    """The catalog's accelerator models."""

    items: list[FlavorOut]


@API.op("GET", "/v1/flavors", summary="List accelerator flavors", tag="queues", response=FlavorList)
async def list_flavors(call: Call) -> Reply:
    """Every accelerator model jobs may ask for, with its normalized speed."""
    catalog = ctx(call.request).catalog
    items = [
        FlavorOut(
            flavor=m.key,
            vendor=m.vendor.value,
            model=m.model,
            memory_mib=m.memory_mib,
            fp16_tflops=m.fp16_tflops,
            speed=m.speed,
            resource=m.resource,
            sharing=m.sharing.enabled,
            aliases=list(m.aliases),
        )
        for m in sorted(catalog.models.values(), key=lambda m: m.key)
    ]
    return Reply(200, FlavorList(items=items))
