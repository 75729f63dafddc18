"""Allocation over time: samples of every cluster's devices and allocation by flavor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.clusters import summaries
from federation.store.tables import allocation_history


@dataclass(frozen=True)
class Sample:
    """One cluster's devices of one flavor at one time."""

    taken_at: datetime
    cluster: str
    flavor: str
    total: int
    healthy: int
    allocated_milli: int


async def record(conn: AsyncConnection, now: datetime, keep: timedelta) -> int:
    """Store a sample of every cluster and flavor taken at `now` and drop those older than
    `keep`; the number stored."""
    rows = [
        {
            "taken_at": now,
            "cluster": c.name,
            "flavor": f.flavor,
            "total": f.total,
            "healthy": f.healthy,
            "allocated_milli": f.allocated_milli,
        }
        for c in await summaries(conn)
        for f in c.flavors
    ]
    if rows:
        await conn.execute(allocation_history.insert(), rows)
    await conn.execute(
        allocation_history.delete().where(allocation_history.c.taken_at < now - keep)
    )
    return len(rows)


async def read(conn: AsyncConnection, since: datetime) -> list[Sample]:
    """Samples taken at or after `since`, oldest first."""
    h = allocation_history.c
    rows = await conn.execute(
        sa.select(allocation_history)
        .where(h.taken_at >= since)
        .order_by(h.taken_at, h.cluster, h.flavor)
    )
    return [Sample(**r._mapping) for r in rows]
