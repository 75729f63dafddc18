"""Each replica's latest pod as its cluster reports it, and the events its changes make.

Written set-wise with a status report (`agents.apply_statuses`): one statement stores every
replica of every placement the report names and returns what each row held before, so the
events (a failure, a new reason) are computed here without a query per job. A row never goes
back to an earlier attempt (a late report of one is ignored), and a replica an elastic resize
removed from the placement (an agent's report that crossed the resize) is neither stored nor
told: it did not fail, it was given back.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.events import NewEvent
from federation.store.tables import replica_status
from federation.wire.agent import PodPhase, ReplicaFailure, ReplicaStatus

# reasons of a pod waiting for the scheduler: said by the job's own reason and events already
SCHEDULING = frozenset({"Unschedulable", "SchedulingGated", "SchedulerError"})
# reasons the kubelet alternates between while it retries: one event for the pair, not one a flip
SAME_AS = {"ErrImagePull": "ImagePullBackOff"}


def _kind(reason: str) -> str:
    return SAME_AS.get(reason, reason)


@dataclass(frozen=True)
class Reported:
    """The replicas of one placement a report names."""

    job_id: uuid.UUID
    epoch: int
    replicas: Sequence[ReplicaStatus]


_RECORD = sa.text(
    """
    WITH v AS (
        SELECT * FROM jsonb_to_recordset(:rows) AS v(
            n int, job_id uuid, epoch bigint, task text, replica int, attempt int, pod text,
            node text, phase text, exit_code int, reason text, restarts int, message text,
            last jsonb)
        WHERE NOT EXISTS (
            SELECT 1 FROM placements p
            WHERE p.job_id = v.job_id AND p.epoch = v.epoch AND p.state = 'Active'
              AND (p.assignment -> 'replicas' ->> v.task)::int <= v.replica
        )
    ), old AS (
        SELECT r.job_id, r.epoch, r.task, r.replica, r.attempt, r.phase, r.reason
        FROM replica_status r JOIN v USING (job_id, epoch, task, replica)
    ), written AS (
        INSERT INTO replica_status AS r (job_id, epoch, task, replica, attempt, pod, node,
                                         phase, exit_code, reason, restarts, message, last)
        SELECT job_id, epoch, task, replica, attempt, pod, node, phase, exit_code, reason,
               restarts, message, last
        FROM v
        ON CONFLICT (job_id, epoch, task, replica) DO UPDATE SET
            attempt = excluded.attempt, pod = excluded.pod, node = excluded.node,
            phase = excluded.phase, exit_code = excluded.exit_code, reason = excluded.reason,
            restarts = excluded.restarts, message = excluded.message, last = excluded.last,
            updated_at = now()
        WHERE r.attempt <= excluded.attempt
    )
    SELECT v.n, old.attempt, old.phase, old.reason
    FROM v LEFT JOIN old USING (job_id, epoch, task, replica)
    ORDER BY v.n
    """
).bindparams(sa.bindparam("rows", type_=JSONB))


@dataclass(frozen=True)
class _Before:
    attempt: int
    phase: str
    reason: str


def _row(n: int, job_id: uuid.UUID, epoch: int, r: ReplicaStatus) -> dict[str, Any]:
    return {
        "n": n,
        "job_id": str(job_id),
        "epoch": epoch,
        "task": r.task,
        "replica": r.replica,
        "attempt": r.attempt,
        "pod": r.pod,
        "node": r.node,
        "phase": r.phase,
        "exit_code": r.exit_code,
        "reason": r.reason,
        "restarts": r.restarts,
        "message": r.message,
        "last": r.last.model_dump(mode="json", by_alias=True) if r.last else None,
    }


def _said(reason: str, exit_code: int | None) -> str:
    code = f", exit code {exit_code}" if exit_code is not None else ""
    return f"{reason or 'Error'}{code}"


def _event(
    reason: str,
    message: str,
    job_id: uuid.UUID,
    epoch: int,
    replica: ReplicaStatus,
    pod: ReplicaStatus | ReplicaFailure,
) -> NewEvent:
    """An event of one of `replica`'s attempts (`pod`: the attempt it is about)."""
    return NewEvent(
        kind="Job",
        reason=reason,
        message=message,
        job_id=job_id,
        data={
            "epoch": epoch,
            "task": replica.task,
            "replica": replica.replica,
            "attempt": pod.attempt,
            "pod": pod.pod,
            "node": pod.node,
            "exitCode": pod.exit_code,
            "reason": pod.reason,
        },
    )


def _told_failed(old: _Before | None, attempt: int) -> bool:
    """Whether the stored row already said that `attempt` failed (or is past it)."""
    return old is not None and (
        old.attempt > attempt or (old.attempt == attempt and old.phase == "Failed")
    )


def _events(job_id: uuid.UUID, epoch: int, r: ReplicaStatus, old: _Before | None) -> list[NewEvent]:
    """What a replica's new status says that its stored one did not: the failure of the
    attempt it replaced (unless already told), its own failure, or a new reason."""
    out = []
    name = f"{r.task}-{r.replica}"
    last = r.last
    if last is not None and not _told_failed(old, last.attempt):
        out.append(
            _event(
                "ReplicaFailed",
                f"{name} attempt {last.attempt} (pod {last.pod}): "
                f"{_said(last.reason, last.exit_code)}; run again as attempt {r.attempt}",
                job_id,
                epoch,
                r,
                last,
            )
        )
    detail = f": {r.message}" if r.message else ""
    if r.phase == "Failed":
        if _told_failed(old, r.attempt):
            return out
        said = _said(r.reason, r.exit_code)
        message = f"{name} attempt {r.attempt} (pod {r.pod}): {said}{detail}"
        out.append(_event("ReplicaFailed", message, job_id, epoch, r, r))
    elif r.reason and r.reason not in SCHEDULING:
        if old is not None and (old.attempt, _kind(old.reason)) == (r.attempt, _kind(r.reason)):
            return out
        message = f"{name} attempt {r.attempt} (pod {r.pod}): {r.reason}{detail}"
        out.append(_event("ReplicaReason", message, job_id, epoch, r, r))
    return out


async def record(conn: AsyncConnection, reported: Sequence[Reported]) -> list[NewEvent]:
    """Store the replicas' statuses in one statement; return the events their changes make,
    in report order (the caller writes them, with its own, in its transaction)."""
    rows = [(p, r) for p in reported for r in p.replicas]
    if not rows:
        return []
    result = await conn.execute(
        _RECORD, {"rows": [_row(n, p.job_id, p.epoch, r) for n, (p, r) in enumerate(rows)]}
    )
    before = {  # of the replicas the placements hold: None when new
        row.n: _Before(row.attempt, row.phase, row.reason) if row.attempt is not None else None
        for row in result
    }
    return [
        e
        for n, (p, r) in enumerate(rows)
        if n in before
        for e in _events(p.job_id, p.epoch, r, before[n])
    ]


@dataclass(frozen=True)
class Replica:
    """A replica's stored status."""

    task: str
    replica: int
    attempt: int
    pod: str
    node: str
    phase: PodPhase
    exit_code: int | None
    reason: str
    restarts: int
    message: str
    last: dict[str, Any] | None
    updated_at: datetime


async def of_job(conn: AsyncConnection, job_id: uuid.UUID, epoch: int) -> tuple[list[Replica], int]:
    """The replicas of the job's placement `epoch`, by task and index, and the job's attempts:
    over all its placements, the highest attempt of each (a placement whose pods ran counts
    one, and each run again in place one more)."""
    c = replica_status.c
    rows = await conn.execute(
        sa.select(*(col for col in replica_status.c if col.name not in ("job_id", "epoch")))
        .where(c.job_id == job_id, c.epoch == epoch)
        .order_by(c.task, c.replica)
    )
    replicas = [Replica(**r._mapping) for r in rows]
    per_epoch = (
        sa.select(sa.func.max(c.attempt).label("top"))
        .where(c.job_id == job_id)
        .group_by(c.epoch)
        .subquery()
    )
    attempts = await conn.scalar(sa.select(sa.func.coalesce(sa.func.sum(per_epoch.c.top), 0)))
    return replicas, int(attempts or 0)
