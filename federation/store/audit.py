"""The audit trail: who did what through the API, appended in batches, read newest first."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.store.jobs import decode_cursor, encode_cursor
from federation.store.tables import audit_log, jobs, tenants


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


async def _filed(conn: AsyncConnection, batch: Sequence[AuditRecord]) -> list[AuditRecord]:
    """`batch` with every record's tenant id and name resolved as far as the store knows them."""
    job_ids = [r.job_id for r in batch if r.tenant_id is None and r.job_id is not None]
    job_tenant: dict[uuid.UUID, uuid.UUID] = {}
    if job_ids:
        rows = await conn.execute(
            sa.select(jobs.c.id, jobs.c.tenant_id).where(jobs.c.id.in_(job_ids))
        )
        job_tenant = {r.id: r.tenant_id for r in rows}
    filed = [
        replace(r, tenant_id=job_tenant.get(r.job_id)) if r.tenant_id is None and r.job_id else r
        for r in batch
    ]
    ids = {r.tenant_id for r in filed if r.tenant_id is not None}
    names = {r.tenant for r in filed if r.tenant is not None}
    if not ids and not names:
        return filed
    rows = await conn.execute(
        sa.select(tenants.c.id, tenants.c.name).where(
            sa.or_(tenants.c.id.in_(list(ids)), tenants.c.name.in_(list(names)))
        )
    )
    name_of: dict[uuid.UUID, str] = {}
    id_of: dict[str, uuid.UUID] = {}
    for row in rows:
        name_of[row.id] = row.name
        id_of[row.name] = row.id
    return [
        replace(
            r,
            tenant_id=r.tenant_id or id_of.get(r.tenant or ""),
            tenant=name_of.get(r.tenant_id, r.tenant) if r.tenant_id else r.tenant,
        )
        for r in filed
    ]


async def append(conn: AsyncConnection, batch: Sequence[AuditRecord]) -> None:
    """Store a batch of records in one statement."""
    if not batch:
        return
    await conn.execute(
        audit_log.insert(),
        [
            {
                "at": r.at,
                "actor": r.actor,
                "role": r.role,
                "tenant_id": r.tenant_id,
                "tenant": r.tenant,
                "action": r.action,
                "object": r.object,
                "request_id": r.request_id,
                "source": r.source,
                "status": r.status,
            }
            for r in await _filed(conn, batch)
        ],
    )


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
