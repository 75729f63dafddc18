"""Group commit keeps every submission's own outcome: concurrent submissions share transactions,
repeats of one idempotency key give one job, a different body under a used key is a Conflict,
and a job that cannot be written fails alone while the rest of its group commits."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
import sqlalchemy as sa

from federation.errors import Conflict
from federation.store.database import Database
from federation.store.group_commit import GroupCommit
from federation.store.records import Tenant
from federation.store.tables import jobs
from tests.integration.conftest import store_queue, stored_job

pytestmark = pytest.mark.integration


async def _count(db: Database, tenant: Tenant) -> int:
    async with db.connection() as conn:
        query = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.tenant_id == tenant.id)
        return int((await conn.execute(query)).scalar_one())


async def test_concurrent_submissions_each_get_their_own_committed_job(db: Database) -> None:
    tenant, queue = await store_queue(db)
    group = GroupCommit(db, max_group=16)
    results = await asyncio.gather(
        *(group.submit(stored_job(tenant, queue, f"k{i}", "d")) for i in range(200))
    )
    assert all(created for _, created in results)
    assert len({job.id for job, _ in results}) == 200
    assert await _count(db, tenant) == 200


async def test_one_key_in_one_group_is_one_job_and_another_body_conflicts(db: Database) -> None:
    tenant, queue = await store_queue(db)
    group = GroupCommit(db)
    same = [group.submit(stored_job(tenant, queue, "key", "d")) for _ in range(10)]
    other = group.submit(stored_job(tenant, queue, "key", digest="other"))
    *repeats, conflict = await asyncio.gather(*same, other, return_exceptions=True)
    assert isinstance(conflict, Conflict)
    assert len({job.id for job, _ in repeats}) == 1  # type: ignore[union-attr]
    assert sum(created for _, created in repeats) == 1  # type: ignore[misc]
    assert await _count(db, tenant) == 1


async def test_a_job_that_cannot_be_written_fails_alone(db: Database) -> None:
    tenant, queue = await store_queue(db)
    broken = replace(
        stored_job(tenant, queue, "broken", "d"), queue_id=uuid.uuid4()
    )  # no such queue
    group = GroupCommit(db)
    outcomes = await asyncio.gather(
        *(group.submit(stored_job(tenant, queue, f"ok{i}", "d")) for i in range(5)),
        group.submit(broken),
        *(group.submit(stored_job(tenant, queue, f"ok{i + 5}", "d")) for i in range(5)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[5], sa.exc.IntegrityError)
    assert all(isinstance(o, tuple) for i, o in enumerate(outcomes) if i != 5)
    assert await _count(db, tenant) == 10
