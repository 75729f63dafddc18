"""Helpers the route modules share: id parsing and model conversion."""

from __future__ import annotations

import uuid

from api.schemas import EventOut, JobOut, ReplicaFailureOut, ReplicaOut
from federation.errors import NotFound
from federation.store.records import Event, Job
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
