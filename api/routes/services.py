"""Services: create, list, read (with shards and autoscaling), update, delete, endpoints.

`{service}` is a service's id or, for its live incarnation, its name.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncConnection

from api.auth import tenant_scope
from api.context import ctx
from api.registry import WRITERS, Call, Reply
from api.routes import API
from api.routes.common import event_out, listed_tenant, service_out
from api.routes.submission import (
    check_admissible,
    compile_failed,
    digest,
    idempotency_key,
    preemptible,
    target,
)
from api.schemas import (
    AutoscalingStatus,
    EndpointList,
    EndpointOut,
    EndpointPortOut,
    ServiceDetail,
    ServiceList,
    ServiceOut,
    ServiceQuery,
    ShardOut,
)
from federation.compiled import CompiledJob
from federation.compiler import CompileError, compile_service
from federation.errors import FieldError, InvalidInput
from federation.spec import ServiceManifest
from federation.store import service_shards
from federation.store import services as service_store
from federation.store.records import Service
from federation.wire.http import IDEMPOTENCY_HEADER

RECENT_EVENTS = 20
JOB_TASK = "spec.tasks[0]"  # where the job form's checks name the server task


async def _prepare(
    call: Call, manifest: ServiceManifest, key: str | None
) -> service_store.NewService:
    """What the store needs of a valid service manifest: compiled, its tenant, queue and
    priority class resolved as for a job, refused where a job would be."""
    spec = manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        compiled = compile_service(ctx(call.request).catalog, manifest)
    except CompileError as exc:
        raise compile_failed(exc) from exc
    found = await target(call, manifest)
    assert found.queue_id is not None and found.priority is not None
    try:
        await check_admissible(call, manifest, compiled, found)
    except InvalidInput as exc:
        errors = [replace(e, path=e.path.replace(JOB_TASK, "spec.server", 1)) for e in exc.errors]
        raise InvalidInput(exc.detail.replace(JOB_TASK, "spec.server", 1), errors) from exc
    return service_store.NewService(
        tenant_id=found.tenant_id,
        queue_id=found.queue_id,
        name=manifest.metadata.name,
        labels=manifest.metadata.labels,
        spec=spec,
        compiled=compiled,
        priority=found.priority,
        priority_class=manifest.spec.priority_class,
        preemptible=preemptible(manifest, found),
        idempotency_key=key,
        request_hash=digest(spec) if key is not None else None,
    )


@API.op(
    "POST",
    "/v1/services",
    summary="Create a service",
    tag="services",
    roles=WRITERS,
    body=ServiceManifest,
    response=ServiceOut,
    status=201,
    errors=(404, 409, 413),
    headers=(IDEMPOTENCY_HEADER,),
)
async def create_service(call: Call) -> Reply:
    """Create a long-running service; the hub runs it as shard jobs, one per cluster it
    spreads over. With `Idempotency-Key`, a retry returns the first service (200)."""
    new = await _prepare(call, call.body_as(ServiceManifest), idempotency_key(call))
    async with ctx(call.request).db.transaction() as conn:
        service, created = await service_store.create(conn, new)
    location = {"Location": f"/v1/services/{service.id}"}
    return Reply(201 if created else 200, service_out(service), location)


@API.op(
    "GET",
    "/v1/services",
    summary="List services",
    tag="services",
    query=ServiceQuery,
    response=ServiceList,
    errors=(404,),
)
async def list_services(call: Call) -> Reply:
    """Services newest first (live ones, or deleted ones), with cursor pagination."""
    q = call.query_as(ServiceQuery)
    async with ctx(call.request).db.connection() as conn:
        tenant_id = await listed_tenant(conn, call.who, q.tenant)
        page, cursor = await service_store.list_services(
            conn, tenant_id, deleted=q.state == "Deleted", limit=q.limit, cursor=q.cursor
        )
    return Reply(200, ServiceList(items=[service_out(s) for s in page], next_cursor=cursor))


def _autoscaling(service: Service, shards: list[service_shards.Shard]) -> AutoscalingStatus | None:
    """The scaling metric's latest average over the replicas read, beside its target."""
    compiled = CompiledJob.model_validate(service.compiled).service
    if compiled is None or compiled.autoscaling is None:
        return None
    read = [
        e
        for e in (s.endpoint for s in shards)
        if e is not None and e.sampled and e.metric_sum is not None
    ]
    sampled = sum(e.sampled for e in read)
    return AutoscalingStatus(
        metric=compiled.autoscaling.metric,
        target=compiled.autoscaling.target,
        average=sum(e.metric_sum or 0.0 for e in read) / sampled if sampled else None,
        sampled=sampled,
        min_replicas=compiled.min_replicas,
        max_replicas=compiled.max_replicas,
    )


@API.op(
    "GET",
    "/v1/services/{service}",
    summary="Get a service",
    tag="services",
    response=ServiceDetail,
    errors=(404, 409),
)
async def get_service(call: Call) -> Reply:
    """One service (by id or name) with its live shards, the replicas ready, the autoscaling
    metric against its target, and its latest events."""
    async with ctx(call.request).db.connection() as conn:
        service = await service_store.get(conn, call.path("service"), tenant_scope(call.who))
        shards = await _shards(conn, service.id)
        found = await service_store.service_events(conn, service.id, last=RECENT_EVENTS)
    return Reply(
        200,
        ServiceDetail(
            **service_out(service).model_dump(by_alias=False),
            ready=sum(s.endpoint.ready for s in shards if s.endpoint),
            autoscaling=_autoscaling(service, shards),
            shards=[
                ShardOut(
                    job=s.id,
                    name=s.name,
                    cluster=s.cluster,
                    state=s.state,
                    held=s.held,
                    cap=s.cap,
                    ready=s.endpoint.ready if s.endpoint else 0,
                    updated=s.endpoint.updated if s.endpoint else 0,
                    generation=s.generation,
                )
                for s in shards
            ],
            events=[event_out(e) for e in found],
        ),
    )


@API.op(
    "PUT",
    "/v1/services/{service}",
    summary="Update a service",
    tag="services",
    roles=WRITERS,
    body=ServiceManifest,
    response=ServiceOut,
    errors=(404, 409, 413),
)
async def update_service(call: Call) -> Reply:
    """Replace a service's manifest (same name, tenant, queue and priority class): a change of
    the server's pods (image, template, resources, accelerators) starts a new generation that
    every shard rolls over to, one replica at a time; replica bounds, ports, spread and
    autoscaling take effect without a roll."""
    manifest = call.body_as(ServiceManifest)
    new = await _prepare(call, manifest, None)
    context = ctx(call.request)
    async with context.db.transaction() as conn:
        current = await service_store.get(conn, call.path("service"), tenant_scope(call.who))
        if manifest.metadata.name != current.name:
            raise InvalidInput(
                f"metadata.name {manifest.metadata.name!r} is not the service's name",
                [FieldError("metadata.name", "must be the service's name", repr(current.name))],
            )
        service = await service_store.update(conn, current.id, new)
        if service.version != current.version:
            await service_shards.update_shards(conn, service.id)
    return Reply(200, service_out(service))


@API.op(
    "DELETE",
    "/v1/services/{service}",
    summary="Delete a service",
    tag="services",
    roles=WRITERS,
    response=ServiceOut,
    status=202,
    errors=(404, 409),
)
async def delete_service(call: Call) -> Reply:
    """Delete a service (idempotent by id); its shards are cancelled and their pods removed
    by their clusters' agents shortly after."""
    async with ctx(call.request).db.transaction() as conn:
        current = await service_store.get(conn, call.path("service"), tenant_scope(call.who))
        service = await service_store.delete(conn, current.id)
    return Reply(202, service_out(service))


@API.op(
    "GET",
    "/v1/services/{service}/endpoints",
    summary="List a service's endpoints",
    tag="services",
    response=EndpointList,
    errors=(404, 409),
)
async def service_endpoints(call: Call) -> Reply:
    """Where the service serves: per live shard its cluster reported, the cluster's Service
    (address, cluster IP, ports) and the replicas ready behind it."""
    async with ctx(call.request).db.connection() as conn:
        service = await service_store.get(conn, call.path("service"), tenant_scope(call.who))
        shards = await _shards(conn, service.id)
    return Reply(
        200,
        EndpointList(
            items=[
                EndpointOut(
                    shard=s.name,
                    job=s.id,
                    cluster=s.cluster,
                    region=s.region or "",
                    address=e.address,
                    cluster_ip=e.cluster_ip,
                    ports=[EndpointPortOut.model_validate(p) for p in e.ports],
                    ready=e.ready,
                    updated=e.updated,
                    generation=e.generation,
                    reported_at=e.reported_at,
                )
                for s in shards
                if (e := s.endpoint) is not None and s.cluster is not None
            ]
        ),
    )


async def _shards(conn: AsyncConnection, service_id: uuid.UUID) -> list[service_shards.Shard]:
    """The service's live shards with their endpoints, as the service controller reads them."""
    return (await service_shards.live_shards(conn, [service_id])).get(service_id, [])
