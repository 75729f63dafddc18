"""Lifecycles of jobs, placements and clusters: their states, transitions and sets, and the
only functions that write a state.

Every state change goes through here (a unit test checks that no other module writes a
`state` column): the row is locked, the transition checked against its table, the row updated
with a new version, and an event written beside it in the caller's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import Conflict, IllegalTransition, NotFound
from federation.store.events import NewEvent, add_event, add_events
from federation.store.listener import PLACEMENTS, notify
from federation.store.records import Job
from federation.store.tables import clusters, jobs, placements, replica_status

JOB_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Queued": frozenset({"Placed", "Cancelled", "Failed"}),
    # a released placement (gang timeout, cluster lost, drain) sends the job back to the queue
    "Placed": frozenset({"Dispatched", "Queued", "Preempting", "Cancelled", "Failed"}),
    "Dispatched": frozenset({"Running", "Queued", "Preempting", "Cancelled", "Failed"}),
    "Running": frozenset({"Succeeded", "Failed", "Preempting", "Cancelled", "Queued"}),
    "Preempting": frozenset({"Queued", "Cancelled", "Failed"}),
    "Succeeded": frozenset(),
    "Failed": frozenset(),
    "Cancelled": frozenset(),
}
TERMINAL_JOB_STATES = frozenset(s for s, nxt in JOB_TRANSITIONS.items() if not nxt)
# jobs that hold capacity (charged against quota, preemption candidates)
HOLDING_STATES = ("Placed", "Dispatched", "Running", "Preempting")
# placed, but the cluster does not report their use yet: reservations in the snapshot
UNCOUNTED_STATES = ("Placed", "Dispatched")

PLACEMENT_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Active": frozenset({"Released"}),
    "Released": frozenset(),
}

CLUSTER_TRANSITIONS: Mapping[str, frozenset[str]] = {
    "Pending": frozenset({"Ready"}),
    "Ready": frozenset({"NotReady", "Offline"}),  # Offline at once: revoked
    "NotReady": frozenset({"Ready", "Offline"}),
    "Offline": frozenset({"Ready"}),
}

_UUIDS = ARRAY(UUID(as_uuid=True))

_TABLES = {
    "job": JOB_TRANSITIONS,
    "placement": PLACEMENT_TRANSITIONS,
    "cluster": CLUSTER_TRANSITIONS,
}


def transition(kind: str, current: str, target: str) -> str:
    """Return `target` if a `kind` ("job", "placement", "cluster") may go there from `current`;
    raise IllegalTransition otherwise."""
    if target not in _TABLES[kind].get(current, frozenset()):
        raise IllegalTransition(kind, current, target)
    return target


def may_move(current: str, target: str) -> bool:
    """Whether a job may go from `current` to `target`."""
    return target in JOB_TRANSITIONS.get(current, frozenset())


# --- jobs ---------------------------------------------------------------------------------

# what a new job's row is read back with: every field of a `Job` but those its submitter gave
# (labels and spec: not decoded again) or that come from joined tables (names)
SUBMITTER_GIVES = frozenset({"labels", "spec", "tenant", "queue", "cluster"})
_RETURNED = ", ".join(f.name for f in fields(Job) if f.name not in SUBMITTER_GIVES)

# a job's birth: submissions (and service shards) enter the queue (a repeated idempotency key
# is skipped)
INSERT_QUEUED_JOBS = sa.text(
    f"""
    INSERT INTO jobs (id, tenant_id, queue_id, name, labels, spec, compiled, state, priority,
                      priority_class, preemptible, idempotency_key, request_hash, service_id,
                      replica_cap)
    SELECT r.id, r.tenant_id, r.queue_id, r.name, r.labels, r.spec, r.compiled, 'Queued',
           r.priority, r.priority_class, r.preemptible, r.idempotency_key, r.request_hash,
           r.service_id, r.replica_cap
    FROM jsonb_to_recordset(:rows) AS r(
        id uuid, tenant_id uuid, queue_id uuid, name text, labels jsonb, spec jsonb,
        compiled jsonb, priority int, priority_class text, preemptible boolean,
        idempotency_key text, request_hash text, service_id uuid, replica_cap int, n int)
    ORDER BY r.n
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING {_RETURNED}
    """
).bindparams(sa.bindparam("rows", type_=JSONB))


async def move_job(
    conn: AsyncConnection,
    job_id: uuid.UUID,
    target: str,
    *,
    reason: str,
    message: str = "",
    note: str | None = None,
    data: Mapping[str, Any] | None = None,
    expected_version: int | None = None,
    tenant_id: uuid.UUID | None = None,
    values: Mapping[str, Any] | None = None,
) -> str:
    """Move a job to `target` under a row lock, checking the lifecycle and the version;
    return the state it came from. `reason` names the event; the job's own reason is `note`
    (a sentence for explain) when given, else `reason`."""
    query = (
        sa.select(jobs.c.state, jobs.c.version)
        .where(jobs.c.id == job_id)
        .with_for_update(
            key_share=True  # FOR NO KEY UPDATE: inserts that only reference the job do not wait
        )
    )
    if tenant_id is not None:
        query = query.where(jobs.c.tenant_id == tenant_id)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        raise NotFound("job", str(job_id))
    if expected_version is not None and row.version != expected_version:
        raise Conflict(f"job changed meanwhile: version is {row.version}, not {expected_version}")
    transition("job", row.state, target)
    stamps: dict[str, Any] = {}
    if target == "Running":
        stamps["started_at"] = sa.func.coalesce(jobs.c.started_at, sa.func.now())
    if target in TERMINAL_JOB_STATES:
        stamps["finished_at"] = sa.func.now()
    await conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            state=target,
            reason=(note or reason)[:2000],
            version=jobs.c.version + 1,
            updated_at=sa.func.now(),
            **stamps,
            **dict(values or {}),
        )
    )
    await add_event(
        conn,
        kind="Job",
        reason=reason,
        message=message or f"{row.state} → {target}",
        job_id=job_id,
        data={"from": row.state, "to": target, **dict(data or {})},
    )
    return str(row.state)


@dataclass(frozen=True)
class Step:
    """One transition of a job: its target, and the reason, message and data of its event."""

    target: str
    reason: str
    message: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobChange:
    """What one job, read under its row lock in `state` at `version`, goes through: `steps`
    in order, then its own columns. `reason` is the job's reason (a sentence for explain; None:
    the last step's); `before` are events of no transition, written ahead of the steps'."""

    job_id: uuid.UUID
    version: int
    state: str
    steps: Sequence[Step] = ()
    reason: str | None = None
    before: Sequence[NewEvent] = ()
    clear_cluster: bool = False
    pending_reasons: Mapping[str, Any] | None = None
    placement_failures: int | None = None
    not_before_s: float | None = None  # no re-placement for this long from now


_CHANGE = sa.text(
    """
    UPDATE jobs SET
        state = v.state,
        reason = coalesce(v.reason, jobs.reason),
        version = jobs.version + v.steps,
        updated_at = CASE WHEN v.steps > 0 THEN now() ELSE jobs.updated_at END,
        started_at = CASE WHEN v.started THEN coalesce(jobs.started_at, now())
                          ELSE jobs.started_at END,
        finished_at = CASE WHEN v.finished THEN now() ELSE jobs.finished_at END,
        cluster_id = CASE WHEN v.clear_cluster THEN NULL ELSE jobs.cluster_id END,
        pending_reasons = coalesce(v.pending_reasons, jobs.pending_reasons),
        placement_failures = coalesce(v.placement_failures, jobs.placement_failures),
        not_before = CASE WHEN v.not_before_s IS NULL THEN jobs.not_before
                          ELSE now() + make_interval(secs => v.not_before_s) END
    FROM jsonb_to_recordset(:items) AS v(
        id uuid, version int, state text, reason text, steps int, started boolean,
        finished boolean, clear_cluster boolean, pending_reasons jsonb, placement_failures int,
        not_before_s float8)
    WHERE jobs.id = v.id AND jobs.version = v.version
    RETURNING jobs.id
    """
).bindparams(sa.bindparam("items", type_=JSONB))


def _change_row(change: JobChange) -> dict[str, Any]:
    state = change.state
    for step in change.steps:
        state = transition("job", state, step.target)
    reason = change.reason
    if reason is None and change.steps:
        reason = change.steps[-1].reason
    row: dict[str, Any] = {
        "id": str(change.job_id),
        "version": change.version,
        "state": state,
        "reason": reason[:2000] if reason is not None else None,
        "steps": len(change.steps),
        "started": any(s.target == "Running" for s in change.steps),
        "finished": any(s.target in TERMINAL_JOB_STATES for s in change.steps),
        "clear_cluster": change.clear_cluster,
        "placement_failures": change.placement_failures,
        "not_before_s": change.not_before_s,
    }
    if change.pending_reasons is not None:  # absent, not JSON null: the column keeps its value
        row["pending_reasons"] = dict(change.pending_reasons)
    return row


def _step_events(change: JobChange) -> list[NewEvent]:
    out = list(change.before)
    state = change.state
    for step in change.steps:
        out.append(
            NewEvent(
                kind="Job",
                reason=step.reason,
                message=step.message or f"{state} → {step.target}",
                job_id=change.job_id,
                data={"from": state, "to": step.target, **dict(step.data)},
            )
        )
        state = step.target
    return out


async def change_jobs(conn: AsyncConnection, changes: Sequence[JobChange]) -> None:
    """Apply many jobs' changes in two statements (their rows, then their events), each
    transition checked against the lifecycle and each row against the version it was read at
    (the caller holds the rows' locks: a moved version is a Conflict)."""
    if not changes:
        return
    rows = [_change_row(c) for c in changes]
    written = await conn.execute(_CHANGE, {"items": rows})
    missing = {c.job_id for c in changes} - {r.id for r in written}
    if missing:
        raise Conflict(f"{len(missing)} jobs changed meanwhile (e.g. {next(iter(missing))})")
    await add_events(conn, [e for c in changes for e in _step_events(c)])


# --- placements ---------------------------------------------------------------------------


async def release_placements(conn: AsyncConnection, *job_ids: uuid.UUID) -> None:
    """Mark the jobs' active placements released (one statement, however many jobs), with a
    new revision so agents notice."""
    if not job_ids:
        return
    released = await conn.execute(
        sa.update(placements)
        .where(
            placements.c.job_id == sa.any_(sa.bindparam("ids", list(job_ids), type_=_UUIDS)),
            placements.c.state == "Active",
        )
        .values(
            state=transition("placement", "Active", "Released"),
            released_at=sa.func.now(),
            revision=sa.func.nextval("placement_revision_seq"),
        )
        .returning(placements.c.cluster_id)
    )
    for cluster_id in {r.cluster_id for r in released}:
        await notify(conn, PLACEMENTS, str(cluster_id))


async def resize_placement(
    conn: AsyncConnection,
    job_id: uuid.UUID,
    epoch: int,
    revision: int,
    replicas: Mapping[str, int],
    hints: list[dict[str, Any]],
) -> int | None:
    """Give an elastic job's active placement other replica counts per task (`replicas`) and
    replica hints, with a new revision so its agent adds or removes pods, and forget the
    reported status of the replicas it no longer holds (removed, not failed); return the new
    revision, None when the placement changed since it was read at `revision` (released,
    resized)."""
    changed = await conn.execute(
        sa.update(placements)
        .where(
            placements.c.job_id == job_id,
            placements.c.epoch == epoch,
            placements.c.revision == revision,
            placements.c.state == "Active",
        )
        .values(
            assignment=placements.c.assignment.op("||")(
                sa.cast({"replicas": dict(replicas), "hints": hints}, JSONB)
            ),
            revision=sa.func.nextval("placement_revision_seq"),
        )
        .returning(placements.c.cluster_id, placements.c.revision)
    )
    row = changed.first()
    if row is None:
        return None
    r = replica_status.c
    await conn.execute(
        sa.delete(replica_status).where(
            r.job_id == job_id,
            r.epoch == epoch,
            sa.or_(*(sa.and_(r.task == t, r.replica >= n) for t, n in replicas.items())),
        )
    )
    await notify(conn, PLACEMENTS, str(row.cluster_id))
    return int(row.revision)


async def renew_placements(conn: AsyncConnection, job_ids: Sequence[uuid.UUID]) -> int:
    """Give the jobs' active placements a new revision (one statement), so their agents read
    them again: a service's shard whose compiled form an update replaced gets the new
    template. Returns how many placements were renewed."""
    if not job_ids:
        return 0
    renewed = await conn.execute(
        sa.update(placements)
        .where(
            placements.c.job_id == sa.any_(sa.bindparam("ids", list(job_ids), type_=_UUIDS)),
            placements.c.state == "Active",
        )
        .values(revision=sa.func.nextval("placement_revision_seq"))
        .returning(placements.c.cluster_id)
    )
    clusters_renewed = [r.cluster_id for r in renewed]
    for cluster_id in set(clusters_renewed):
        await notify(conn, PLACEMENTS, str(cluster_id))
    return len(clusters_renewed)


# --- clusters -----------------------------------------------------------------------------


_UNSET: Any = object()
_MAY_BECOME_READY = tuple(s for s, nxt in CLUSTER_TRANSITIONS.items() if "Ready" in nxt)


async def cluster_alive(
    conn: AsyncConnection,
    cluster_id: uuid.UUID,
    *,
    registering: bool,
    problem: str | None = _UNSET,
    **values: Any,
) -> str | None:
    """An agent spoke for its cluster (`problem`: what it says of its kube-apiserver, None when
    reachable; absent: unchanged). It becomes Ready (from Pending only when `registering`)
    unless its apiserver is unreachable; return the state it was in (None: no such cluster, or
    never registered)."""
    # One statement (its row lock lasts only while it runs, not across round trips): the
    # cluster's row as it was, locked, and the update computed from it.
    old = (
        sa.select(clusters.c.id, clusters.c.state, clusters.c.apiserver_problem)
        .where(clusters.c.id == cluster_id)
        .with_for_update(key_share=True)  # no wait behind rows that only reference it
        .cte("old")
    )
    changes: dict[str, Any] = {"last_heartbeat": sa.func.now(), **values}
    reachable: Any = old.c.apiserver_problem.is_(None)
    if problem is not _UNSET:
        changes["apiserver_problem"] = problem[:512] if problem is not None else None
        changes["unreachable_since"] = (
            None
            if problem is None
            else sa.func.coalesce(clusters.c.unreachable_since, sa.func.now())
        )
        reachable = sa.true() if problem is None else sa.false()
    ready = sa.and_(old.c.state.in_(_MAY_BECOME_READY), sa.or_(reachable, old.c.state == "Pending"))
    changes["state"] = sa.case((ready, "Ready"), else_=clusters.c.state)
    changes["version"] = clusters.c.version + sa.case((ready, 1), else_=0)
    heard = [clusters.c.id == old.c.id]
    if not registering:
        heard.append(old.c.state != "Pending")
    was = await conn.scalar(
        sa.update(clusters).where(*heard).values(**changes).returning(old.c.state)
    )
    return str(was) if was is not None else None


async def cluster_revoked(conn: AsyncConnection, cluster_id: uuid.UUID) -> str:
    """A revoked cluster is lost at once (Offline, as if its lease had run out), unless it
    never registered; return the state it was in."""
    state = str(
        await conn.scalar(
            sa.select(clusters.c.state)
            .where(clusters.c.id == cluster_id)
            .with_for_update(key_share=True)
        )
    )
    if state in ("Ready", "NotReady"):
        await conn.execute(
            sa.update(clusters)
            .where(clusters.c.id == cluster_id)
            .values(state=transition("cluster", state, "Offline"), version=clusters.c.version + 1)
        )
    return state


def _older_than(column: Any, after_s: float) -> Any:
    return column < sa.func.now() - sa.func.make_interval(0, 0, 0, 0, 0, 0, after_s)


async def _move_clusters(
    conn: AsyncConnection, current: str, target: str, condition: Any
) -> list[tuple[uuid.UUID, str]]:
    transition("cluster", current, target)
    moved = await conn.execute(
        sa.update(clusters)
        .where(clusters.c.state == current, condition)
        .values(state=target, version=clusters.c.version + 1)
        .returning(clusters.c.id, clusters.c.name)
    )
    return [(r.id, r.name) for r in moved]


def _heard(since: datetime | None) -> Any:
    """When a cluster's agent was last heard, counted from `since` at the earliest."""
    if since is None:
        return clusters.c.last_heartbeat
    return sa.func.greatest(clusters.c.last_heartbeat, since)


async def clusters_silent(
    conn: AsyncConnection,
    current: str,
    target: str,
    after_s: float,
    since: datetime | None = None,
) -> list[tuple[uuid.UUID, str]]:
    """Move clusters in `current` whose agent has been silent for `after_s` (counted from
    `since` at the earliest: a new leader gives every agent a full period) to `target`;
    return (id, name) of those moved."""
    return await _move_clusters(conn, current, target, _older_than(_heard(since), after_s))


async def silent_share(
    conn: AsyncConnection, after_s: float, since: datetime | None = None
) -> tuple[int, int]:
    """(clusters not yet Offline whose agent has been silent for `after_s`, counted as in
    `clusters_silent`; clusters Ready, NotReady or Offline)."""
    silent = sa.and_(clusters.c.state != "Offline", _older_than(_heard(since), after_s))
    row = (
        await conn.execute(
            sa.select(sa.func.count().filter(silent), sa.func.count()).where(
                clusters.c.state.in_(("Ready", "NotReady", "Offline"))
            )
        )
    ).one()
    return int(row[0]), int(row[1])


async def clusters_unreachable(
    conn: AsyncConnection, current: str, target: str, after_s: float
) -> list[tuple[uuid.UUID, str]]:
    """Move clusters in `current` whose agent has said for `after_s` that it cannot reach its
    kube-apiserver to `target`; return (id, name) of those moved."""
    return await _move_clusters(
        conn, current, target, _older_than(clusters.c.unreachable_since, after_s)
    )


# --- batched placement (the scheduling loop's write-back) -----------------------------------


@dataclass(frozen=True)
class NewPlacement:
    """One placement decision of a cycle, for a job read at `version`."""

    job_id: uuid.UUID
    version: int
    cluster_id: uuid.UUID
    epoch: int
    flavors: Mapping[str, str | None]  # task -> flavor
    hints: list[dict[str, Any]]
    message: str
    data: Mapping[str, Any]


_PLACE = sa.text(
    """
    UPDATE jobs SET state = 'Placed', reason = 'Placed', version = jobs.version + 1,
        updated_at = now(), cluster_id = v.cluster_id, epoch = v.epoch,
        pending_reasons = '{}'::jsonb, not_before = NULL
    FROM jsonb_to_recordset(:items) AS v(id uuid, version int, cluster_id uuid, epoch bigint)
    WHERE jobs.id = v.id AND jobs.version = v.version AND jobs.state = 'Queued'
    RETURNING jobs.id
    """
).bindparams(sa.bindparam("items", type_=JSONB))
_OPEN = sa.text(
    """
    WITH p AS (
        INSERT INTO placements (job_id, epoch, cluster_id, assignment, state)
        SELECT v.id, v.epoch, v.cluster_id, v.assignment, 'Active'
        FROM jsonb_to_recordset(:items)
            AS v(id uuid, epoch bigint, cluster_id uuid, assignment jsonb)
    ), e AS (
        INSERT INTO events (job_id, kind, reason, message, data)
        SELECT v.id, 'Job', 'Placed', v.message, v.data
        FROM jsonb_to_recordset(:items) AS v(id uuid, message text, data jsonb)
    )
    UPDATE tasks SET flavor = t.flavor
    FROM jsonb_to_recordset(:tasks) AS t(job_id uuid, name text, flavor text)
    WHERE tasks.job_id = t.job_id AND tasks.name = t.name
    """
).bindparams(sa.bindparam("items", type_=JSONB), sa.bindparam("tasks", type_=JSONB))


async def place_jobs(conn: AsyncConnection, items: list[NewPlacement]) -> set[uuid.UUID]:
    """Move Queued jobs to Placed and open their placements, in three statements whatever
    their number; a job whose version moved meanwhile (cancelled, say) is skipped. Returns
    the ids placed."""
    if not items:
        return set()
    transition("job", "Queued", "Placed")
    rows = await conn.execute(
        _PLACE,
        {
            "items": [
                {
                    "id": str(i.job_id),
                    "version": i.version,
                    "cluster_id": str(i.cluster_id),
                    "epoch": i.epoch,
                }
                for i in items
            ]
        },
    )
    placed = {r.id for r in rows}
    done = [i for i in items if i.job_id in placed]
    if not done:
        return placed
    await conn.execute(
        _OPEN,
        {
            "items": [
                {
                    "id": str(i.job_id),
                    "epoch": i.epoch,
                    "cluster_id": str(i.cluster_id),
                    "assignment": {"flavors": dict(i.flavors), "hints": i.hints},
                    "message": i.message,
                    "data": {"from": "Queued", "to": "Placed", **dict(i.data)},
                }
                for i in done
            ],
            "tasks": [
                {"job_id": str(i.job_id), "name": name, "flavor": flavor}
                for i in done
                for name, flavor in i.flavors.items()
            ],
        },
    )
    for cluster_id in {i.cluster_id for i in done}:
        await notify(conn, PLACEMENTS, str(cluster_id))
    return placed
