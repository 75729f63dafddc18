"""Read one scheduling snapshot from PostgreSQL: clusters, queues, placements, pending jobs."""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.catalog import Catalog
from federation.compiled import CompiledJob, JobFacts, core_job
from federation.inventory import DeviceRow, core_node
from federation.scheduling.model import (
    Cluster,
    Job,
    Placement,
    Queue,
    Quota,
    ReplicaPlacement,
    Snapshot,
    Task,
)
from federation.store.lifecycle import HOLDING_STATES, UNCOUNTED_STATES
from federation.store.tables import (
    clusters,
    devices,
    events,
    jobs,
    nodes,
    placements,
    queues,
    tenants,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobRef:
    """What the writer needs to apply a decision about a job safely."""

    id: uuid.UUID
    version: int
    state: str
    epoch: int
    reason: str
    pending_reasons: dict[str, Any]


@dataclass
class Read:
    """A snapshot plus what goes with it: pending jobs, row refs, untranslatable jobs."""

    snapshot: Snapshot
    pending: list[Job]
    refs: dict[str, JobRef]
    cluster_ids: dict[str, uuid.UUID]
    invalid: dict[str, str] = field(default_factory=dict)  # job id -> why it cannot be modeled


class CompiledCache:
    """Compiled jobs already decoded, with their core tasks, by job id (a job's compiled form
    never changes); entries of jobs a read no longer sees are dropped."""

    def __init__(self) -> None:
        self._jobs: dict[uuid.UUID, tuple[CompiledJob, tuple[Task, ...]]] = {}
        self._seen: set[uuid.UUID] = set()

    def get(self, job_id: uuid.UUID, raw: Any) -> tuple[CompiledJob, tuple[Task, ...]]:
        """The decoded form of `raw` (the stored JSON); raises ValueError when it is invalid."""
        self._seen.add(job_id)
        found = self._jobs.get(job_id)
        if found is None:
            if raw is None:
                raise ValueError("the job has no compiled form (run `suanpan-hub migrate`)")
            try:
                compiled = CompiledJob.model_validate(raw)
            except ValidationError as exc:
                raise ValueError(f"the job's compiled form is invalid: {exc}") from exc
            found = self._jobs[job_id] = (compiled, compiled.core_tasks())
        return found

    def prune(self) -> None:
        """Forget jobs not asked for since the last prune."""
        self._jobs = {k: v for k, v in self._jobs.items() if k in self._seen}
        self._seen = set()


def _seconds(ts: datetime | None) -> float:
    return ts.timestamp() if ts is not None else 0.0


async def clusters_of_fleet(
    conn: AsyncConnection, catalog: Catalog
) -> tuple[list[Cluster], dict[str, uuid.UUID]]:
    """Every cluster with its nodes and devices, and the ids by cluster name."""
    device_rows: dict[tuple[uuid.UUID, str], list[DeviceRow]] = defaultdict(list)
    for d in await conn.execute(sa.select(devices)):
        m = d._mapping
        device_rows[(m["cluster_id"], m["node_name"])].append(
            DeviceRow(
                m["flavor"],
                m["index"],
                m["memory_mib"],
                m["healthy"],
                m["used_milli"],
                m["used_memory_mib"],
            )
        )
    node_map: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for n in await conn.execute(sa.select(nodes).order_by(nodes.c.cluster_id, nodes.c.name)):
        node_map[n.cluster_id].append(
            core_node(catalog, dict(n._mapping), device_rows.get((n.cluster_id, n.name), ()))
        )
    out, ids = [], {}
    for c in await conn.execute(sa.select(clusters).order_by(clusters.c.name)):
        ids[c.name] = c.id
        out.append(
            Cluster(
                name=c.name,
                region=c.region,
                zone=c.zone,
                nodes=tuple(node_map.get(c.id, ())),
                labels=MappingProxyType(dict(c.labels)),
                ready=c.state == "Ready",
                cordoned=c.cordoned,
            )
        )
    return out, ids


async def queue_models(conn: AsyncConnection) -> list[Queue]:
    """Every queue as the core models it (named "<tenant>/<queue>")."""
    rows = await conn.execute(
        sa.select(queues, tenants.c.name.label("tenant")).join(
            tenants, tenants.c.id == queues.c.tenant_id
        )
    )
    return [
        Queue(
            name=f"{q.tenant}/{q.name}",
            tenant=q.tenant,
            cohort=q.cohort or "",
            weight=q.weight,
            quota=MappingProxyType(
                {res: Quota(v["nominal"], v.get("borrowingLimit")) for res, v in q.quota.items()}
            ),
        )
        for q in rows
    ]


async def _gang_failures(
    conn: AsyncConnection, cluster_names: dict[uuid.UUID, str]
) -> dict[uuid.UUID, frozenset[str]]:
    """Per queued job, the clusters where its gang failed to start in the last half hour."""
    rows = await conn.execute(
        sa.select(events.c.job_id, events.c.data["cluster_id"].astext)
        .join(jobs, jobs.c.id == events.c.job_id)
        .where(
            jobs.c.state == "Queued",
            events.c.kind == "Job",
            events.c.data["cluster_report"].astext == "Unschedulable",
            events.c.created_at > sa.func.now() - sa.text("interval '30 minutes'"),
        )
    )
    found: dict[uuid.UUID, set[str]] = defaultdict(set)
    for job_id, cluster_id in rows:
        name = cluster_names.get(uuid.UUID(cluster_id)) if cluster_id else None
        if name:
            found[job_id].add(name)
    return {job_id: frozenset(names) for job_id, names in found.items()}


async def read(
    conn: AsyncConnection,
    catalog: Catalog,
    *,
    now: float,
    cache: CompiledCache | None = None,
    max_pending: int = 5000,
) -> Read:
    """Everything one cycle needs, read in the caller's (repeatable-read) transaction."""
    cache = cache or CompiledCache()
    fleet, cluster_ids = await clusters_of_fleet(conn, catalog)
    cluster_names = {v: k for k, v in cluster_ids.items()}
    queue_list = await queue_models(conn)
    job_cols = (
        jobs.c.id,
        jobs.c.compiled,
        jobs.c.state,
        jobs.c.priority,
        jobs.c.preemptible,
        jobs.c.version,
        jobs.c.epoch,
        jobs.c.queued_at,
        jobs.c.started_at,
        jobs.c.reason,
        jobs.c.pending_reasons,
        jobs.c.cluster_id,
        tenants.c.name.label("tenant"),
        queues.c.name.label("queue"),
    )
    base = (
        sa.select(*job_cols)
        .join(tenants, tenants.c.id == jobs.c.tenant_id)
        .join(queues, queues.c.id == jobs.c.queue_id)
    )
    result = Read(Snapshot(), [], {}, cluster_ids)
    avoided = await _gang_failures(conn, cluster_names)

    def model(row: Any) -> Job | None:
        facts = JobFacts(
            id=str(row.id),
            queue=f"{row.tenant}/{row.queue}",
            priority=row.priority,
            preemptible=row.preemptible,
            created_at=_seconds(row.queued_at),
            runtime_s=max(0.0, now - _seconds(row.started_at)) if row.started_at else 0.0,
            avoided_clusters=avoided.get(row.id, frozenset()),
        )
        result.refs[facts.id] = JobRef(
            row.id, row.version, row.state, row.epoch, row.reason, row.pending_reasons
        )
        try:
            compiled, tasks = cache.get(row.id, row.compiled)
        except ValueError as exc:
            result.invalid[facts.id] = str(exc)
            return None
        return core_job(compiled, facts, tasks)

    held = await conn.execute(
        base.add_columns(placements.c.assignment)
        .join(
            placements,
            sa.and_(placements.c.job_id == jobs.c.id, placements.c.epoch == jobs.c.epoch),
        )
        .where(jobs.c.state.in_(HOLDING_STATES), placements.c.state == "Active")
    )
    placed: list[Placement] = []
    reservations: list[Placement] = []
    preempting: set[str] = set()
    for row in held:
        job = model(row)
        if job is None:
            continue
        flavors = row.assignment.get("flavors", {})
        task_index = {t.name: i for i, t in enumerate(job.tasks)}
        placement = Placement(
            job=job,
            cluster=cluster_names.get(row.cluster_id, ""),
            flavors=tuple(flavors.get(t.name) or "" for t in job.tasks),
            replicas=tuple(
                ReplicaPlacement(task_index[h["task"]], h["node"], tuple(h["devices"]))
                for h in row.assignment.get("hints", [])
                if h["task"] in task_index
            ),
            epoch=row.epoch,
        )
        placed.append(placement)
        if row.state in UNCOUNTED_STATES:
            reservations.append(placement)
        if row.state == "Preempting":
            preempting.add(job.id)
    pending_rows = await conn.execute(
        base.where(
            jobs.c.state == "Queued",
            sa.or_(jobs.c.not_before.is_(None), jobs.c.not_before <= sa.func.now()),
        )
        .order_by(jobs.c.priority.desc(), jobs.c.queued_at)
        .limit(max_pending)
    )
    result.pending = [j for j in (model(r) for r in pending_rows) if j is not None]
    cache.prune()
    result.snapshot = Snapshot(
        clusters=tuple(fleet),
        queues=tuple(queue_list),
        placements=tuple(placed),
        reservations=tuple(reservations),
        preempting=frozenset(preempting),
    )
    return result
