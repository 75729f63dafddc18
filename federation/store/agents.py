"""What agents write: registration and heartbeats, inventory, and status of their placements.

An agent token is bound to one cluster; every function here takes that cluster's id, so an
agent can never touch another cluster's rows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import NotFound
from federation.scheduling.lifecycle import JOB_TRANSITIONS
from federation.store.jobs import add_event, release_placements, transition
from federation.store.tables import clusters, devices, jobs, nodes, placements, tenants
from federation.wire.agent import (
    Assignment,
    InventoryAck,
    InventoryReport,
    Registration,
    ReplicaHint,
    StatusUpdate,
)


async def register(
    conn: AsyncConnection, cluster_id: uuid.UUID, reg: Registration
) -> tuple[str, int]:
    """Record what the agent says of its cluster, mark it Ready; return (name, generation)."""
    row = (
        await conn.execute(
            sa.select(clusters.c.name, clusters.c.state, clusters.c.inventory_generation)
            .where(clusters.c.id == cluster_id)
            .with_for_update()
        )
    ).one_or_none()
    if row is None:
        raise NotFound("cluster", str(cluster_id))
    if row.name != reg.cluster:
        raise NotFound("cluster", reg.cluster)
    await conn.execute(
        sa.update(clusters)
        .where(clusters.c.id == cluster_id)
        .values(
            region=reg.region,
            zone=reg.zone,
            labels=reg.labels,
            kubernetes_version=reg.kubernetes_version,
            agent_version=reg.agent_version,
            state="Ready",
            last_heartbeat=sa.func.now(),
            version=clusters.c.version + 1,
        )
    )
    if row.state != "Ready":
        await add_event(
            conn,
            kind="Cluster",
            reason="Registered",
            cluster_id=cluster_id,
            message=f"agent {reg.agent_version or '?'}, Kubernetes {reg.kubernetes_version or '?'}",
            data={"from": row.state},
        )
    return row.name, int(row.inventory_generation)


async def heartbeat(conn: AsyncConnection, cluster_id: uuid.UUID) -> None:
    """Note that the cluster's agent is alive (a NotReady cluster becomes Ready again)."""
    result = await conn.execute(
        sa.update(clusters)
        .where(clusters.c.id == cluster_id, clusters.c.state != "Pending")
        .values(last_heartbeat=sa.func.now(), state="Ready")
        .returning(clusters.c.id)
    )
    if result.first() is None:
        raise NotFound("registered cluster", str(cluster_id))


def _node_row(cluster_id: uuid.UUID, n: Any, generation: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "name": n.name,
        "labels": n.labels,
        "taints": [t.model_dump() for t in n.taints],
        "ready": n.ready,
        "unschedulable": n.unschedulable,
        "cpu_milli": n.cpu_milli,
        "cpu_milli_used": n.used_cpu_milli,
        "memory_mib": n.memory_mib,
        "memory_mib_used": n.used_memory_mib,
        "pods": n.pods,
        "pods_used": n.used_pods,
        "generation": generation,
    }


async def apply_inventory(
    conn: AsyncConnection, cluster_id: uuid.UUID, report: InventoryReport
) -> InventoryAck:
    """Store a full snapshot or an in-order delta; a gap in generations asks for a resync."""
    current = await conn.scalar(
        sa.select(clusters.c.inventory_generation)
        .where(clusters.c.id == cluster_id)
        .with_for_update()
    )
    if current is None:
        raise NotFound("cluster", str(cluster_id))
    if not report.full and report.generation != current + 1:
        return InventoryAck(generation=int(current), resync=report.generation > current + 1)
    if report.full:
        await conn.execute(sa.delete(nodes).where(nodes.c.cluster_id == cluster_id))
    else:
        touched = [n.name for n in report.nodes] + list(report.removed)
        await conn.execute(
            sa.delete(nodes).where(nodes.c.cluster_id == cluster_id, nodes.c.name.in_(touched))
        )
    if report.nodes:
        await conn.execute(
            pg_insert(nodes), [_node_row(cluster_id, n, report.generation) for n in report.nodes]
        )
        device_rows = [
            {
                "cluster_id": cluster_id,
                "node_name": n.name,
                "flavor": d.flavor,
                "index": d.index,
                "memory_mib": d.memory_mib,
                "healthy": d.healthy,
                "used_milli": d.used_milli,
                "used_memory_mib": d.used_memory_mib,
            }
            for n in report.nodes
            for d in n.devices
        ]
        if device_rows:
            await conn.execute(sa.insert(devices), device_rows)
    await conn.execute(
        sa.update(clusters)
        .where(clusters.c.id == cluster_id)
        .values(inventory_generation=report.generation, last_heartbeat=sa.func.now())
    )
    return InventoryAck(generation=report.generation)


async def assignments(
    conn: AsyncConnection, cluster_id: uuid.UUID, after: int, limit: int = 500
) -> list[Assignment]:
    """Placements of this cluster changed after revision `after`, oldest change first."""
    rows = await conn.execute(
        sa.select(
            placements.c.job_id,
            placements.c.epoch,
            placements.c.revision,
            placements.c.state,
            placements.c.assignment,
            jobs.c.name,
            jobs.c.spec,
            jobs.c.priority,
            jobs.c.priority_class,
            jobs.c.preemptible,
            tenants.c.name.label("tenant"),
        )
        .join(jobs, jobs.c.id == placements.c.job_id)
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .where(placements.c.cluster_id == cluster_id, placements.c.revision > after)
        .order_by(placements.c.revision)
        .limit(limit)
    )
    out = []
    for r in rows:
        spec = r.spec["spec"]
        out.append(
            Assignment(
                job=r.job_id,
                name=r.name,
                tenant=r.tenant,
                epoch=r.epoch,
                revision=r.revision,
                state=r.state,
                priority=r.priority,
                priority_class=r.priority_class,
                preemptible=r.preemptible,
                gang=spec.get("gang", True),
                flavors=r.assignment.get("flavors", {}),
                tasks=spec["tasks"],
                hints=[ReplicaHint(**h) for h in r.assignment.get("hints", [])],
            )
        )
    return out


@dataclass(frozen=True)
class StatusOutcome:
    """What one status update did: "applied", "duplicate" or "stale"."""

    kind: str
    job_state: str | None = None


# the job state each report moves to, and the states it may come from
_TARGET = {
    "Applied": "Dispatched",
    "Running": "Running",
    "Succeeded": "Succeeded",
    "Failed": "Failed",
    "Evicted": "Queued",
    "Unschedulable": "Queued",
}


async def apply_status(
    conn: AsyncConnection, cluster_id: uuid.UUID, update: StatusUpdate
) -> StatusOutcome:
    """Apply one status update of this cluster's placement (idempotent, fenced by epoch)."""
    job = (
        await conn.execute(
            sa.select(jobs.c.state, jobs.c.epoch, jobs.c.cluster_id)
            .where(jobs.c.id == update.job)
            .with_for_update()
        )
    ).one_or_none()
    if job is None or job.epoch != update.epoch or job.cluster_id != cluster_id:
        return StatusOutcome("stale")
    target = _TARGET[update.state]
    if update.state == "Running" and job.state == "Placed":
        await transition(conn, update.job, "Dispatched", reason="Applied")
        job_state = "Dispatched"
    else:
        job_state = job.state
    if job_state == target or target not in JOB_TRANSITIONS.get(job_state, frozenset()):
        return StatusOutcome("duplicate", job_state)
    if update.state == "Evicted" and job_state != "Preempting":
        reason = "PodsLost"  # pods vanished under a running job: run it again elsewhere
    else:
        reason = update.reason or update.state
    values: dict[str, Any] = {}
    if target in ("Queued", "Succeeded", "Failed"):
        await release_placements(conn, update.job)
    if target == "Queued":
        values = {"cluster_id": None}
    moved = await transition(
        conn,
        update.job,
        target,
        reason=reason,
        message=update.message,
        data={
            "cluster_report": update.state,
            "cluster_id": str(cluster_id),
            "epoch": update.epoch,
            "pods": {
                "running": update.running,
                "succeeded": update.succeeded,
                "failed": update.failed,
            },
        },
        values=values,
    )
    return StatusOutcome("applied", moved.state)
