"""Tenants, their queues (quota, cohort, weight) and the priority classes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import Conflict, NotFound
from federation.store.records import Queue, Tenant
from federation.store.tables import jobs, priority_classes, queues, tenants


async def create_tenant(conn: AsyncConnection, name: str, display_name: str = "") -> Tenant:
    """Create a tenant; a taken name is a conflict."""
    try:
        async with conn.begin_nested():
            row = (
                await conn.execute(
                    sa.insert(tenants)
                    .values(name=name, display_name=display_name)
                    .returning(*tenants.c)
                )
            ).one()
    except IntegrityError as exc:
        raise Conflict(f"tenant {name!r} already exists") from exc
    return Tenant(**row._mapping)


async def get_tenant(conn: AsyncConnection, name: str) -> Tenant:
    """The tenant named `name`."""
    row = (await conn.execute(sa.select(tenants).where(tenants.c.name == name))).one_or_none()
    if row is None:
        raise NotFound("tenant", name)
    return Tenant(**row._mapping)


async def set_policy(conn: AsyncConnection, name: str, policy: dict[str, bool]) -> Tenant:
    """Replace the policy of the tenant named `name`."""
    row = (
        await conn.execute(
            sa.update(tenants)
            .where(tenants.c.name == name)
            .values(policy=policy)
            .returning(*tenants.c)
        )
    ).one_or_none()
    if row is None:
        raise NotFound("tenant", name)
    return Tenant(**row._mapping)


async def list_tenants(conn: AsyncConnection, only: uuid.UUID | None = None) -> list[Tenant]:
    """All tenants, or only the one with id `only`."""
    query = sa.select(tenants).order_by(tenants.c.name)
    if only is not None:
        query = query.where(tenants.c.id == only)
    return [Tenant(**r._mapping) for r in await conn.execute(query)]


async def delete_tenant(conn: AsyncConnection, name: str) -> None:
    """Delete an empty tenant (no queues left)."""
    tenant = await get_tenant(conn, name)
    try:
        async with conn.begin_nested():
            await conn.execute(sa.delete(tenants).where(tenants.c.id == tenant.id))
    except IntegrityError as exc:
        raise Conflict(f"tenant {name!r} still has queues or jobs") from exc


_QUEUE_COLUMNS = (*queues.c, tenants.c.name.label("tenant"))


def _queue_query() -> sa.Select[Any]:
    return sa.select(*_QUEUE_COLUMNS).join(tenants, tenants.c.id == queues.c.tenant_id)


async def create_queue(
    conn: AsyncConnection,
    tenant: Tenant,
    name: str,
    *,
    cohort: str | None,
    weight: float,
    quota: dict[str, dict[str, int | None]],
) -> Queue:
    """Create a queue in `tenant`."""
    try:
        async with conn.begin_nested():
            await conn.execute(
                sa.insert(queues).values(
                    tenant_id=tenant.id, name=name, cohort=cohort, weight=weight, quota=quota
                )
            )
    except IntegrityError as exc:
        raise Conflict(f"queue {name!r} already exists in tenant {tenant.name!r}") from exc
    return await get_queue(conn, tenant.id, name)


async def get_queue(conn: AsyncConnection, tenant_id: uuid.UUID, name: str) -> Queue:
    """The queue `name` of a tenant."""
    row = (
        await conn.execute(
            _queue_query().where(queues.c.tenant_id == tenant_id, queues.c.name == name)
        )
    ).one_or_none()
    if row is None:
        raise NotFound("queue", name)
    return Queue(**row._mapping)


async def list_queues(conn: AsyncConnection, tenant_id: uuid.UUID | None = None) -> list[Queue]:
    """All queues, or those of one tenant."""
    query = _queue_query().order_by(tenants.c.name, queues.c.name)
    if tenant_id is not None:
        query = query.where(queues.c.tenant_id == tenant_id)
    return [Queue(**r._mapping) for r in await conn.execute(query)]


async def update_queue(
    conn: AsyncConnection,
    queue: Queue,
    *,
    expected_version: int | None,
    changes: dict[str, Any],
) -> Queue:
    """Change a queue's cohort, weight or quota, checking the version when one is given.

    Only a real change writes (and bumps the version): repeating a PATCH, even concurrently,
    leaves the queue as one PATCH did. PostgreSQL re-checks the WHERE clause after waiting for
    a concurrent writer, so of identical calls the first changes the row and the rest see it.
    """
    where = [queues.c.id == queue.id]
    if expected_version is not None:
        where.append(queues.c.version == expected_version)
    if changes:
        where.append(sa.or_(*(queues.c[k].is_distinct_from(v) for k, v in changes.items())))
        result = await conn.execute(
            sa.update(queues).where(*where).values(**changes, version=queues.c.version + 1)
        )
        changed = result.rowcount > 0
    else:
        changed = False
    if not changed:
        version = await conn.scalar(
            sa.select(queues.c.version).where(queues.c.id == queue.id).with_for_update()
        )
        if version is None:
            raise NotFound("queue", queue.name)
        if expected_version is not None and version != expected_version:
            raise Conflict(
                f"queue {queue.name!r} changed meanwhile (version is {version},"
                f" not {expected_version})"
            )
    return await get_queue(conn, queue.tenant_id, queue.name)


async def delete_queue(conn: AsyncConnection, queue: Queue) -> None:
    """Delete a queue that holds no unfinished job."""
    busy = await conn.scalar(
        sa.select(sa.func.count())
        .select_from(jobs)
        .where(
            jobs.c.queue_id == queue.id, jobs.c.state.not_in(("Succeeded", "Failed", "Cancelled"))
        )
    )
    if busy:
        raise Conflict(f"queue {queue.name!r} still holds {busy} unfinished jobs")
    try:
        async with conn.begin_nested():
            await conn.execute(sa.delete(jobs).where(jobs.c.queue_id == queue.id))
            await conn.execute(sa.delete(queues).where(queues.c.id == queue.id))
    except IntegrityError as exc:  # pragma: no cover - guarded by the count above
        raise Conflict(f"queue {queue.name!r} is in use") from exc


async def list_priority_classes(conn: AsyncConnection) -> list[dict[str, Any]]:
    """All priority classes, highest first."""
    rows = await conn.execute(sa.select(priority_classes).order_by(priority_classes.c.value.desc()))
    return [dict(r._mapping) for r in rows]


@dataclass(frozen=True)
class SubmissionTarget:
    """Where a submission goes: tenant, queue and priority class, resolved in one query."""

    tenant_id: uuid.UUID
    tenant: str
    queue_id: uuid.UUID | None  # None: no such queue in the tenant
    priority: int | None  # None: no such priority class
    preemptible_default: bool
    policy: dict[str, bool]  # the tenant's TenantPolicy JSON


async def submission_target(
    conn: AsyncConnection,
    *,
    tenant_id: uuid.UUID | None,
    tenant_name: str | None,
    queue: str,
    priority_class_name: str,
) -> SubmissionTarget | None:
    """Tenant (by id or name), its queue and the priority class; None if the tenant is unknown."""
    query = (
        sa.select(
            tenants.c.id,
            tenants.c.name,
            tenants.c.policy,
            queues.c.id.label("queue_id"),
            priority_classes.c.value,
            priority_classes.c.preemptible_default,
        )
        .select_from(tenants)
        .outerjoin(queues, sa.and_(queues.c.tenant_id == tenants.c.id, queues.c.name == queue))
        .outerjoin(priority_classes, priority_classes.c.name == priority_class_name)
    )
    if tenant_id is not None:
        query = query.where(tenants.c.id == tenant_id)
    else:
        query = query.where(tenants.c.name == tenant_name)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        return None
    return SubmissionTarget(
        row.id, row.name, row.queue_id, row.value, bool(row.preemptible_default), row.policy
    )
