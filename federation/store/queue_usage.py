"""A queue's current use of its quota, from the jobs that hold capacity.

Charged with the scheduling core's own `quota.demand` over the compiled jobs and the flavors
their placements chose, so the usage the API reports is the ledger the scheduler enforces.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob, quota_charge
from federation.store.lifecycle import HOLDING_STATES
from federation.store.tables import jobs, tasks


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
        sa.select(jobs.c.id, jobs.c.compiled, tasks.c.name, tasks.c.flavor)
        .join(tasks, tasks.c.job_id == jobs.c.id)
        .where(
            jobs.c.queue_id == queue_id,
            jobs.c.state.in_(HOLDING_STATES),
            jobs.c.compiled.is_not(None),
        )
    )
    compiled: dict[uuid.UUID, CompiledJob] = {}
    flavors: dict[uuid.UUID, dict[str, str | None]] = defaultdict(dict)
    for job_id, raw, task, flavor in rows:
        if job_id not in compiled:
            compiled[job_id] = CompiledJob.model_validate(raw)
        flavors[job_id][task] = flavor
    usage: Counter[str] = Counter()
    for job_id, job in compiled.items():
        usage.update(quota_charge(job, flavors[job_id]))
    return dict(usage), counts
