"""Services (`kind: Service`): creation (idempotent), reads with cursor pagination, updates
and deletion. Their shard jobs are opened, sized and closed by the service controller; every
change here wakes it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.compiled import CompiledJob
from federation.errors import Conflict, FieldError, InvalidInput, NotFound
from federation.store.events import add_event
from federation.store.jobs import decode_cursor, encode_cursor
from federation.store.listener import JOBS
from federation.store.records import Event, Service
from federation.store.tables import events, queues, services, tenants

_SERVICE_COLUMNS = (
    *(c for c in services.c if c.name not in ("idempotency_key", "request_hash")),
    tenants.c.name.label("tenant"),
    queues.c.name.label("queue"),
)
# what a service's shards are bound to when they are opened: an update may not change them
IMMUTABLE = (
    ("tenant_id", "metadata.tenant", "the tenant"),
    ("queue_id", "spec.queue", "the queue"),
    ("priority_class", "spec.priorityClass", "the priority class"),
    ("preemptible", "spec.preemptible", "whether it is preemptible"),
)


def _query() -> sa.Select[Any]:
    return (
        sa.select(*_SERVICE_COLUMNS)
        .join(tenants, tenants.c.id == services.c.tenant_id)
        .join(queues, queues.c.id == services.c.queue_id)
    )


def _service(row: sa.Row[Any]) -> Service:
    return Service(**row._mapping)


@dataclass(frozen=True)
class NewService:
    """What the API hands the store for a service created or updated."""

    tenant_id: uuid.UUID
    queue_id: uuid.UUID
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    compiled: CompiledJob  # compile_service's form (its generation is set by the store)
    priority: int
    priority_class: str
    preemptible: bool
    idempotency_key: str | None = None
    request_hash: str | None = None


def desired(compiled: CompiledJob, current: int | None = None) -> int:
    """Replicas wanted across the service: fixed, the replicas; autoscaled, `current` (none
    yet: the fewest) kept within minReplicas, at least one per spread cluster, and
    maxReplicas."""
    assert compiled.service is not None
    service = compiled.service
    floor = max(service.min_replicas, service.spread)
    return min(max(floor if current is None else current, floor), service.max_replicas)


def rolls(old: CompiledJob, new: CompiledJob) -> bool:
    """Whether `new` changes the server's pods (image, template, resources, accelerators):
    only then the shards roll their pods over to a new generation. Replica bounds, ports,
    spread, placement and autoscaling change no pod."""
    bounds = {"replicas", "min_replicas", "max_replicas"}
    return [t.model_dump(exclude=bounds) for t in old.tasks] != [
        t.model_dump(exclude=bounds) for t in new.tasks
    ]


def _at_generation(compiled: CompiledJob, generation: int) -> dict[str, Any]:
    assert compiled.service is not None
    service = compiled.service.model_copy(update={"generation": generation})
    return compiled.model_copy(update={"service": service}).model_dump(mode="json", by_alias=True)


async def _wake(conn: AsyncConnection) -> None:
    """Wake the scheduling process (its service controller) at commit."""
    await conn.execute(sa.select(sa.func.pg_notify(JOBS, "")))


async def create(conn: AsyncConnection, new: NewService) -> tuple[Service, bool]:
    """Insert an Active service; a repeat of an idempotency key returns the first service
    (not new), or raises Conflict when it came with another body; a live service of the same
    name in the tenant is a Conflict."""
    service_id = uuid.uuid4()
    wanted = desired(new.compiled)
    inserted = await conn.scalar(
        insert(services)
        .values(
            id=service_id,
            tenant_id=new.tenant_id,
            queue_id=new.queue_id,
            name=new.name,
            labels=new.labels,
            spec=new.spec,
            compiled=_at_generation(new.compiled, 1),
            priority=new.priority,
            priority_class=new.priority_class,
            preemptible=new.preemptible,
            desired=wanted,
            generation=1,
            idempotency_key=new.idempotency_key,
            request_hash=new.request_hash,
        )
        .on_conflict_do_nothing()
        .returning(services.c.id)
    )
    if inserted is not None:
        await add_event(
            conn,
            kind="Service",
            reason="Created",
            message=f"{wanted} replicas wanted",
            service_id=service_id,
        )
        await _wake(conn)
        return await get(conn, str(service_id)), True
    if new.idempotency_key is not None:
        earlier = (
            await conn.execute(
                sa.select(services.c.id, services.c.request_hash).where(
                    services.c.tenant_id == new.tenant_id,
                    services.c.idempotency_key == new.idempotency_key,
                )
            )
        ).one_or_none()
        if earlier is not None:
            if earlier.request_hash != new.request_hash:
                raise Conflict(
                    "Idempotency-Key was already used with a different request body",
                    service=str(earlier.id),
                )
            return await get(conn, str(earlier.id)), False
    live = await conn.scalar(
        sa.select(services.c.id).where(
            services.c.tenant_id == new.tenant_id,
            services.c.name == new.name,
            services.c.deleted_at.is_(None),
        )
    )
    raise Conflict(
        f"a service named {new.name!r} already exists in this tenant; update it with PUT",
        **({"service": str(live)} if live is not None else {}),
    )


def _canonical_id(ref: str) -> uuid.UUID | None:
    """`ref` as a service id when it is one in canonical form (else it is a name)."""
    try:
        parsed = uuid.UUID(ref)
    except ValueError:
        return None
    return parsed if str(parsed) == ref.lower() else None


async def get(
    conn: AsyncConnection, ref: str, tenant_id: uuid.UUID | None = None, *, lock: bool = False
) -> Service:
    """A service by id (deleted ones too) or by name (the live one); with `tenant_id`, one of
    another tenant is not found. A name that several tenants' services bear is a Conflict for
    a caller of no tenant. `lock`: the row is locked for the caller's transaction."""
    service_id = _canonical_id(ref)
    query = _query()
    if service_id is not None:
        query = query.where(services.c.id == service_id)
    else:
        query = query.where(services.c.name == ref, services.c.deleted_at.is_(None))
    if tenant_id is not None:
        query = query.where(services.c.tenant_id == tenant_id)
    if lock:
        query = query.with_for_update(of=services)
    found = [_service(r) for r in await conn.execute(query.limit(2))]
    if not found:
        raise NotFound("service", ref)
    if len(found) > 1:
        raise Conflict(
            f"services named {ref!r} exist in several tenants; name one by its id",
            services=[str(s.id) for s in found],
        )
    return found[0]


async def list_services(
    conn: AsyncConnection,
    tenant_id: uuid.UUID | None,
    *,
    deleted: bool,
    limit: int,
    cursor: str | None,
) -> tuple[list[Service], str | None]:
    """A page of live (or, with `deleted`, deleted) services, newest first, and the cursor of
    the next page (None at the end)."""
    query = _query().order_by(services.c.seq.desc()).limit(limit + 1)
    query = query.where(services.c.state == ("Deleted" if deleted else "Active"))
    if tenant_id is not None:
        query = query.where(services.c.tenant_id == tenant_id)
    if cursor is not None:
        query = query.where(services.c.seq < decode_cursor(cursor))
    page = [_service(r) for r in await conn.execute(query)]
    if len(page) > limit:
        return page[:limit], encode_cursor(page[limit - 1].seq)
    return page, None


async def update(conn: AsyncConnection, service_id: uuid.UUID, new: NewService) -> Service:
    """Replace a live service's manifest and compiled form (under its row lock): the
    generation goes up when the server's pods change (`rolls`), `desired` is kept within the
    new bounds; the same manifest again changes nothing (its version stays). The caller hands
    a changed service's compiled form to its live shards."""
    current = await get(conn, str(service_id), lock=True)
    if current.state == "Deleted":
        raise Conflict("service already Deleted; create it anew", state=current.state)
    wrong = [
        FieldError(path, f"{what} of a service cannot change; delete and create it anew")
        for column, path, what in IMMUTABLE
        if getattr(current, column) != getattr(new, column)
    ]
    if wrong:
        raise InvalidInput(f"{wrong[0].path}: {wrong[0].message}", wrong)
    if new.spec == current.spec:  # applied again as it is: nothing to write, nothing to roll
        return current
    rolled = rolls(CompiledJob.model_validate(current.compiled), new.compiled)
    generation = current.generation + (1 if rolled else 0)
    wanted = desired(new.compiled, current.desired)
    await conn.execute(
        sa.update(services)
        .where(services.c.id == service_id)
        .values(
            labels=new.labels,
            spec=new.spec,
            compiled=_at_generation(new.compiled, generation),
            desired=wanted,
            generation=generation,
            version=services.c.version + 1,
            updated_at=sa.func.now(),
        )
    )
    message = (
        f"generation {generation}: the server's pods roll over"
        if rolled
        else f"generation {generation} kept: no pod changes"
    )
    await add_event(conn, kind="Service", reason="Updated", message=message, service_id=service_id)
    await _wake(conn)
    return await get(conn, str(service_id))


async def delete(conn: AsyncConnection, service_id: uuid.UUID) -> Service:
    """Mark a service Deleted (the controller cancels its shards); deleting a deleted service
    changes nothing."""
    current = await get(conn, str(service_id), lock=True)
    if current.state == "Deleted":
        return current
    await conn.execute(
        sa.update(services)
        .where(services.c.id == service_id)
        .values(
            state="Deleted",
            deleted_at=sa.func.now(),
            version=services.c.version + 1,
            updated_at=sa.func.now(),
        )
    )
    await add_event(conn, kind="Service", reason="Deleted", service_id=service_id)
    await _wake(conn)
    return await get(conn, str(service_id))


async def service_events(conn: AsyncConnection, service_id: uuid.UUID, *, last: int) -> list[Event]:
    """The `last` events of a service, oldest first."""
    newest = (
        sa.select(events)
        .where(events.c.service_id == service_id)
        .order_by(events.c.id.desc())
        .limit(last)
        .subquery()
    )
    rows = await conn.execute(sa.select(newest).order_by(newest.c.id))
    return [Event(**r._mapping) for r in rows]
