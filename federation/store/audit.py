"""The audit trail: who did what through the API, appended in batches, read newest first."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.jobs import decode_cursor, encode_cursor
from federation.store.tables import audit_log


@dataclass(frozen=True)
class AuditRecord:
    """One audited request. `tenant_id` and `tenant` are what the record is filed under: the
    caller's tenant, else the tenant the request named or the tenant of the job it acted on
    (`job_id`, resolved when the batch is written)."""

    at: datetime
    actor: str | None
    role: str | None
    action: str
    object: str | None
    request_id: str
    source: str
    status: int
    tenant_id: uuid.UUID | None = None
    tenant: str | None = None
    job_id: uuid.UUID | None = None


@dataclass(frozen=True)
class AuditEntry:
    """A stored audit record."""

    id: int
    at: datetime
    actor: str | None
    role: str | None
    tenant: str | None
    action: str
    object: str | None
    request_id: str
    source: str
    status: int


@dataclass(frozen=True)
class AuditFilter:
    """What `read` selects; `tenant_id` confines a tenant's members to their own records."""

    tenant_id: uuid.UUID | None = None
    tenant: str | None = None
    actor: str | None = None
    action: str | None = None
    status_from: int = 0  # the outcome: status codes in [status_from, status_to]
    status_to: int = 999
    since: datetime | None = None
    until: datetime | None = None


# One statement files and stores a batch: each record under the tenant it names by id, else
# that of the job it acted on, else the tenant it names by name; a known tenant's name is the
# one stored. Its text never varies with the batch's size, so it is prepared once.
_APPEND = sa.text(
    """
    INSERT INTO audit_log (at, actor, role, tenant_id, tenant, action, object, request_id,
                           source, status)
    SELECT r.at, r.actor, r.role, COALESCE(f.tenant_id, named.id),
           CASE WHEN f.tenant_id IS NULL THEN r.tenant ELSE COALESCE(owner.name, r.tenant) END,
           r.action, r.object, r.request_id, r.source, r.status
    FROM jsonb_to_recordset(:rows) AS r(
        n int, at timestamptz, actor text, role text, tenant_id uuid, tenant text, job_id uuid,
        action text, object text, request_id text, source text, status int)
    LEFT JOIN jobs j ON r.tenant_id IS NULL AND j.id = r.job_id
    CROSS JOIN LATERAL (SELECT COALESCE(r.tenant_id, j.tenant_id) AS tenant_id) f
    LEFT JOIN tenants owner ON owner.id = f.tenant_id
    LEFT JOIN tenants named ON f.tenant_id IS NULL AND named.name = r.tenant
    ORDER BY r.n
    """
).bindparams(sa.bindparam("rows", type_=JSONB))


async def append(conn: AsyncConnection, batch: Sequence[AuditRecord]) -> None:
    """Store a batch of records in one statement, in their order."""
    if not batch:
        return
    rows = [  # ids as text: a caller's tenant id is asyncpg's own UUID, which orjson refuses
        {
            "n": n,
            "at": r.at.isoformat(),
            "actor": r.actor,
            "role": r.role,
            "tenant_id": str(r.tenant_id) if r.tenant_id is not None else None,
            "tenant": r.tenant,
            "job_id": str(r.job_id) if r.job_id is not None else None,
            "action": r.action,
            "object": r.object,
            "request_id": r.request_id,
            "source": r.source,
            "status": r.status,
        }
        for n, r in enumerate(batch)
    ]
    await conn.execute(_APPEND, {"rows": rows})


async def prune(conn: AsyncConnection, now: datetime, keep: timedelta) -> int:
    """Delete records older than `keep`; how many were deleted."""
    result = await conn.execute(audit_log.delete().where(audit_log.c.at < now - keep))
    return result.rowcount


async def read(
    conn: AsyncConnection, flt: AuditFilter, *, limit: int, cursor: str | None
) -> tuple[list[AuditEntry], str | None]:
    """A page of records, newest first, and the cursor of the next page (None at the end)."""
    a = audit_log.c
    query = (
        sa.select(
            a.id,
            a.at,
            a.actor,
            a.role,
            a.tenant,
            a.action,
            a.object,
            a.request_id,
            a.source,
            a.status,
        )
        .where(a.status.between(flt.status_from, flt.status_to))
        .order_by(a.id.desc())
        .limit(limit + 1)
    )
    for column, value in (
        (a.tenant_id, flt.tenant_id),
        (a.tenant, flt.tenant),
        (a.actor, flt.actor),
        (a.action, flt.action),
    ):
        if value is not None:
            query = query.where(column == value)
    if flt.since is not None:
        query = query.where(a.at >= flt.since)
    if flt.until is not None:
        query = query.where(a.at < flt.until)
    if cursor is not None:
        query = query.where(a.id < decode_cursor(cursor))
    page = [AuditEntry(**r._mapping) for r in await conn.execute(query)]
    if len(page) > limit:
        return page[:limit], encode_cursor(page[limit - 1].id)
    return page, None
