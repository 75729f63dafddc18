"""What a service's live shards hold and serve, as the API shows it: read from the shards'
jobs, active placements and their clusters' serving reports (`service_endpoints`, of the
shard's current placement only)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import held_replicas
from federation.store.lifecycle import TERMINAL_JOB_STATES
from federation.store.tables import clusters, jobs, placements, service_endpoints


@dataclass(frozen=True)
class Shard:
    """One live shard: where it runs, the replicas it holds and may hold, and what its cluster
    last reported serving (zeros and None before the first report)."""

    job_id: uuid.UUID
    name: str
    cluster: str | None
    state: str
    held: int
    cap: int | None
    ready: int
    updated: int
    generation: int
    metric_sum: float | None
    sampled: int


@dataclass(frozen=True)
class Endpoint:
    """Where one shard serves: its cluster's Service and the replicas ready behind it."""

    job_id: uuid.UUID
    shard: str
    cluster: str
    region: str
    address: str
    cluster_ip: str
    ports: list[dict[str, Any]]
    ready: int
    updated: int
    generation: int
    reported_at: datetime


def _live_shards(service_id: uuid.UUID) -> sa.ColumnElement[bool]:
    return sa.and_(jobs.c.service_id == service_id, jobs.c.state.notin_(TERMINAL_JOB_STATES))


async def shards(conn: AsyncConnection, service_id: uuid.UUID) -> list[Shard]:
    """The live shards of a service, oldest first."""
    task = jobs.c.compiled[("tasks", "0")]
    rows = await conn.execute(
        sa.select(
            jobs.c.id,
            jobs.c.name,
            clusters.c.name.label("cluster"),
            jobs.c.state,
            jobs.c.replica_cap,
            task["name"].astext.label("task"),
            task["replicas"].astext.label("start"),
            jobs.c.compiled[("service", "generation")].astext.label("generation"),
            placements.c.assignment,
            service_endpoints.c.ready,
            service_endpoints.c.updated,
            service_endpoints.c.metric_sum,
            service_endpoints.c.sampled,
        )
        .outerjoin(
            placements,
            sa.and_(
                placements.c.job_id == jobs.c.id,
                placements.c.epoch == jobs.c.epoch,
                placements.c.state == "Active",
            ),
        )
        .outerjoin(clusters, clusters.c.id == placements.c.cluster_id)
        .outerjoin(
            service_endpoints,
            sa.and_(
                service_endpoints.c.job_id == jobs.c.id,
                service_endpoints.c.epoch == jobs.c.epoch,
            ),
        )
        .where(_live_shards(service_id))
        .order_by(jobs.c.seq)
    )
    return [
        Shard(
            job_id=r.id,
            name=r.name,
            cluster=r.cluster,
            state=r.state,
            held=(
                held_replicas(r.assignment).get(r.task, int(r.start or 1))
                if r.assignment is not None
                else 0
            ),
            cap=r.replica_cap,
            ready=r.ready or 0,
            updated=r.updated or 0,
            generation=int(r.generation or 1),
            metric_sum=r.metric_sum,
            sampled=r.sampled or 0,
        )
        for r in rows
    ]


async def endpoints(conn: AsyncConnection, service_id: uuid.UUID) -> list[Endpoint]:
    """Each live shard's endpoint as its cluster reported it for the shard's current
    placement, oldest shard first (shards not reported yet are left out)."""
    rows = await conn.execute(
        sa.select(
            jobs.c.id,
            jobs.c.name,
            clusters.c.name.label("cluster"),
            clusters.c.region,
            service_endpoints.c.address,
            service_endpoints.c.cluster_ip,
            service_endpoints.c.ports,
            service_endpoints.c.ready,
            service_endpoints.c.updated,
            service_endpoints.c.generation,
            service_endpoints.c.reported_at,
        )
        .join(
            service_endpoints,
            sa.and_(
                service_endpoints.c.job_id == jobs.c.id,
                service_endpoints.c.epoch == jobs.c.epoch,
            ),
        )
        .join(clusters, clusters.c.id == service_endpoints.c.cluster_id)
        .where(_live_shards(service_id))
        .order_by(jobs.c.seq)
    )
    return [
        Endpoint(
            job_id=r.id,
            shard=r.name,
            cluster=r.cluster,
            region=r.region,
            address=r.address,
            cluster_ip=r.cluster_ip,
            ports=list(r.ports),
            ready=r.ready,
            updated=r.updated,
            generation=r.generation,
            reported_at=r.reported_at,
        )
        for r in rows
    ]
