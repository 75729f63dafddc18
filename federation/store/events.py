"""The event log of jobs, services and clusters: append-only, written beside every change."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.tables import events


async def add_event(
    conn: AsyncConnection,
    *,
    kind: str,
    reason: str,
    message: str = "",
    job_id: uuid.UUID | None = None,
    service_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    data: Mapping[str, Any] | None = None,
) -> None:
    """Append an event (in the caller's transaction)."""
    await conn.execute(
        sa.insert(events).values(
            job_id=job_id,
            service_id=service_id,
            cluster_id=cluster_id,
            kind=kind,
            reason=reason,
            message=message,
            data=dict(data or {}),
        )
    )


@dataclass(frozen=True)
class NewEvent:
    """An event to append with others (`add_events`)."""

    kind: str
    reason: str
    message: str = ""
    job_id: uuid.UUID | None = None
    cluster_id: uuid.UUID | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


_ADD_EVENTS = sa.text(
    """
    INSERT INTO events (job_id, cluster_id, kind, reason, message, data)
    SELECT e.job_id, e.cluster_id, e.kind, e.reason, e.message, e.data
    FROM jsonb_to_recordset(:rows) AS e(
        n int, job_id uuid, cluster_id uuid, kind text, reason text, message text, data jsonb)
    ORDER BY e.n
    """
).bindparams(sa.bindparam("rows", type_=JSONB))


async def add_events(conn: AsyncConnection, new: Sequence[NewEvent]) -> None:
    """Append events in their order, in one statement (in the caller's transaction)."""
    if not new:
        return
    rows = [
        {
            "n": n,
            "job_id": str(e.job_id) if e.job_id else None,
            "cluster_id": str(e.cluster_id) if e.cluster_id else None,
            "kind": e.kind,
            "reason": e.reason,
            "message": e.message,
            "data": dict(e.data),
        }
        for n, e in enumerate(new)
    ]
    await conn.execute(_ADD_EVENTS, {"rows": rows})
