"""Write one cycle's decisions: placements, preemptions, pending reasons, rejections.

Each decision runs in a savepoint and re-checks the job's version from the snapshot, so a job
that changed meanwhile (cancelled, say) is skipped without undoing the others.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.controllers.snapshot import Read
from federation.errors import Conflict, IllegalTransition
from federation.scheduling.decisions import CycleResult, Placed, Preempted
from federation.scheduling.model import Placement
from federation.scheduling.status import Status
from federation.store.events import add_event
from federation.store.lifecycle import move_job, open_placement, release_placements
from federation.store.tables import jobs, tasks

log = logging.getLogger(__name__)


@dataclass
class Written:
    """Counts of what a cycle wrote."""

    placed: int = 0
    preempted: int = 0
    pending_updated: int = 0
    rejected: int = 0
    skipped: int = 0
    placements: list[Placement] = field(default_factory=list)  # the written ones


def _reasons(statuses: Mapping[str, Status]) -> dict[str, dict[str, str]]:
    return {
        cluster: {"code": s.code.name.lower(), "reason": str(s), "plugin": s.plugin}
        for cluster, s in statuses.items()
    }


async def _place(conn: AsyncConnection, read: Read, decision: Placed) -> None:
    p = decision.placement
    ref = read.refs[p.job.id]
    cluster_id = read.cluster_ids[p.cluster]
    epoch = ref.epoch + 1
    flavors = {t.name: (p.flavors[i] or None) for i, t in enumerate(p.job.tasks)}
    hints = [
        {"task": p.job.tasks[r.task].name, "replica": n, "node": r.node, "devices": list(r.devices)}
        for n, r in enumerate(p.replicas)
    ]
    await move_job(
        conn,
        ref.id,
        "Placed",
        reason="Placed",
        message=decision.reason,
        data={"cluster": p.cluster, "flavors": flavors, "scores": dict(decision.scores)},
        expected_version=ref.version,
        values={"cluster_id": cluster_id, "epoch": epoch, "pending_reasons": {}},
    )
    await open_placement(conn, ref.id, epoch, cluster_id, {"flavors": flavors, "hints": hints})
    for name, flavor in flavors.items():
        await conn.execute(
            sa.update(tasks)
            .where(tasks.c.job_id == ref.id, tasks.c.name == name)
            .values(flavor=flavor)
        )


async def _preempt(conn: AsyncConnection, read: Read, decision: Preempted, out: Written) -> None:
    preemptor = read.refs[decision.preemptor.id]
    for victim in decision.victims:
        ref = read.refs[victim.job.id]
        await release_placements(conn, ref.id)
        await move_job(
            conn,
            ref.id,
            "Preempting",
            reason="Preempted",
            message=f"evicted for job {preemptor.id} (priority {decision.preemptor.priority})",
            data={"preemptor": str(preemptor.id), "cluster": victim.cluster},
            expected_version=ref.version,
        )
    await add_event(
        conn,
        kind="Job",
        reason="Preempting",
        message=decision.reason,
        job_id=preemptor.id,
        data={
            "cluster": decision.reservation.cluster,
            "victims": [v.job.id for v in decision.victims],
        },
    )


async def write(conn: AsyncConnection, read: Read, result: CycleResult) -> Written:
    """Persist `result` (decided on `read`) in the caller's transaction."""
    out = Written()

    async def guarded(job_id: str, action: Any) -> bool:
        try:
            async with conn.begin_nested():
                await action
            return True
        except (Conflict, IllegalTransition) as exc:
            log.info("skipping decision on job %s: %s", job_id, exc)
            out.skipped += 1
            return False

    for placed in result.placed:
        if await guarded(placed.placement.job.id, _place(conn, read, placed)):
            out.placed += 1
            out.placements.append(placed.placement)
    for preempted in result.preempted:
        out.preempted += await guarded(preempted.preemptor.id, _preempt(conn, read, preempted, out))
    for rejected in result.rejected:
        ref = read.refs[rejected.job.id]
        out.rejected += await guarded(
            rejected.job.id,
            move_job(
                conn,
                ref.id,
                "Failed",
                reason="Unschedulable",
                message=f"no cluster of the fleet can ever run this job: {rejected.message}",
                expected_version=ref.version,
                values={"pending_reasons": _reasons(rejected.reasons)},
            ),
        )
    for job_id, why in read.invalid.items():
        ref = read.refs[job_id]
        if ref.state == "Queued":
            out.rejected += await guarded(
                job_id,
                move_job(
                    conn,
                    ref.id,
                    "Failed",
                    reason="InvalidFlavor",
                    message=why,
                    expected_version=ref.version,
                ),
            )
    for pending in result.pending:
        ref = read.refs[pending.job.id]
        reasons = _reasons(pending.reasons)
        if reasons != ref.pending_reasons or pending.message != ref.reason:
            await conn.execute(
                sa.update(jobs)
                .where(jobs.c.id == ref.id, jobs.c.version == ref.version)
                .values(pending_reasons=reasons, reason=pending.message[:2000])
            )
            out.pending_updated += 1
    return out
