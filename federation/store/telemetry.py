"""Live device telemetry: the latest exporter reading per device, and what reads it.

An agent reports the readings that changed (`federation.wire.telemetry`); a reading that newly
carries a fatal error records a `DeviceFailed` event on the cluster and on every job the agent
says holds the device (their failure policy acts on it), one that no longer does a
`DeviceRecovered` event. Taking the device out of service is the inventory's part: the agent
reports it unhealthy there at the same time.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.events import NewEvent, add_events
from federation.store.tables import clusters, device_telemetry, devices, jobs
from federation.wire.telemetry import DeviceTelemetry, TelemetryAck, TelemetryReport

# a device's latest reading, to outer-join onto `devices` (a device may have none)
DEVICE_READING = sa.and_(
    *(device_telemetry.c[k] == devices.c[k] for k in ("cluster_id", "node_name", "flavor", "index"))
)


def _row(cluster_id: uuid.UUID, d: DeviceTelemetry) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "node_name": d.node,
        "flavor": d.flavor,
        "index": d.index,
        "utilization": d.utilization,
        "memory_used_mib": d.memory_used_mib,
        "memory_total_mib": d.memory_total_mib,
        "temperature_c": d.temperature_c,
        "fault": d.fault,
    }


_READING = ("utilization", "memory_used_mib", "memory_total_mib", "temperature_c", "fault")


async def apply_telemetry(
    conn: AsyncConnection, cluster_id: uuid.UUID, report: TelemetryReport
) -> TelemetryAck:
    """Store the readings (a full report drops the cluster's others) and record fault events."""
    t = device_telemetry
    # the devices in fault now: only they can heal, or fail with another fault (a cluster's
    # thousands of healthy readings are not read on every report)
    known: dict[tuple[str, str, int], str] = {
        (r.node_name, r.flavor, r._mapping["index"]): r.fault
        for r in await conn.execute(
            sa.select(t.c.node_name, t.c.flavor, t.c.index, t.c.fault).where(
                t.c.cluster_id == cluster_id, t.c.fault != ""
            )
        )
    }
    if report.full:
        await conn.execute(sa.delete(t).where(t.c.cluster_id == cluster_id))
    if report.devices:
        stmt = pg_insert(t)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[t.c.cluster_id, t.c.node_name, t.c.flavor, t.c.index],
                set_={**{c: stmt.excluded[c] for c in _READING}, "reported_at": sa.func.now()},
            ),
            [_row(cluster_id, d) for d in report.devices],
        )
    found = [d for d in report.devices if d.fault and d.fault != known.get(d.key, "")]
    healed = [d for d in report.devices if not d.fault and known.get(d.key)]
    asked = {j for d in found for j in d.jobs}
    held = (
        set(
            await conn.scalars(
                sa.select(jobs.c.id).where(jobs.c.id.in_(asked), jobs.c.cluster_id == cluster_id)
            )
        )
        if asked
        else set()
    )
    await add_events(conn, [e for d in found for e in _fault_events(cluster_id, d, held)])
    await add_events(
        conn,
        [
            NewEvent(
                kind="Cluster",
                reason="DeviceRecovered",
                cluster_id=cluster_id,
                message=f"{d.flavor} device {d.index} on node {d.node} reports no fatal error",
                data={"node": d.node, "flavor": d.flavor, "index": d.index},
            )
            for d in healed
        ],
    )
    await conn.execute(
        sa.update(clusters).where(clusters.c.id == cluster_id).values(telemetry_at=sa.func.now())
    )
    return TelemetryAck(stored=len(report.devices), faults=len(found))


def _fault_events(
    cluster_id: uuid.UUID, d: DeviceTelemetry, held: set[uuid.UUID]
) -> list[NewEvent]:
    """The cluster's event and one per job of this cluster the agent says holds the device."""
    where = f"{d.flavor} device {d.index} on node {d.node}"
    data = {"node": d.node, "flavor": d.flavor, "index": d.index, "fault": d.fault}
    return [
        NewEvent(
            kind="Cluster",
            reason="DeviceFailed",
            cluster_id=cluster_id,
            message=f"{where}: {d.fault}; out of service",
            data=data,
        ),
        *(
            NewEvent(
                kind="Job",
                reason="DeviceFailed",
                job_id=job,
                message=f"{where} failed ({d.fault}) under this job",
                data={**data, "cluster_id": str(cluster_id)},
            )
            for job in d.jobs
            if job in held
        ),
    ]


@dataclass(frozen=True)
class DeviceView:
    """One device of the inventory with its allocation and its latest reading (None: none)."""

    cluster: str
    region: str
    node: str
    flavor: str
    index: int
    healthy: bool
    allocated_milli: int
    memory_mib: int
    utilization: float | None
    memory_used_mib: int | None
    temperature_c: float | None
    fault: str
    reported_at: datetime | None


async def device_views(
    conn: AsyncConnection, cluster: str | None = None, vendor: str | None = None
) -> list[DeviceView]:
    """Every device (of one cluster, of one vendor) with its reading, in cluster, node, flavor,
    index order."""
    t, d = device_telemetry, devices
    query = (
        sa.select(
            clusters.c.name.label("cluster"),
            clusters.c.region,
            d.c.node_name,
            d.c.flavor,
            d.c.index,
            d.c.healthy,
            d.c.used_milli,
            d.c.memory_mib,
            t.c.utilization,
            t.c.memory_used_mib,
            t.c.temperature_c,
            t.c.fault,
            t.c.reported_at,
        )
        .join(clusters, clusters.c.id == d.c.cluster_id)
        .outerjoin(t, DEVICE_READING)
        .order_by(clusters.c.name, d.c.node_name, d.c.flavor, d.c.index)
    )
    if cluster is not None:
        query = query.where(clusters.c.name == cluster)
    if vendor is not None:
        query = query.where(d.c.flavor.startswith(f"{vendor}/", autoescape=True))
    return [
        DeviceView(
            cluster=r.cluster,
            region=r.region,
            node=r.node_name,
            flavor=r.flavor,
            index=r._mapping["index"],
            healthy=r.healthy,
            allocated_milli=r.used_milli,
            memory_mib=r.memory_mib,
            utilization=r.utilization,
            memory_used_mib=r.memory_used_mib,
            temperature_c=r.temperature_c,
            fault=r.fault or "",
            reported_at=r.reported_at,
        )
        for r in await conn.execute(query)
    ]
