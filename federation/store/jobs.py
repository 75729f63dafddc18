"""Jobs: submission (idempotent), reads with cursor pagination, and cancellation.

State changes go through `federation.store.lifecycle`; `transition` here returns the job.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob, held_replicas
from federation.errors import Conflict, FieldError, InvalidInput, NotFound
from federation.store.lifecycle import (
    INSERT_QUEUED_JOBS,
    TERMINAL_JOB_STATES,
    may_move,
    move_job,
    release_placements,
)
from federation.store.listener import JOBS
from federation.store.records import Event, Job
from federation.store.tables import clusters, events, jobs, placements, queues, tenants
from federation.validation import INT64_MAX

MAX_PAGE = 500

_JOB_COLUMNS = (
    *jobs.c,
    tenants.c.name.label("tenant"),
    queues.c.name.label("queue"),
    clusters.c.name.label("cluster"),
)
_SKIP = {"idempotency_key", "request_hash", "cluster_id", "compiled"}


def _job_query() -> sa.Select[Any]:
    return (
        sa.select(*(c for c in _JOB_COLUMNS if c.name not in _SKIP))
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .join(queues, queues.c.id == jobs.c.queue_id)
        .outerjoin(clusters, clusters.c.id == jobs.c.cluster_id)
    )


def _job(row: sa.Row[Any]) -> Job:
    return Job(**row._mapping)


@dataclass(frozen=True)
class NewJob:
    """What the API hands the store for one submission."""

    tenant_id: uuid.UUID
    tenant: str
    queue_id: uuid.UUID
    queue: str
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    compiled: dict[str, Any]  # federation.compiled.CompiledJob, JSON form
    priority: int
    priority_class: str
    preemptible: bool
    tasks: list[tuple[str, int]]  # (name, replicas)
    idempotency_key: str | None = None
    request_hash: str | None = None
    service_id: uuid.UUID | None = None  # a service's shard (`store.service_shards`)
    replica_cap: int | None = None  # a shard: the most replicas it may hold


# One statement inserts any number of submissions (a repeated idempotency key is skipped), and
# one more adds their tasks and events and wakes the scheduler: two round trips per batch.
_ADD_TASKS_EVENTS_AND_WAKE = sa.text(
    """
    WITH new_tasks AS (
        INSERT INTO tasks (job_id, name, replicas)
        SELECT t.job_id, t.name, t.replicas
        FROM jsonb_to_recordset(:tasks) AS t(job_id uuid, name text, replicas int)
    ), new_events AS (
        INSERT INTO events (job_id, kind, reason, message, data)
        SELECT e.job_id, 'Job', 'Submitted', e.message, '{}'::jsonb
        FROM jsonb_to_recordset(:events) AS e(job_id uuid, message text)
    )
    SELECT pg_notify(:channel, '')
    """
).bindparams(sa.bindparam("tasks", type_=JSONB), sa.bindparam("events", type_=JSONB))

Submitted = tuple[Job, bool] | Conflict  # the job and whether it is new, or why it is not


async def submit_many(conn: AsyncConnection, news: list[NewJob]) -> list[Submitted]:
    """Insert Queued jobs; a job whose idempotency key was used before returns the first job
    (not new), or a Conflict when that job was submitted with a different body. Results are in
    the order of `news`; each job is all or nothing."""
    ids = [uuid.uuid4() for _ in news]
    rows = [
        {
            "n": n,
            "id": str(job_id),
            "tenant_id": str(new.tenant_id),
            "queue_id": str(new.queue_id),
            "name": new.name,
            "labels": new.labels,
            "spec": new.spec,
            "compiled": new.compiled,
            "priority": new.priority,
            "priority_class": new.priority_class,
            "preemptible": new.preemptible,
            "idempotency_key": new.idempotency_key,
            "request_hash": new.request_hash,
            "service_id": str(new.service_id) if new.service_id is not None else None,
            "replica_cap": new.replica_cap,
        }
        for n, (job_id, new) in enumerate(zip(ids, news, strict=True))
    ]
    inserted = {r.id: r for r in await conn.execute(INSERT_QUEUED_JOBS, {"rows": rows})}
    created = [(job_id, new) for job_id, new in zip(ids, news, strict=True) if job_id in inserted]
    if created:
        await conn.execute(
            _ADD_TASKS_EVENTS_AND_WAKE,
            {
                "tasks": [
                    {"job_id": str(job_id), "name": name, "replicas": replicas}
                    for job_id, new in created
                    for name, replicas in new.tasks
                ],
                "events": [
                    {"job_id": str(job_id), "message": f"queued in {new.priority_class}"}
                    for job_id, new in created
                ],
                "channel": JOBS,
            },
        )
    repeated = [new for job_id, new in zip(ids, news, strict=True) if job_id not in inserted]
    earlier = await _earlier_submissions(conn, repeated)
    out: list[Submitted] = []
    for job_id, new in zip(ids, news, strict=True):
        row = inserted.get(job_id)
        if row is not None:  # lifecycle.SUBMITTER_GIVES: what the caller gave, not read back
            job = Job(
                **row._mapping,
                labels=new.labels,
                spec=new.spec,
                tenant=new.tenant,
                queue=new.queue,
                cluster=None,
            )
            out.append((job, True))
            continue
        first, digest = earlier[(new.tenant_id, new.idempotency_key)]
        if digest != new.request_hash:
            out.append(
                Conflict(
                    "Idempotency-Key was already used with a different request body",
                    job=str(first.id),
                )
            )
        else:
            out.append((first, False))
    return out


async def _earlier_submissions(
    conn: AsyncConnection, news: list[NewJob]
) -> dict[tuple[uuid.UUID, str | None], tuple[Job, str | None]]:
    """The jobs first submitted under the idempotency keys of `news`, with their body hashes."""
    if not news:
        return {}
    keys = sa.tuple_(jobs.c.tenant_id, jobs.c.idempotency_key).in_(
        [(n.tenant_id, n.idempotency_key) for n in news]
    )
    query = _job_query().add_columns(
        jobs.c.idempotency_key.label("ikey"), jobs.c.request_hash.label("rhash")
    )
    found = {}
    for row in await conn.execute(query.where(keys)):
        values = {k: v for k, v in row._mapping.items() if k not in ("ikey", "rhash")}
        job = Job(**values)
        found[(job.tenant_id, row.ikey)] = (job, row.rhash)
    return found


async def submit(conn: AsyncConnection, new: NewJob) -> tuple[Job, bool]:
    """Insert one Queued job (see `submit_many`); a conflicting repeat raises Conflict."""
    (result,) = await submit_many(conn, [new])
    if isinstance(result, Conflict):
        raise result
    return result


async def get(conn: AsyncConnection, job_id: uuid.UUID, tenant_id: uuid.UUID | None = None) -> Job:
    """One job; with `tenant_id`, a job of another tenant is not found."""
    query = _job_query().where(jobs.c.id == job_id)
    if tenant_id is not None:
        query = query.where(jobs.c.tenant_id == tenant_id)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        raise NotFound("job", str(job_id))
    return _job(row)


@dataclass(frozen=True)
class ElasticSize:
    """An elastic task's bounds and the replicas its active placement holds (None: none)."""

    task: str
    replicas: int | None
    min_replicas: int
    max_replicas: int


async def elastic_sizes(conn: AsyncConnection, job_id: uuid.UUID, epoch: int) -> list[ElasticSize]:
    """The elastic tasks of a job, with what its active placement at `epoch` holds."""
    row = (
        await conn.execute(
            sa.select(jobs.c.compiled, placements.c.assignment)
            .outerjoin(
                placements,
                sa.and_(
                    placements.c.job_id == jobs.c.id,
                    placements.c.epoch == epoch,
                    placements.c.state == "Active",
                ),
            )
            .where(jobs.c.id == job_id)
        )
    ).one_or_none()
    if row is None or row.compiled is None:
        return []
    tasks = CompiledJob.model_validate(row.compiled).tasks
    held = held_replicas(row.assignment) if row.assignment is not None else {}
    return [
        ElasticSize(
            t.name,
            held.get(t.name, t.replicas) if row.assignment is not None else None,
            t.floor,
            t.ceiling,
        )
        for t in tasks
        if t.max_replicas is not None
    ]


def encode_cursor(seq: int) -> str:
    """An opaque page cursor."""
    return base64.urlsafe_b64encode(f"s:{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The position a cursor stands for; a malformed cursor is invalid input."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, value = raw.split(":", 1)
        if prefix != "s" or not (value.isascii() and value.isdigit()) or int(value) > INT64_MAX:
            raise ValueError(prefix)
        return int(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            "malformed cursor", [FieldError("query.cursor", "not a cursor this hub issued")]
        ) from exc


@dataclass(frozen=True)
class JobFilter:
    """Filters of a job listing."""

    tenant_id: uuid.UUID | None = None
    queue: str | None = None
    states: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    vendor: str | None = None  # jobs with a device option of this vendor
    cluster: str | None = None  # jobs placed on (or last placed on) this cluster


async def list_jobs(
    conn: AsyncConnection, flt: JobFilter, *, limit: int, cursor: str | None
) -> tuple[list[Job], str | None]:
    """A page of jobs, newest first, and the cursor of the next page (None at the end)."""
    query = _job_query().order_by(jobs.c.seq.desc()).limit(limit + 1)
    if flt.tenant_id is not None:
        query = query.where(jobs.c.tenant_id == flt.tenant_id)
    if flt.queue is not None:
        query = query.where(queues.c.name == flt.queue)
    if flt.states:
        query = query.where(jobs.c.state.in_(flt.states))
    if flt.labels:
        query = query.where(jobs.c.labels.contains(dict(flt.labels)))
    if flt.vendor is not None:
        query = query.where(
            sa.func.jsonb_path_exists(
                jobs.c.compiled,
                sa.literal_column("'$.tasks[*].options[*] ? (@.vendor == $v)'::jsonpath"),
                sa.func.jsonb_build_object("v", flt.vendor),
            )
        )
    if flt.cluster is not None:
        query = query.where(clusters.c.name == flt.cluster)
    if cursor is not None:
        query = query.where(jobs.c.seq < decode_cursor(cursor))
    page = [_job(r) for r in await conn.execute(query)]
    if len(page) > limit:
        return page[:limit], encode_cursor(page[limit - 1].seq)
    return page, None


async def waiting(conn: AsyncConnection, queue_id: uuid.UUID, *, limit: int) -> list[Job]:
    """A queue's queued jobs in the order the scheduler takes them from it: priority (its own,
    before aging), then age, then id."""
    query = (
        _job_query()
        .where(jobs.c.queue_id == queue_id, jobs.c.state == "Queued")
        .order_by(jobs.c.priority.desc(), jobs.c.created_at, jobs.c.id)
        .limit(limit)
    )
    return [_job(r) for r in await conn.execute(query)]


async def transition(
    conn: AsyncConnection,
    job_id: uuid.UUID,
    target: str,
    *,
    reason: str,
    message: str = "",
    data: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    tenant_id: uuid.UUID | None = None,
    values: Mapping[str, Any] | None = None,
) -> Job:
    """Move a job to `target` (see `lifecycle.move_job`) and return it."""
    await move_job(
        conn,
        job_id,
        target,
        reason=reason,
        message=message,
        data=data,
        expected_version=expected_version,
        tenant_id=tenant_id,
        values=values,
    )
    return await get(conn, job_id)


async def cancel(conn: AsyncConnection, job_id: uuid.UUID, tenant_id: uuid.UUID | None) -> Job:
    """Cancel a job and release its placement; cancelling a cancelled job changes nothing."""
    # lock the row before reading its state: concurrent cancels queue here, and all but the
    # first find it Cancelled (else they would all pass the check and race the transition)
    locked = sa.select(jobs.c.state).where(jobs.c.id == job_id).with_for_update()
    if tenant_id is not None:
        locked = locked.where(jobs.c.tenant_id == tenant_id)
    state = await conn.scalar(locked)
    if state is None:
        raise NotFound("job", str(job_id))
    if state == "Cancelled":
        return await get(conn, job_id)
    if not may_move(state, "Cancelled"):
        raise Conflict(f"job already {state}; nothing to cancel", state=state)
    await release_placements(conn, job_id)
    return await transition(conn, job_id, "Cancelled", reason="Cancelled", tenant_id=tenant_id)


async def checkpointed(
    conn: AsyncConnection, job_id: uuid.UUID, tenant_id: uuid.UUID | None
) -> Job:
    """Record that the job saved a checkpoint now (the database's clock); a finished job
    has no run to save."""
    query = sa.select(jobs.c.state).where(jobs.c.id == job_id)
    if tenant_id is not None:
        query = query.where(jobs.c.tenant_id == tenant_id)
    state = await conn.scalar(query)
    if state is None:
        raise NotFound("job", str(job_id))
    if state in TERMINAL_JOB_STATES:
        raise Conflict(f"job already {state}; no run to checkpoint", state=state)
    await conn.execute(
        sa.update(jobs).where(jobs.c.id == job_id).values(checkpointed_at=sa.func.now())
    )
    return await get(conn, job_id)


async def job_events(
    conn: AsyncConnection, job_id: uuid.UUID, *, after: int = 0, limit: int = 100
) -> list[Event]:
    """Events of one job in order, after event id `after`."""
    rows = await conn.execute(
        sa.select(events)
        .where(events.c.job_id == job_id, events.c.id > after)
        .order_by(events.c.id)
        .limit(limit)
    )
    return [Event(**r._mapping) for r in rows]


async def state_counts(conn: AsyncConnection) -> list[tuple[str, str, str, int]]:
    """(tenant, queue, state, count) for every non-empty combination (for metrics)."""
    rows = await conn.execute(
        sa.select(tenants.c.name, queues.c.name, jobs.c.state, sa.func.count())
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .join(queues, queues.c.id == jobs.c.queue_id)
        .group_by(tenants.c.name, queues.c.name, jobs.c.state)
    )
    return [(r[0], r[1], r[2], int(r[3])) for r in rows]


async def queued_counts(conn: AsyncConnection) -> list[tuple[str, str, int, int, float]]:
    """(tenant, queue, priority, queued jobs, seconds the oldest has waited) (for metrics)."""
    age = sa.func.extract("epoch", sa.func.now() - sa.func.min(jobs.c.queued_at))
    rows = await conn.execute(
        sa.select(tenants.c.name, queues.c.name, jobs.c.priority, sa.func.count(), age)
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .join(queues, queues.c.id == jobs.c.queue_id)
        .where(jobs.c.state == "Queued")
        .group_by(tenants.c.name, queues.c.name, jobs.c.priority)
    )
    return [(r[0], r[1], int(r[2]), int(r[3]), max(0.0, float(r[4]))) for r in rows]
