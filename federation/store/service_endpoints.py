"""Where each service shard serves, as its cluster reports it (`wire.agent.ServingStatus`):
one row per shard job, for its current placement only."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.wire.agent import ServingStatus


@dataclass(frozen=True)
class Serving:
    """A shard's serving report of its placement at `epoch`."""

    job_id: uuid.UUID
    epoch: int
    status: ServingStatus


# one statement per batch; a report of an older epoch, or of a job no longer placed on the
# reporting cluster, changes nothing
_UPSERT = sa.text(
    """
    INSERT INTO service_endpoints (job_id, epoch, cluster_id, address, cluster_ip, ports, ready,
                                   updated, generation, metric_sum, sampled, reported_at)
    SELECT v.job_id, v.epoch, jobs.cluster_id, v.address, v.cluster_ip, v.ports, v.ready,
           v.updated, v.generation, v.metric_sum, v.sampled, now()
    FROM jsonb_to_recordset(:items) AS v(
        job_id uuid, epoch bigint, address text, cluster_ip text, ports jsonb, ready int,
        updated int, generation int, metric_sum float8, sampled int)
    JOIN jobs ON jobs.id = v.job_id AND jobs.epoch = v.epoch AND jobs.cluster_id = :cluster
    ON CONFLICT (job_id) DO UPDATE SET
        epoch = excluded.epoch, cluster_id = excluded.cluster_id, address = excluded.address,
        cluster_ip = excluded.cluster_ip, ports = excluded.ports, ready = excluded.ready,
        updated = excluded.updated, generation = excluded.generation,
        metric_sum = excluded.metric_sum, sampled = excluded.sampled,
        reported_at = excluded.reported_at
    WHERE service_endpoints.epoch <= excluded.epoch
    """
).bindparams(sa.bindparam("items", type_=JSONB))


async def record(conn: AsyncConnection, cluster_id: uuid.UUID, reports: Sequence[Serving]) -> None:
    """Store the shards' serving reports of this cluster (one statement; each job at most
    once), each only for the placement its job holds now."""
    if not reports:
        return
    items = [
        {
            "job_id": str(r.job_id),
            "epoch": r.epoch,
            "address": r.status.address,
            "cluster_ip": r.status.cluster_ip,
            "ports": [p.model_dump(mode="json") for p in r.status.ports],
            "ready": r.status.ready,
            "updated": r.status.updated,
            "generation": r.status.generation,
            "metric_sum": r.status.metric_sum,
            "sampled": r.status.sampled,
        }
        for r in reports
    ]
    await conn.execute(_UPSERT, {"items": items, "cluster": cluster_id})
