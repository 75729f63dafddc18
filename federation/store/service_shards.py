"""A service's shards: the jobs that run it, one per cluster it occupies (`jobs.service_id`).

The service controller (`federation.controllers.services`) opens a shard as a submission
does (a Queued job of the service's queue, priority and preemptibility, named
`<service>-<n>`, with the shard's compiled form and its `replica_cap`), sets the caps, and
closes a shard by cancelling it through the lifecycle. An update of a service replaces the
compiled form of its live shards and renews their placements, so their agents roll the pods
over to the new template.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob, held_replicas
from federation.compiler import shard_form
from federation.store import jobs as job_store
from federation.store.lifecycle import TERMINAL_JOB_STATES, renew_placements
from federation.store.records import Job
from federation.store.tables import (
    clusters,
    jobs,
    placements,
    queues,
    replica_status,
    service_endpoints,
    services,
    tasks,
    tenants,
)
from federation.wire.agent import UNSCHEDULABLE

LIVE = sa.not_(jobs.c.state.in_(TERMINAL_JOB_STATES))


@dataclass(frozen=True)
class Service:
    """A service as the controller runs it."""

    id: uuid.UUID
    name: str
    tenant_id: uuid.UUID
    tenant: str
    queue_id: uuid.UUID
    queue: str
    labels: dict[str, str]
    spec: dict[str, Any]
    compiled: CompiledJob  # with `service` set
    priority: int
    priority_class: str
    preemptible: bool
    state: str  # Active | Deleted
    desired: int
    generation: int


async def services_to_run(conn: AsyncConnection) -> list[Service]:
    """Every Active service, and every Deleted one that still has a live shard, their rows
    locked (FOR NO KEY UPDATE) until the caller's transaction ends: an update of a service
    waits, so its shards' new forms include any shard opened meanwhile."""
    has_live = sa.exists().where(jobs.c.service_id == services.c.id, LIVE)
    rows = await conn.execute(
        sa.select(
            services.c.id,
            services.c.name,
            services.c.tenant_id,
            tenants.c.name.label("tenant"),
            services.c.queue_id,
            queues.c.name.label("queue"),
            services.c.labels,
            services.c.spec,
            services.c.compiled,
            services.c.priority,
            services.c.priority_class,
            services.c.preemptible,
            services.c.state,
            services.c.desired,
            services.c.generation,
        )
        .join(tenants, tenants.c.id == services.c.tenant_id)
        .join(queues, queues.c.id == services.c.queue_id)
        .where(sa.or_(services.c.state == "Active", has_live))
        .order_by(services.c.seq)
        .with_for_update(of=services, key_share=True)
    )
    return [
        Service(**{**r._mapping, "compiled": CompiledJob.model_validate(r.compiled)}) for r in rows
    ]


@dataclass(frozen=True)
class Endpoint:
    """A shard's serving report (`wire.agent.ServingStatus`) for its current placement."""

    address: str
    cluster_ip: str
    ports: list[dict[str, Any]]
    ready: int
    updated: int
    generation: int
    metric_sum: float | None
    sampled: int
    reported_at: datetime


@dataclass(frozen=True)
class Shard:
    """A live shard: its job, where it runs and what it holds against its cap."""

    id: uuid.UUID
    service_id: uuid.UUID
    name: str
    n: int  # its number within the service (`<service>-<n>`)
    state: str
    cluster: str | None  # placed: its cluster
    region: str | None
    held: int  # replicas its active placement holds (0: not placed)
    cap: int | None
    # of those, replicas its cluster's scheduler finds no node for (Pending, Unschedulable)
    unschedulable: int
    generation: int  # of the template its compiled form carries
    pending_reasons: dict[str, Any]
    updated_at: datetime
    endpoint: Endpoint | None  # what its cluster last reported it serving

    @property
    def placed(self) -> bool:
        """Whether a cluster holds it (its placement is active)."""
        return self.cluster is not None

    @property
    def schedulable(self) -> int:
        """The replicas it holds that its cluster found a node for: the hub's estimate said
        the others fit, the cluster's scheduler does not (its cluster is full in truth)."""
        return self.held - self.unschedulable


def shard_name(service: str, n: int) -> str:
    """The job name of a service's shard `n`."""
    return f"{service}-{n}"


async def live_shards(
    conn: AsyncConnection, service_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[Shard]]:
    """The live (not finished) shards of the services, oldest first, with what their active
    placements hold and their endpoints of the current epoch."""
    if not service_ids:
        return {}
    e = service_endpoints.c
    p = placements.c
    rs = replica_status.c
    unschedulable = (
        sa.select(sa.func.count())
        .where(
            rs.job_id == jobs.c.id,
            rs.epoch == jobs.c.epoch,
            rs.phase == "Pending",
            rs.reason == UNSCHEDULABLE,
        )
        .scalar_subquery()
    )
    rows = await conn.execute(
        sa.select(
            jobs.c.id,
            jobs.c.service_id,
            jobs.c.name,
            jobs.c.state,
            jobs.c.replica_cap,
            jobs.c.pending_reasons,
            jobs.c.updated_at,
            clusters.c.name.label("cluster"),
            clusters.c.region,
            tasks.c.name.label("task"),
            tasks.c.replicas,
            p.assignment,
            e.address,
            e.cluster_ip,
            e.ports,
            e.ready,
            e.updated,
            e.generation,
            e.metric_sum,
            e.sampled,
            e.reported_at,
            unschedulable.label("unschedulable"),
            jobs.c.compiled[("service", "generation")].astext.label("template_generation"),
        )
        .join(tasks, tasks.c.job_id == jobs.c.id)
        .outerjoin(
            placements,
            sa.and_(p.job_id == jobs.c.id, p.epoch == jobs.c.epoch, p.state == "Active"),
        )
        .outerjoin(clusters, clusters.c.id == p.cluster_id)
        .outerjoin(
            service_endpoints,
            sa.and_(e.job_id == jobs.c.id, e.epoch == jobs.c.epoch, e.cluster_id == p.cluster_id),
        )
        .where(jobs.c.service_id.in_(service_ids), LIVE)
        .order_by(jobs.c.seq)
    )
    out: dict[uuid.UUID, list[Shard]] = defaultdict(list)
    for r in rows:
        placed = r.assignment is not None
        out[r.service_id].append(
            Shard(
                id=r.id,
                service_id=r.service_id,
                name=r.name,
                n=int(r.name.rsplit("-", 1)[1]),
                state=r.state,
                cluster=r.cluster,
                region=r.region,
                held=held_replicas(r.assignment).get(r.task, r.replicas) if placed else 0,
                cap=r.replica_cap,
                unschedulable=r.unschedulable if placed else 0,
                generation=int(r.template_generation or 1),
                pending_reasons=r.pending_reasons,
                updated_at=r.updated_at,
                endpoint=(
                    Endpoint(
                        r.address,
                        r.cluster_ip,
                        r.ports,
                        r.ready,
                        r.updated,
                        r.generation,
                        r.metric_sum,
                        r.sampled,
                        r.reported_at,
                    )
                    if r.address is not None
                    else None
                ),
            )
        )
    for shards in out.values():
        shards.sort(key=lambda s: s.n)
    return out


async def next_shard_number(conn: AsyncConnection, service: Service) -> int:
    """The number the service's next shard gets: one past every shard it ever had (numbers
    are never reused, so a closed shard's events never mix with a new one's)."""
    names = await conn.scalars(sa.select(jobs.c.name).where(jobs.c.service_id == service.id))
    return max((int(n.rsplit("-", 1)[1]) + 1 for n in names), default=0)


async def open_shard(
    conn: AsyncConnection, service: Service, n: int, clusters_allowed: tuple[str, ...], cap: int
) -> Job:
    """Submit the service's shard `n`, confined to `clusters_allowed`, allowed `cap` replicas
    (a Queued job, as a submission makes one: the scheduling loop places and grows it)."""
    compiled = shard_form(service.compiled, clusters_allowed)
    job, _ = await job_store.submit(
        conn,
        job_store.NewJob(
            tenant_id=service.tenant_id,
            tenant=service.tenant,
            queue_id=service.queue_id,
            queue=service.queue,
            name=shard_name(service.name, n),
            labels=service.labels,
            spec=service.spec,
            compiled=compiled.model_dump(mode="json", by_alias=True),
            priority=service.priority,
            priority_class=service.priority_class,
            preemptible=service.preemptible,
            tasks=[(t.name, t.replicas) for t in compiled.tasks],
            service_id=service.id,
            replica_cap=cap,
        ),
    )
    return job


_CAPS = sa.text(
    """
    UPDATE jobs SET replica_cap = v.cap
    FROM jsonb_to_recordset(:items) AS v(id uuid, cap int)
    WHERE jobs.id = v.id AND jobs.replica_cap IS DISTINCT FROM v.cap
    """
).bindparams(sa.bindparam("items", type_=JSONB))


async def set_caps(conn: AsyncConnection, caps: Mapping[uuid.UUID, int]) -> None:
    """Set the shards' replica caps (one statement); the loop grows or scales them to it."""
    if caps:
        items = [{"id": str(job_id), "cap": cap} for job_id, cap in caps.items()]
        await conn.execute(_CAPS, {"items": items})


async def close_shard(conn: AsyncConnection, job_id: uuid.UUID) -> None:
    """Cancel a shard (its placement released: the agent removes its pods)."""
    await job_store.cancel(conn, job_id, None)


async def update_shards(conn: AsyncConnection, service_id: uuid.UUID) -> int:
    """Give the service's live shards its current compiled form (each keeps the clusters it
    is confined to) and a new version, and their active placements a new revision, so the
    agents get the new template (a newer generation rolls the pods over). Call it in the
    transaction that updates the service; returns how many placements were renewed."""
    compiled = CompiledJob.model_validate(
        await conn.scalar(sa.select(services.c.compiled).where(services.c.id == service_id))
    )
    rows = await conn.execute(
        sa.select(jobs.c.id, jobs.c.compiled["clusters"].label("clusters")).where(
            jobs.c.service_id == service_id, LIVE
        )
    )
    forms = {r.id: shard_form(compiled, tuple(r.clusters or ())) for r in rows}
    if not forms:
        return 0
    items = [
        {"id": str(k), "compiled": v.model_dump(mode="json", by_alias=True)}
        for k, v in forms.items()
    ]
    await conn.execute(_FORMS, {"items": items})
    return await renew_placements(conn, list(forms))


_FORMS = sa.text(
    """
    UPDATE jobs SET compiled = v.compiled, version = jobs.version + 1, updated_at = now()
    FROM jsonb_to_recordset(:items) AS v(id uuid, compiled jsonb)
    WHERE jobs.id = v.id
    """
).bindparams(sa.bindparam("items", type_=JSONB))
