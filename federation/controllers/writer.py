"""Write one cycle's decisions: placements, preemptions, pending reasons, rejections.

Every decision re-checks the job's version from the snapshot, so a job that changed meanwhile
(cancelled, say) is skipped without undoing the others. Placements and pending reasons are
written set-wise, a few statements per cycle whatever their number; the rarer preemptions and
rejections each run in a savepoint.

A pending job's reasons are written at once when their kind changes (another cluster, code or
plugin), and when only their numbers change (how many nodes lack what, how far a quota is over)
at most every `REASONS_REFRESH_S` (`ReasonsWritten`): every write changes the job's row, which
the next cycle then reads again, so rewriting the counts of thousands of waiting jobs each cycle
cost the loop more than deciding them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.controllers.snapshot import Read
from federation.errors import Conflict, IllegalTransition
from federation.scheduling.decisions import CycleResult, Placed, Preempted, Resized
from federation.scheduling.model import Placement
from federation.scheduling.status import Status
from federation.store.events import add_event
from federation.store.lifecycle import (
    NewPlacement,
    move_job,
    place_jobs,
    release_placements,
    resize_placement,
)

log = logging.getLogger(__name__)

REASONS_REFRESH_S = 30.0  # the longest a pending reason's numbers stay stale


@dataclass
class Written:
    """Counts of what a cycle wrote."""

    placed: int = 0
    preempted: int = 0
    pending_updated: int = 0
    rejected: int = 0
    resized: int = 0
    skipped: int = 0
    placements: list[Placement] = field(default_factory=list, repr=False)  # the written ones


def _reasons(statuses: Mapping[str, Status]) -> dict[str, dict[str, str]]:
    return {
        cluster: {"code": s.code.name.lower(), "reason": str(s), "plugin": s.plugin}
        for cluster, s in statuses.items()
    }


def _kinds(reasons: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What a pending reason says, numbers aside: each cluster's code and plugin."""
    return {cluster: (r.get("code"), r.get("plugin")) for cluster, r in reasons.items()}


class ReasonsWritten:
    """When each pending job's reasons were last written (the loop's memory across cycles;
    a new leader writes every changed reason once)."""

    def __init__(
        self, refresh_s: float = REASONS_REFRESH_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.refresh_s = refresh_s
        self.clock = clock
        self._at: dict[str, float] = {}  # job id -> when its reasons were last written

    def due(self, job_id: str, written: Mapping[str, Any], reasons: Mapping[str, Any]) -> bool:
        """Whether `reasons` replace `written` now: a new kind at once, numbers once stale."""
        if reasons == written:
            return False
        if _kinds(reasons) != _kinds(written):
            return True
        return self.clock() - self._at.get(job_id, -float("inf")) >= self.refresh_s

    def wrote(self, written: list[str], pending: set[str]) -> None:
        """Note that `written` jobs' reasons were written now; forget jobs not `pending`."""
        now = self.clock()
        self._at = {j: t for j, t in self._at.items() if j in pending}
        self._at.update((job_id, now) for job_id in written)


def _hints(p: Placement) -> list[dict[str, Any]]:
    """The hub's plan per replica (task, replica, node, devices); each task's replicas count
    from 0: the agent looks a hint up by task and replica."""
    numbered: Counter[int] = Counter()
    hints: list[dict[str, Any]] = []
    for r in p.replicas:
        name = p.job.tasks[r.task].name
        hints.append(
            {"task": name, "replica": numbered[r.task], "node": r.node, "devices": list(r.devices)}
        )
        numbered[r.task] += 1
    return hints


def _placement(read: Read, decision: Placed) -> NewPlacement:
    p = decision.placement
    ref = read.refs[p.job.id]
    flavors = {t.name: (p.flavors[i] or None) for i, t in enumerate(p.job.tasks)}
    hints = _hints(p)
    return NewPlacement(
        job_id=ref.id,
        version=ref.version,
        cluster_id=read.cluster_ids[p.cluster],
        epoch=ref.epoch + 1,
        flavors=flavors,
        hints=hints,
        message=decision.reason,
        data={
            "cluster": p.cluster,
            "flavors": flavors,
            "replicas": hints,  # the hub's plan, node and devices per replica
            "scores": dict(decision.scores),
        },
    )


_PENDING = sa.text(
    """
    UPDATE jobs SET pending_reasons = v.reasons, reason = v.reason
    FROM jsonb_to_recordset(:items) AS v(id uuid, version int, reasons jsonb, reason text)
    WHERE jobs.id = v.id AND jobs.version = v.version
    """
).bindparams(sa.bindparam("items", type_=JSONB))


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


async def _resize(
    conn: AsyncConnection, read: Read, resized: Resized, revisions: dict[str, int]
) -> bool:
    """Write an elastic job's new replica counts to its placement, with a `Resized` event;
    `revisions` has the placement revisions this cycle's earlier resizes wrote."""
    p = resized.placement
    ref = read.refs[p.job.id]
    counts = {t.name: t.replicas for t in p.job.tasks if t.elastic is not None}
    revision = revisions.get(p.job.id, ref.revision)
    done = await resize_placement(conn, ref.id, ref.epoch, revision, counts, _hints(p))
    if done is not None:
        revisions[p.job.id] = done
        await add_event(
            conn,
            kind="Job",
            reason="Resized",
            message=resized.message,
            job_id=ref.id,
            data={
                "cluster": p.cluster,
                "replicas": {t: new for t, (_, new) in resized.counts.items()},
                "before": {t: old for t, (old, _) in resized.counts.items()},
                "why": resized.reason,
            },
        )
    return done is not None


async def write(
    conn: AsyncConnection, read: Read, result: CycleResult, reasons_written: ReasonsWritten
) -> Written:
    """Persist `result` (decided on `read`) in the caller's transaction; pending reasons as
    `reasons_written` finds them due."""
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

    wanted = [_placement(read, placed) for placed in result.placed]
    done = await place_jobs(conn, wanted)
    out.placed = len(done)
    out.skipped += len(wanted) - len(done)
    placed = [p.placement for p in result.placed]
    out.placements = [p for p in placed if read.refs[p.job.id].id in done]
    for preempted in result.preempted:
        out.preempted += await guarded(preempted.preemptor.id, _preempt(conn, read, preempted, out))
    revisions: dict[str, int] = {}  # a job resized twice: the second starts from the first
    for resized in result.resized:
        out.resized += await _resize(conn, read, resized, revisions)
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
    changed, ids = [], []
    for pending in result.pending:
        ref = read.refs[pending.job.id]
        reasons = _reasons(pending.reasons)
        if reasons_written.due(pending.job.id, ref.pending_reasons, reasons):
            ids.append(pending.job.id)
            changed.append(
                {
                    "id": str(ref.id),
                    "version": ref.version,
                    "reasons": reasons,
                    "reason": pending.message[:2000],
                }
            )
    if changed:
        await conn.execute(_PENDING, {"items": changed})
        out.pending_updated = len(changed)
    reasons_written.wrote(ids, {p.job.id for p in result.pending})
    return out
