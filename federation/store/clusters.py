"""Member clusters: registration record, capacity summaries, cordon and drain."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import NotFound
from federation.store.events import add_event
from federation.store.tables import clusters, device_telemetry, devices, nodes
from federation.store.telemetry import DEVICE_READING


@dataclass(frozen=True)
class FlavorSummary:
    """Devices of one flavor in a cluster."""

    flavor: str
    total: int
    healthy: int
    allocated_milli: int
    free_whole: int
    reporting: int = 0  # devices with a reading
    utilization: float | None = None  # mean over those
    temperature_max_c: float | None = None


@dataclass(frozen=True)
class ClusterSummary:
    """A cluster row with its capacity totals."""

    id: uuid.UUID
    name: str
    region: str
    zone: str
    labels: dict[str, str]
    state: str
    accepted: bool
    cordoned: bool
    draining: bool
    kubernetes_version: str
    agent_version: str
    last_heartbeat: datetime | None
    apiserver_problem: str | None = None
    nodes: int = 0
    ready_nodes: int = 0
    cpu_milli: int = 0
    cpu_milli_used: int = 0
    memory_mib: int = 0
    memory_mib_used: int = 0
    flavors: list[FlavorSummary] = field(default_factory=list)


async def ensure_cluster(conn: AsyncConnection, name: str) -> uuid.UUID:
    """The id of cluster `name`, creating a Pending record if it is new."""
    await conn.execute(
        pg_insert(clusters).values(name=name).on_conflict_do_nothing(index_elements=["name"])
    )
    cluster_id: uuid.UUID | None = await conn.scalar(
        sa.select(clusters.c.id).where(clusters.c.name == name)
    )
    assert cluster_id is not None
    return cluster_id


_NODE_TOTALS = (
    sa.select(
        nodes.c.cluster_id,
        sa.func.count().label("nodes"),
        sa.func.count().filter(nodes.c.ready & ~nodes.c.unschedulable).label("ready_nodes"),
        sa.func.coalesce(sa.func.sum(nodes.c.cpu_milli), 0).label("cpu_milli"),
        sa.func.coalesce(sa.func.sum(nodes.c.cpu_milli_used), 0).label("cpu_milli_used"),
        sa.func.coalesce(sa.func.sum(nodes.c.memory_mib), 0).label("memory_mib"),
        sa.func.coalesce(sa.func.sum(nodes.c.memory_mib_used), 0).label("memory_mib_used"),
    )
    .group_by(nodes.c.cluster_id)
    .subquery()
)


async def name_of(conn: AsyncConnection, cluster_id: uuid.UUID) -> str | None:
    """The name of cluster `cluster_id`, or None if there is none."""
    name = await conn.scalar(sa.select(clusters.c.name).where(clusters.c.id == cluster_id))
    return None if name is None else str(name)


async def summaries(conn: AsyncConnection, name: str | None = None) -> list[ClusterSummary]:
    """Clusters (all, or the one named) with node and per-flavor device totals."""
    query = (
        sa.select(
            clusters.c.id,
            clusters.c.name,
            clusters.c.region,
            clusters.c.zone,
            clusters.c.labels,
            clusters.c.state,
            clusters.c.accepted,
            clusters.c.cordoned,
            clusters.c.draining,
            clusters.c.kubernetes_version,
            clusters.c.agent_version,
            clusters.c.last_heartbeat,
            clusters.c.apiserver_problem,
            *(c for c in _NODE_TOTALS.c if c.name != "cluster_id"),
        )
        .outerjoin(_NODE_TOTALS, _NODE_TOTALS.c.cluster_id == clusters.c.id)
        .order_by(clusters.c.name)
    )
    if name is not None:
        query = query.where(clusters.c.name == name)
    rows = list(await conn.execute(query))
    if name is not None and not rows:
        raise NotFound("cluster", name)
    t = device_telemetry
    flavor_rows = await conn.execute(
        sa.select(
            devices.c.cluster_id,
            devices.c.flavor,
            sa.func.count().label("total"),
            sa.func.count().filter(devices.c.healthy).label("healthy"),
            sa.func.coalesce(sa.func.sum(devices.c.used_milli), 0).label("allocated_milli"),
            sa.func.count()
            .filter(devices.c.healthy & (devices.c.used_milli == 0))
            .label("free_whole"),
            sa.func.count(t.c.utilization).label("reporting"),
            sa.func.avg(t.c.utilization).label("utilization"),
            sa.func.max(t.c.temperature_c).label("temperature_max_c"),
        )
        .outerjoin(t, DEVICE_READING)
        .where(devices.c.cluster_id.in_([r.id for r in rows]))
        .group_by(devices.c.cluster_id, devices.c.flavor)
        .order_by(devices.c.flavor)
    )
    flavors: dict[uuid.UUID, list[FlavorSummary]] = defaultdict(list)
    for f in flavor_rows:
        flavors[f.cluster_id].append(
            FlavorSummary(
                f.flavor,
                int(f.total),
                int(f.healthy),
                int(f.allocated_milli),
                int(f.free_whole),
                int(f.reporting),
                None if f.utilization is None else round(float(f.utilization), 1),
                f.temperature_max_c,
            )
        )
    out = []
    for r in rows:
        values: dict[str, Any] = {k: (0 if v is None else v) for k, v in r._mapping.items()}
        values["last_heartbeat"] = r.last_heartbeat
        values["apiserver_problem"] = r.apiserver_problem
        out.append(ClusterSummary(**values, flavors=flavors[r.id]))
    return out


async def set_flags(conn: AsyncConnection, name: str, *, reason: str, **flags: bool) -> None:
    """Set cordoned/draining flags of a cluster and record why; flags already so change nothing.

    The update matches only a row whose flags differ, and PostgreSQL re-checks that after
    waiting for a concurrent writer's lock: of identical concurrent calls one writes (and one
    event), the others find nothing to change.
    """
    cluster_id = await conn.scalar(
        sa.update(clusters)
        .where(clusters.c.name == name, sa.or_(*(clusters.c[k] != v for k, v in flags.items())))
        .values(**flags, version=clusters.c.version + 1)
        .returning(clusters.c.id)
    )
    if cluster_id is None:
        if await conn.scalar(sa.select(clusters.c.id).where(clusters.c.name == name)) is None:
            raise NotFound("cluster", name)
        return
    await add_event(conn, kind="Cluster", reason=reason, cluster_id=cluster_id, data=dict(flags))
