"""What agents write: registration and heartbeats, inventory, and status of their placements.

An agent token is bound to one cluster; every function here takes that cluster's id, so an
agent can never touch another cluster's rows.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob, held_replicas
from federation.errors import Forbidden, NotFound
from federation.hubconfig import DEFAULT_RETRY, RetryPolicy
from federation.spec import FailoverPolicy
from federation.store import replicas, service_endpoints
from federation.store.events import NewEvent, add_event, add_events
from federation.store.lifecycle import (
    JobChange,
    Step,
    change_jobs,
    cluster_alive,
    may_move,
    release_placements,
)
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
    kube-apiserver (a NotReady cluster becomes Ready again when it does). One statement: on an
    autocommit connection it is its own transaction, holding the cluster's row only while it
    runs."""
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


_INVENTORY_LOCK = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


async def apply_inventory(
    conn: AsyncConnection, cluster_id: uuid.UUID, report: InventoryReport
) -> InventoryAck:
    """Store a full snapshot or an in-order delta; a gap in generations asks for a resync.

    Reports of one cluster are serialized by a transaction-scoped advisory lock, not the
    cluster's row lock: a full snapshot takes a while to write, and lease renewals (which lock
    that row) must not wait for it; the row is updated last, just before the commit."""
    await conn.execute(_INVENTORY_LOCK, {"key": f"inventory:{cluster_id}"})
    current = await conn.scalar(
        sa.select(clusters.c.inventory_generation).where(clusters.c.id == cluster_id)
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
                failure_policy=compiled.failure_policy,
                grace_period_seconds=compiled.grace_period_seconds,
                tasks=assigned_tasks(
                    compiled, r.assignment.get("flavors", {}), held_replicas(r.assignment)
                ),
                hints=[ReplicaHint(**h) for h in r.assignment.get("hints", [])],
                service=compiled.service,
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


@dataclass(frozen=True)
class _Locked:
    """A job a report names, as read under its row lock."""

    state: str
    version: int
    epoch: int
    reason: str
    placement_failures: int
    on_node_failure: str  # the job's failurePolicy.onNodeFailure: requeue or fail


@dataclass(frozen=True)
class _Plan:
    """What one update does: its outcome, the job's change, whether it frees the placement."""

    outcome: StatusOutcome
    change: JobChange | None = None
    release: bool = False


def _plan(
    job: _Locked | None,
    cluster_id: uuid.UUID,
    cluster: str,
    update: StatusUpdate,
    retry: RetryPolicy,
) -> _Plan:
    """The outcome and change of one update of a job of the cluster `cluster` (None: no job
    of this cluster), as the lifecycle's tables allow."""
    if job is None or job.epoch != update.epoch:
        return _Plan(StatusOutcome("stale"))
    target = _TARGET[update.state]
    lost = update.state == "Evicted" and job.state != "Preempting"  # pods lost with their node
    if lost and job.on_node_failure == "fail":
        target = "Failed"
    state = job.state
    steps: list[Step] = []
    for step, step_reason in _IMPLIED.get(update.state, ()):
        if may_move(state, step):
            steps.append(Step(step, step_reason))
            state = step
    note = None
    before: tuple[NewEvent, ...] = ()
    pending: dict[str, Any] | None = None
    if update.state == "Applied" and update.message and state in _WAITING:
        waiting = f"waiting in cluster {cluster}: {update.message}"[:2000]
        if waiting != job.reason:  # why the cluster has not bound the job's pods, said once
            note = waiting
            pending = {
                cluster: {"code": "cluster", "reason": update.message, "plugin": update.reason}
            }
            before = (
                NewEvent(
                    kind="Job",
                    reason="ClusterWaiting",
                    message=update.message,
                    job_id=update.job,
                    data={
                        "cluster": cluster,
                        "cluster_report": update.reason,
                        "epoch": update.epoch,
                    },
                ),
            )
        if state == "Dispatched":
            if note is None:
                return _Plan(StatusOutcome("duplicate", state))
            noted = JobChange(
                update.job, job.version, state, reason=note, before=before, pending_reasons=pending
            )
            return _Plan(StatusOutcome("applied", state), noted)
    if state == target or not may_move(state, target):
        implied = JobChange(update.job, job.version, job.state, steps) if steps else None
        return _Plan(StatusOutcome("duplicate", state), implied)
    message = update.message
    if lost and target == "Failed":
        reason = update.reason or "NodeLost"
        message = f"{message or 'pods lost'} (failurePolicy.onNodeFailure: fail)"
    elif lost:
        reason = "PodsLost"  # pods vanished under a running job: run it again elsewhere
    else:
        reason = update.reason or update.state
    release = target in ("Queued", "Succeeded", "Failed")
    failures = delay = None
    if update.state == "Unschedulable":
        failures = job.placement_failures + 1
        if failures >= retry.max_failures:
            target, reason = "Failed", "NeverBound"
            message = (
                f"the cluster could not start the job {failures} times "
                f"(last: {cluster}: {update.message})"
            )
        else:
            delay = retry.delay(failures)
            message = (
                f"cluster {cluster} could not start it ({update.message}); "
                f"re-placed in {delay:.0f} s, attempt {failures + 1} of {retry.max_failures}"
            )
        note = message
    if target == "Running":
        pending = {}  # the cluster's waiting reason no longer holds
    steps.append(
        Step(
            target,
            reason,
            message,
            {
                "cluster_report": update.state,
                "cluster_id": str(cluster_id),
                "epoch": update.epoch,
                "pods": {
                    "running": update.running,
                    "succeeded": update.succeeded,
                    "failed": update.failed,
                },
            },
        )
    )
    change = JobChange(
        update.job,
        job.version,
        job.state,
        steps,
        reason=note,
        before=before,
        clear_cluster=target == "Queued",
        pending_reasons=pending,
        placement_failures=failures,
        not_before_s=delay,
    )
    return _Plan(StatusOutcome("applied", target), change, release)


def _rounds(updates: Sequence[StatusUpdate]) -> list[list[int]]:
    """Indices of `updates` in rounds that name each job at most once, in report order."""
    rounds: list[list[int]] = []
    seen: dict[uuid.UUID, int] = defaultdict(int)
    for i, update in enumerate(updates):
        k = seen[update.job]
        seen[update.job] += 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(i)
    return rounds


async def _lock(
    conn: AsyncConnection, cluster_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, _Locked]:
    """The named jobs placed on this cluster, locked (in id order, as every batch locks)."""
    rows = await conn.execute(
        sa.select(
            jobs.c.id,
            jobs.c.state,
            jobs.c.version,
            jobs.c.epoch,
            jobs.c.reason,
            jobs.c.placement_failures,
            jobs.c.compiled["failurePolicy"]["onNodeFailure"].astext.label("on_node_failure"),
        )
        .where(
            jobs.c.id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(UUID(as_uuid=True)))),
            jobs.c.cluster_id == cluster_id,
        )
        .order_by(jobs.c.id)
        .with_for_update(key_share=True)
    )
    return {
        r.id: _Locked(
            r.state,
            r.version,
            r.epoch,
            r.reason,
            r.placement_failures,
            r.on_node_failure or "requeue",
        )
        for r in rows
    }


async def apply_statuses(
    conn: AsyncConnection,
    cluster_id: uuid.UUID,
    updates: Sequence[StatusUpdate],
    retry: RetryPolicy = DEFAULT_RETRY,
) -> list[StatusOutcome]:
    """Apply a report's status updates of this cluster's placements, in order: idempotent,
    each fenced by its epoch; return each one's outcome.

    Set-wise: the named jobs are read under lock in one query, their transitions computed
    here with the lifecycle's tables, and written in one statement each for placements, jobs
    and events, however long the report (one such round per repeat of a job in it). A
    placement the cluster could not start (`Unschedulable`) sends the job back to the queue
    with a growing back-off, and fails it after `retry.max_failures` such placements; while
    pods wait, the cluster's reason becomes the job's reason (shown by explain). Pods lost
    with their node (`Evicted`) requeue the job, or fail it when its
    `failurePolicy.onNodeFailure` says so. The replicas' statuses of the current placements
    are stored (`replicas.record`, one statement) and their failures and new reasons become
    events, before the jobs' own; so are service shards' serving reports
    (`service_endpoints.record`, one statement). A shard is Running once its agent says so
    (a replica Ready), through the same transitions as any job.
    """
    cluster = await conn.scalar(sa.select(clusters.c.name).where(clusters.c.id == cluster_id))
    if cluster is None:
        raise NotFound("cluster", str(cluster_id))
    outcomes: list[StatusOutcome] = [StatusOutcome("stale")] * len(updates)
    for indices in _rounds(updates):
        locked = await _lock(conn, cluster_id, [updates[i].job for i in indices])
        current = [
            replicas.Reported(u.job, u.epoch, u.replicas)
            for u in (updates[i] for i in indices)
            if u.replicas and (job := locked.get(u.job)) is not None and job.epoch == u.epoch
        ]
        await add_events(conn, await replicas.record(conn, current))
        await service_endpoints.record(
            conn,
            cluster_id,
            [
                service_endpoints.Serving(u.job, u.epoch, u.serving)
                for u in (updates[i] for i in indices)
                if u.serving is not None
                and (job := locked.get(u.job)) is not None
                and job.epoch == u.epoch
            ],
        )
        changes: list[JobChange] = []
        released: list[uuid.UUID] = []
        for i in indices:
            update = updates[i]
            plan = _plan(locked.get(update.job), cluster_id, cluster, update, retry)
            outcomes[i] = plan.outcome
            if plan.change is not None:
                changes.append(plan.change)
            if plan.release:
                released.append(update.job)
        await release_placements(conn, *released)
        await change_jobs(conn, changes)
    return outcomes
