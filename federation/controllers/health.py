"""Cluster health: missing heartbeats make a cluster NotReady, then Offline; a lost or draining
cluster's jobs go back to the queue (their next placement gets a new epoch, which fences off
any pod the old cluster still runs)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.hubconfig import HealthConfig
from federation.store.events import add_event
from federation.store.lifecycle import HOLDING_STATES, clusters_silent, move_job, release_placements
from federation.store.tables import clusters, jobs


async def check(conn: AsyncConnection, config: HealthConfig) -> list[str]:
    """Apply heartbeat timeouts and drains; return what changed, for logs."""
    changed: list[str] = []
    stale = await clusters_silent(conn, "Ready", "NotReady", config.not_ready_after_s)
    for cluster_id, name in stale:
        await add_event(
            conn,
            kind="Cluster",
            reason="NotReady",
            cluster_id=cluster_id,
            message="agent heartbeat missing",
        )
        changed.append(f"{name} NotReady")
    lost = await clusters_silent(conn, "NotReady", "Offline", config.offline_after_s)
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
            await move_job(conn, job_id, "Queued", reason=reason, values={"cluster_id": None})
            changed.append(f"job {job_id} {state} -> Queued ({reason})")
    return changed
