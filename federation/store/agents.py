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

from federation.compiled import CompiledJob
from federation.errors import Forbidden, NotFound
from federation.hubconfig import DEFAULT_RETRY, RetryPolicy
from federation.spec import FailoverPolicy
from federation.store.events import add_event
from federation.store.lifecycle import cluster_alive, may_move, move_job, release_placements
from federation.store.tables import clusters, devices, jobs, nodes, placements, tenants
from federation.wire.agent import (
    Assignment,
    InventoryAck,
    InventoryReport,
    LeaseRenewal,
    Registration,
    ReplicaHint,
    StatusUpdate,
    assigned_tasks,
)


async def register(
    conn: AsyncConnection, cluster_id: uuid.UUID, reg: Registration
) -> tuple[str, int]:
    """Record what the agent says of its cluster, mark it Ready; return (name, generation)."""
    row = (
        await conn.execute(
            sa.select(clusters.c.name, clusters.c.inventory_generation).where(
                clusters.c.id == cluster_id
            )
        )
    ).one_or_none()
    if row is None:
        raise NotFound("cluster", str(cluster_id))
    if row.name != reg.cluster:
        raise Forbidden(f"this agent credential is for cluster {row.name!r}, not {reg.cluster!r}")
    was = await cluster_alive(
        conn,
        cluster_id,
        registering=True,
        region=reg.region,
        zone=reg.zone,
        labels=reg.labels,
        kubernetes_version=reg.kubernetes_version,
        agent_version=reg.agent_version,
    )
    if was != "Ready":
        await add_event(
            conn,
            kind="Cluster",
            reason="Registered",
            cluster_id=cluster_id,
            message=f"agent {reg.agent_version or '?'}, Kubernetes {reg.kubernetes_version or '?'}",
            data={"from": was},
        )
    return row.name, int(row.inventory_generation)


async def heartbeat(
    conn: AsyncConnection, cluster_id: uuid.UUID, renewal: LeaseRenewal | None = None
) -> None:
    """Note that the cluster's agent is alive, and with a lease renewal whether it reaches its
    kube-apiserver (a NotReady cluster becomes Ready again when it does)."""
    reach = {}
    if renewal is not None:
        reach["problem"] = None if renewal.apiserver_reachable else renewal.problem or "unreachable"
    if await cluster_alive(conn, cluster_id, registering=False, **reach) is None:
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
    conn: AsyncConnection,
    cluster_id: uuid.UUID,
    after: int,
    limit: int = 500,
    default_failover: FailoverPolicy = "fast",
) -> list[Assignment]:
    """Placements of this cluster changed after revision `after`, oldest change first (a job
    without a failover policy gets `default_failover`)."""
    rows = await conn.execute(
        sa.select(
            placements.c.job_id,
            placements.c.epoch,
            placements.c.revision,
            placements.c.state,
            placements.c.assignment,
            jobs.c.name,
            jobs.c.compiled,
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
        compiled = CompiledJob.model_validate(r.compiled)
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
                gang=compiled.gang,
                failover=compiled.failover or default_failover,
                tasks=assigned_tasks(compiled, r.assignment.get("flavors", {})),
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
_WAITING = ("Placed", "Dispatched")
# the steps (state, event reason) a report implies the job went through: the agent sends only
# a placement's latest state, so when the hub missed the earlier reports (a short job, a cut
# link) the first it hears may be Succeeded, straight from Placed or Dispatched
_IMPLIED: dict[str, tuple[tuple[str, str], ...]] = {
    "Running": (("Dispatched", "Applied"),),
    "Succeeded": (("Dispatched", "Applied"), ("Running", "Running")),
}


async def _note_waiting(
    conn: AsyncConnection, job_id: uuid.UUID, cluster: str, update: StatusUpdate, current: str
) -> str | None:
    """Record why the cluster has not bound the job's pods; return the job's new reason (None
    when it already said so)."""
    reason = f"waiting in cluster {cluster}: {update.message}"[:2000]
    if reason == current:
        return None
    await conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            reason=reason,
            pending_reasons={
                cluster: {"code": "cluster", "reason": update.message, "plugin": update.reason}
            },
        )
    )
    await add_event(
        conn,
        kind="Job",
        reason="ClusterWaiting",
        message=update.message,
        job_id=job_id,
        data={"cluster": cluster, "cluster_report": update.reason, "epoch": update.epoch},
    )
    return reason


async def apply_status(
    conn: AsyncConnection,
    cluster_id: uuid.UUID,
    update: StatusUpdate,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> StatusOutcome:
    """Apply one status update of this cluster's placement (idempotent, fenced by epoch).

    A placement the cluster could not start (`Unschedulable`) sends the job back to the queue
    with a growing back-off, and fails it after `retry.max_failures` such placements; while
    pods wait, the cluster's reason becomes the job's reason (shown by explain).
    """
    job = (
        await conn.execute(
            sa.select(
                jobs.c.state,
                jobs.c.epoch,
                jobs.c.cluster_id,
                jobs.c.reason,
                jobs.c.placement_failures,
                clusters.c.name.label("cluster"),
            )
            .join(clusters, clusters.c.id == jobs.c.cluster_id)
            .where(jobs.c.id == update.job)
            .with_for_update(of=jobs)
        )
    ).one_or_none()
    if job is None or job.epoch != update.epoch or job.cluster_id != cluster_id:
        return StatusOutcome("stale")
    target = _TARGET[update.state]
    job_state = job.state
    for step, step_reason in _IMPLIED.get(update.state, ()):
        if may_move(job_state, step):
            await move_job(conn, update.job, step, reason=step_reason)
            job_state = step
    note = None
    if update.state == "Applied" and update.message and job_state in _WAITING:
        note = await _note_waiting(conn, update.job, job.cluster, update, job.reason)
        if job_state == "Dispatched":
            return StatusOutcome("duplicate" if note is None else "applied", job_state)
    if job_state == target or not may_move(job_state, target):
        return StatusOutcome("duplicate", job_state)
    if update.state == "Evicted" and job_state != "Preempting":
        reason = "PodsLost"  # pods vanished under a running job: run it again elsewhere
    else:
        reason = update.reason or update.state
    message = update.message
    values: dict[str, Any] = {}
    if target in ("Queued", "Succeeded", "Failed"):
        await release_placements(conn, update.job)
    if update.state == "Unschedulable":
        failures = job.placement_failures + 1
        values["placement_failures"] = failures
        if failures >= retry.max_failures:
            target, reason = "Failed", "NeverBound"
            message = (
                f"the cluster could not start the job {failures} times "
                f"(last: {job.cluster}: {update.message})"
            )
        else:
            delay = retry.delay(failures)
            values["not_before"] = sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, delay)
            message = (
                f"cluster {job.cluster} could not start it ({update.message}); "
                f"re-placed in {delay:.0f} s, attempt {failures + 1} of {retry.max_failures}"
            )
    if target == "Queued":
        values["cluster_id"] = None
    if target == "Running":
        values["pending_reasons"] = {}  # the cluster's waiting reason no longer holds
    await move_job(
        conn,
        update.job,
        target,
        reason=reason,
        note=message if update.state == "Unschedulable" else note,
        message=message,
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
    return StatusOutcome("applied", target)
