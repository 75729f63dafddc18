"""Cluster health: missing heartbeats make a cluster NotReady, then Offline; a lost or draining
cluster's jobs go back to the queue (their next placement gets a new epoch, which fences off
any pod the old cluster still runs)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.jobs import add_event, release_placements, transition
from federation.store.queue_usage import HOLDING_STATES
from federation.store.tables import clusters, jobs


@dataclass(frozen=True)
class HealthConfig:
    """Seconds without heartbeat before a cluster is NotReady, then Offline."""

    not_ready_after_s: float = 20.0
    offline_after_s: float = 90.0


async def check(conn: AsyncConnection, config: HealthConfig) -> list[str]:
    """Apply heartbeat timeouts and drains; return what changed, for logs."""
    changed: list[str] = []
    stale = await conn.execute(
        sa.update(clusters)
        .where(
            clusters.c.state == "Ready",
            clusters.c.last_heartbeat
            < sa.func.now() - sa.func.make_interval(0, 0, 0, 0, 0, 0, config.not_ready_after_s),
        )
        .values(state="NotReady", version=clusters.c.version + 1)
        .returning(clusters.c.id, clusters.c.name)
    )
    for cluster_id, name in stale:
        await add_event(
            conn,
            kind="Cluster",
            reason="NotReady",
            cluster_id=cluster_id,
            message="agent heartbeat missing",
        )
        changed.append(f"{name} NotReady")
    lost = await conn.execute(
        sa.update(clusters)
        .where(
            clusters.c.state == "NotReady",
            clusters.c.last_heartbeat
            < sa.func.now() - sa.func.make_interval(0, 0, 0, 0, 0, 0, config.offline_after_s),
        )
        .values(state="Offline", version=clusters.c.version + 1)
        .returning(clusters.c.id, clusters.c.name)
    )
    requeue = []
    for cluster_id, name in lost:
        await add_event(
            conn, kind="Cluster", reason="Offline", cluster_id=cluster_id, message="jobs requeued"
        )
        changed.append(f"{name} Offline")
        requeue.append((cluster_id, "ClusterLost"))
    draining = await conn.execute(sa.select(clusters.c.id).where(clusters.c.draining))
    requeue += [(cluster_id, "ClusterDrained") for (cluster_id,) in draining]
    for cluster_id, reason in requeue:
        held = await conn.execute(
            sa.select(jobs.c.id, jobs.c.state)
            .where(jobs.c.cluster_id == cluster_id, jobs.c.state.in_(HOLDING_STATES))
            .with_for_update()
        )
        for job_id, state in held:
            await release_placements(conn, job_id)
            await transition(conn, job_id, "Queued", reason=reason, values={"cluster_id": None})
            changed.append(f"job {job_id} {state} -> Queued ({reason})")
    return changed
