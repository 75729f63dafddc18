"""The event log of jobs and clusters: append-only, written beside every change."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.tables import events


async def add_event(
    conn: AsyncConnection,
    *,
    kind: str,
    reason: str,
    message: str = "",
    job_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    data: Mapping[str, Any] | None = None,
) -> None:
    """Append an event (in the caller's transaction)."""
    await conn.execute(
        sa.insert(events).values(
            job_id=job_id,
            cluster_id=cluster_id,
            kind=kind,
            reason=reason,
            message=message,
            data=dict(data or {}),
        )
    )
