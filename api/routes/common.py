"""Helpers the route modules share: id parsing, the tenant a listing shows, model conversion."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncConnection

from api.auth import tenant_scope
from api.schemas import EventOut, JobOut, ReplicaFailureOut, ReplicaOut, ServiceOut
from federation.errors import NotFound
from federation.store import tenancy
from federation.store.records import Event, Job, Principal, Service
from federation.store.replicas import Replica


def parse_id(what: str, raw: str) -> uuid.UUID:
    """A UUID path parameter in its canonical 8-4-4-4-12 form (not braces, `urn:uuid:` or bare
    hex, which `uuid.UUID` would also read); anything else names nothing, so it is not found."""
    try:
        parsed = uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound(what, raw) from exc
    if str(parsed) != raw.lower():
        raise NotFound(what, raw)
    return parsed


async def listed_tenant(
    conn: AsyncConnection, who: Principal, name: str | None
) -> uuid.UUID | None:
    """The tenant whose objects a listing shows: the one named (another than the caller's is
    not found), else the caller's (None: every tenant)."""
    scope = tenant_scope(who)
    if name is None:
        return scope
    tenant = await tenancy.get_tenant(conn, name)
    if scope is not None and tenant.id != scope:
        raise NotFound("tenant", name)
    return tenant.id


def job_out(job: Job) -> JobOut:
    """The API form of a job."""
    return JobOut(
        id=job.id,
        name=job.name,
        tenant=job.tenant,
        queue=job.queue,
        state=job.state,
        reason=job.reason,
        priority=job.priority,
        priority_class=job.priority_class,
        preemptible=job.preemptible,
        labels=job.labels,
        cluster=job.cluster,
        epoch=job.epoch,
        version=job.version,
        spec=job.spec,
        created_at=job.created_at,
        updated_at=job.updated_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        checkpointed_at=job.checkpointed_at,
    )


def service_out(service: Service) -> ServiceOut:
    """The API form of a service."""
    return ServiceOut(
        id=service.id,
        name=service.name,
        tenant=service.tenant,
        queue=service.queue,
        state=service.state,
        priority=service.priority,
        priority_class=service.priority_class,
        preemptible=service.preemptible,
        labels=service.labels,
        desired=service.desired,
        generation=service.generation,
        version=service.version,
        spec=service.spec,
        created_at=service.created_at,
        updated_at=service.updated_at,
        deleted_at=service.deleted_at,
    )


def replica_out(replica: Replica) -> ReplicaOut:
    """The API form of a replica's status."""
    last = replica.last
    return ReplicaOut(
        task=replica.task,
        replica=replica.replica,
        attempt=replica.attempt,
        pod=replica.pod,
        node=replica.node,
        phase=replica.phase,
        exit_code=replica.exit_code,
        reason=replica.reason,
        restarts=replica.restarts,
        message=replica.message,
        last_failure=ReplicaFailureOut.model_validate(last) if last is not None else None,
        updated_at=replica.updated_at,
    )


def event_out(event: Event) -> EventOut:
    """The API form of an event."""
    return EventOut(
        id=event.id,
        kind=event.kind,
        reason=event.reason,
        message=event.message,
        data=event.data,
        created_at=event.created_at,
    )
