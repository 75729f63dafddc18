"""Job lifecycle in the store: every transition, concurrent writers, and migrations."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy as sa

from federation.errors import Conflict, IllegalTransition
from federation.store import jobs as job_store
from federation.store import migrate
from federation.store.database import Database
from federation.store.lifecycle import JOB_TRANSITIONS
from federation.store.tables import events, jobs
from tests.integration.conftest import store_queue, stored_job

pytestmark = pytest.mark.integration

STATES = sorted(JOB_TRANSITIONS)
PAIRS = [(a, b) for a in STATES for b in STATES if a != b]


async def _new_job(db: Database) -> uuid.UUID:
    tenant, queue = await store_queue(db)
    async with db.transaction() as conn:
        job, _ = await job_store.submit(conn, stored_job(tenant, queue))
    return job.id


async def _force_state(db: Database, job_id: uuid.UUID, state: str) -> None:
    async with db.transaction() as conn:
        await conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(state=state))


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
async def test_every_transition_is_allowed_exactly_as_the_table_says(
    db: Database, current: str, target: str
) -> None:
    job_id = await _new_job(db)
    await _force_state(db, job_id, current)
    legal = target in JOB_TRANSITIONS[current]
    try:
        async with db.transaction() as conn:
            job = await job_store.transition(conn, job_id, target, reason="Test")
    except IllegalTransition:
        assert not legal
        async with db.connection() as conn:
            state = await conn.scalar(sa.select(jobs.c.state).where(jobs.c.id == job_id))
            n_events = await conn.scalar(
                sa.select(sa.func.count()).select_from(events).where(events.c.job_id == job_id)
            )
        assert state == current and n_events == 1  # only "Submitted"
    else:
        assert legal
        assert job.state == target and job.version == 2
        async with db.connection() as conn:
            found = await job_store.job_events(conn, job_id)
        assert found[-1].data == {"from": current, "to": target}


async def test_two_connections_updating_one_job_never_lose_an_update(db: Database) -> None:
    job_id = await _new_job(db)
    first_locked = asyncio.Event()
    release_first = asyncio.Event()

    async def first() -> str:
        async with db.transaction() as conn:
            await job_store.transition(conn, job_id, "Placed", reason="Placed", expected_version=1)
            first_locked.set()
            await release_first.wait()
        return "Placed"

    async def second() -> str:
        await first_locked.wait()
        async with db.transaction() as conn:
            # blocks on the row lock until `first` commits, then sees version 2
            await job_store.transition(
                conn, job_id, "Cancelled", reason="Cancelled", expected_version=1
            )
        return "Cancelled"

    task_a = asyncio.create_task(first())
    task_b = asyncio.create_task(second())
    await first_locked.wait()
    await asyncio.sleep(0.2)
    assert not task_b.done()  # waiting on the lock, not racing past it
    release_first.set()
    assert await task_a == "Placed"
    with pytest.raises(Conflict):
        await task_b
    async with db.connection() as conn:
        job = await job_store.get(conn, job_id)
    assert (job.state, job.version) == ("Placed", 2)


async def test_concurrent_unversioned_transitions_serialize(db: Database) -> None:
    job_id = await _new_job(db)

    async def move(target: str) -> str | None:
        try:
            async with db.transaction() as conn:
                await job_store.transition(conn, job_id, target, reason=target)
        except IllegalTransition:
            return None
        return target

    results = await asyncio.gather(move("Placed"), move("Cancelled"), move("Placed"))
    async with db.connection() as conn:
        job = await job_store.get(conn, job_id)
        history = [e.data.get("to") for e in await job_store.job_events(conn, job_id)][1:]
    applied = [r for r in results if r is not None]
    assert len(history) == len(applied) == job.version - 1
    assert job.state == history[-1]


async def test_alembic_upgrade_downgrade_upgrade(pg_url: str) -> None:
    scratch = f"mig_{uuid.uuid4().hex[:8]}"
    admin = Database(pg_url, pool_size=1)
    async with admin.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql(f"CREATE DATABASE {scratch}")
    url = admin.engine.url.set(database=scratch).render_as_string(hide_password=False)
    try:
        await migrate.upgrade(url)
        await migrate.downgrade(url, "base")
        check = Database(url, pool_size=1)
        async with check.connection() as conn:
            left = await conn.scalar(
                sa.text(
                    "SELECT count(*) FROM pg_tables"
                    " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
                )
            )
        await check.close()
        assert left == 0
        await migrate.upgrade(url)
        check = Database(url, pool_size=1)
        async with check.connection() as conn:
            classes = await conn.scalar(sa.text("SELECT count(*) FROM priority_classes"))
        await check.close()
        assert classes == 5
    finally:
        async with admin.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {scratch} WITH (FORCE)")
        await admin.close()
