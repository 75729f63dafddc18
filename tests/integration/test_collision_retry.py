"""A write that PostgreSQL rolls back for a deadlock is made again (`retrying_collisions`), and
nothing else is: a real deadlock between two transactions that lock two clusters' rows in
opposite orders, the retried one set to detect it first."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from federation.store.clusters import ensure_cluster
from federation.store.database import Database, is_collision, retrying_collisions
from federation.store.tables import clusters

pytestmark = pytest.mark.integration


async def _two_clusters(db: Database) -> tuple[uuid.UUID, uuid.UUID]:
    async with db.transaction() as conn:
        first = await ensure_cluster(conn, f"a-{uuid.uuid4().hex[:8]}")
        second = await ensure_cluster(conn, f"b-{uuid.uuid4().hex[:8]}")
    return first, second


def _bump(cluster_id: uuid.UUID) -> sa.Update:
    return (
        sa.update(clusters)
        .where(clusters.c.id == cluster_id)
        .values(version=clusters.c.version + 1)
    )


async def _version(db: Database, cluster_id: uuid.UUID) -> int:
    async with db.connection() as conn:
        version = await conn.scalar(
            sa.select(clusters.c.version).where(clusters.c.id == cluster_id)
        )
    assert version is not None
    return int(version)


async def test_a_deadlocked_write_is_made_again_and_lands_once(db: Database) -> None:
    first, second = await _two_clusters(db)
    before = (await _version(db, first), await _version(db, second))
    other_holds_first = asyncio.Event()
    retried_holds_second = asyncio.Event()
    attempts = 0

    async def other() -> None:  # locks first, then second: waits for the retried write
        async with db.transaction() as conn:
            await conn.execute(sa.text("SET LOCAL deadlock_timeout = '10s'"))
            await conn.execute(_bump(first))
            other_holds_first.set()
            await retried_holds_second.wait()
            await conn.execute(_bump(second))

    async def attempt() -> None:  # locks second, then first; detects the deadlock first
        nonlocal attempts
        attempts += 1
        async with db.transaction() as conn:
            await conn.execute(sa.text("SET LOCAL deadlock_timeout = '50ms'"))
            if attempts == 1:
                await other_holds_first.wait()
            await conn.execute(_bump(second))
            retried_holds_second.set()
            await conn.execute(_bump(first))

    await asyncio.wait_for(asyncio.gather(other(), retrying_collisions(attempt)), 30)
    assert attempts == 2  # the first was rolled back whole, the second landed
    assert (await _version(db, first), await _version(db, second)) == (
        before[0] + 2,
        before[1] + 2,
    )


async def test_other_database_errors_are_not_made_again(db: Database) -> None:
    first, _ = await _two_clusters(db)
    attempts = 0

    async def attempt() -> None:
        nonlocal attempts
        attempts += 1
        async with db.transaction() as conn:
            name = await conn.scalar(sa.select(clusters.c.name).where(clusters.c.id == first))
            await conn.execute(sa.insert(clusters).values(id=uuid.uuid4(), name=name))

    with pytest.raises(sa_exc.IntegrityError) as raised:
        await retrying_collisions(attempt)
    assert attempts == 1 and not is_collision(raised.value)
