"""A queue's current use of its quota, from the jobs that hold capacity."""

from __future__ import annotations

import uuid
from collections import Counter

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.demand import task_demand
from federation.store.tables import jobs, tasks

HOLDING_STATES = ("Placed", "Dispatched", "Running", "Preempting")


async def queue_usage(
    conn: AsyncConnection, queue_id: uuid.UUID
) -> tuple[dict[str, int], dict[str, int]]:
    """(resource use of jobs holding capacity, job counts by state) of one queue."""
    counts = {
        state: int(n)
        for state, n in await conn.execute(
            sa.select(jobs.c.state, sa.func.count())
            .where(jobs.c.queue_id == queue_id)
            .group_by(jobs.c.state)
        )
    }
    rows = await conn.execute(
        sa.select(tasks.c.spec, tasks.c.replicas, tasks.c.flavor)
        .join(jobs, jobs.c.id == tasks.c.job_id)
        .where(jobs.c.queue_id == queue_id, jobs.c.state.in_(HOLDING_STATES))
    )
    usage: Counter[str] = Counter()
    for spec, replicas, flavor in rows:
        usage.update(task_demand(spec, replicas, flavor))
    return dict(usage), counts
