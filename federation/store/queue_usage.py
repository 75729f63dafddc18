"""A queue's current use of its quota, from the jobs that hold capacity.

Charged with the scheduling core's own `quota.demand` over the compiled jobs, the flavors
their placements chose and the replicas they hold (an elastic job's, from its active
placement), so the usage the API reports is the ledger the scheduler enforces.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob, held_replicas, quota_charge
from federation.store.lifecycle import HOLDING_STATES
from federation.store.tables import jobs, placements, tasks

Usage = tuple[dict[str, int], dict[str, int]]  # resource use, job counts by state


async def queue_usages(
    conn: AsyncConnection, queue_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Usage]:
    """Per queue: (resource use of jobs holding capacity, job counts by state), in two
    queries however many queues."""
    ids = list(queue_ids)
    counts: dict[uuid.UUID, dict[str, int]] = {q: {} for q in ids}
    for queue_id, state, n in await conn.execute(
        sa.select(jobs.c.queue_id, jobs.c.state, sa.func.count())
        .where(jobs.c.queue_id.in_(ids))
        .group_by(jobs.c.queue_id, jobs.c.state)
    ):
        counts[queue_id][state] = int(n)
    rows = await conn.execute(
        sa.select(
            jobs.c.queue_id,
            jobs.c.id,
            jobs.c.compiled,
            placements.c.assignment,
            tasks.c.name,
            tasks.c.flavor,
        )
        .join(tasks, tasks.c.job_id == jobs.c.id)
        .outerjoin(
            placements,
            sa.and_(
                placements.c.job_id == jobs.c.id,
                placements.c.epoch == jobs.c.epoch,
                placements.c.state == "Active",
            ),
        )
        .where(
            jobs.c.queue_id.in_(ids),
            jobs.c.state.in_(HOLDING_STATES),
            jobs.c.compiled.is_not(None),
        )
    )
    compiled: dict[uuid.UUID, tuple[uuid.UUID, CompiledJob, dict[str, int]]] = {}
    flavors: dict[uuid.UUID, dict[str, str | None]] = defaultdict(dict)
    for queue_id, job_id, raw, assignment, task, flavor in rows:
        if job_id not in compiled:
            held = held_replicas(assignment) if assignment is not None else {}
            compiled[job_id] = queue_id, CompiledJob.model_validate(raw), held
        flavors[job_id][task] = flavor
    usage: dict[uuid.UUID, Counter[str]] = {q: Counter() for q in ids}
    for job_id, (queue_id, job, held) in compiled.items():
        usage[queue_id].update(quota_charge(job, flavors[job_id], held))
    return {q: (dict(usage[q]), counts[q]) for q in ids}
