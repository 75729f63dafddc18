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
from federation.store import jobs as job_store
from federation.store import tenancy
from federation.store.database import Database
from federation.store.group_commit import GroupCommit
from federation.store.records import Queue, Tenant
from federation.store.tables import jobs

pytestmark = pytest.mark.integration


async def _queue(db: Database) -> tuple[Tenant, Queue]:
    async with db.transaction() as conn:
        tenant = await tenancy.create_tenant(conn, f"t-{uuid.uuid4().hex[:8]}")
        queue = await tenancy.create_queue(conn, tenant, "q", cohort=None, weight=1, quota={})
    return tenant, queue


def _new(tenant: Tenant, queue: Queue, key: str | None, digest: str = "d") -> job_store.NewJob:
    return job_store.NewJob(
        tenant_id=tenant.id,
        tenant=tenant.name,
        queue_id=queue.id,
        queue=queue.name,
        name="j",
        labels={},
        spec={},
        compiled={},
        priority=0,
        priority_class="normal",
        preemptible=False,
        tasks=[("w", 1)],
        idempotency_key=key,
        request_hash=digest,
    )


async def _count(db: Database, tenant: Tenant) -> int:
    async with db.connection() as conn:
        query = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.tenant_id == tenant.id)
        return int((await conn.execute(query)).scalar_one())


async def test_concurrent_submissions_each_get_their_own_committed_job(db: Database) -> None:
    tenant, queue = await _queue(db)
    group = GroupCommit(db, max_group=16)
    results = await asyncio.gather(
        *(group.submit(_new(tenant, queue, f"k{i}")) for i in range(200))
    )
    assert all(created for _, created in results)
    assert len({job.id for job, _ in results}) == 200
    assert await _count(db, tenant) == 200


async def test_one_key_in_one_group_is_one_job_and_another_body_conflicts(db: Database) -> None:
    tenant, queue = await _queue(db)
    group = GroupCommit(db)
    same = [group.submit(_new(tenant, queue, "key")) for _ in range(10)]
    other = group.submit(_new(tenant, queue, "key", digest="other"))
    *repeats, conflict = await asyncio.gather(*same, other, return_exceptions=True)
    assert isinstance(conflict, Conflict)
    assert len({job.id for job, _ in repeats}) == 1  # type: ignore[union-attr]
    assert sum(created for _, created in repeats) == 1  # type: ignore[misc]
    assert await _count(db, tenant) == 1


async def test_a_job_that_cannot_be_written_fails_alone(db: Database) -> None:
    tenant, queue = await _queue(db)
    broken = replace(_new(tenant, queue, "broken"), queue_id=uuid.uuid4())  # no such queue
    group = GroupCommit(db)
    outcomes = await asyncio.gather(
        *(group.submit(_new(tenant, queue, f"ok{i}")) for i in range(5)),
        group.submit(broken),
        *(group.submit(_new(tenant, queue, f"ok{i + 5}")) for i in range(5)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[5], sa.exc.IntegrityError)
    assert all(isinstance(o, tuple) for i, o in enumerate(outcomes) if i != 5)
    assert await _count(db, tenant) == 10
