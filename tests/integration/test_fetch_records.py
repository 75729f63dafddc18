"""`fetch_records` returns what SQLAlchemy returns for the same statement, in the caller's
transaction: expanded `IN` lists, limits and offsets, array parameters and ids included."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from federation.controllers.row_stamps import HELD_STAMPS, JOB_STAMPS, job_among
from federation.store import jobs as job_store
from federation.store.database import Database, fetch_records
from federation.store.tables import jobs
from tests.integration.conftest import store_queue, stored_job

pytestmark = pytest.mark.integration


async def test_records_equal_sqlalchemy_rows(db: Database) -> None:
    tenant, queue = await store_queue(db)
    async with db.transaction() as conn:
        await job_store.submit_many(conn, [stored_job(tenant, queue) for _ in range(7)])
    async with db.transaction() as conn:
        ids = [r.id for r in await conn.execute(sa.select(jobs.c.id).order_by(jobs.c.id))]
        queued = JOB_STAMPS.where(jobs.c.state.in_(("Queued", "Placed"))).order_by(jobs.c.id)
        statements = [
            HELD_STAMPS,
            queued,
            queued.offset(2).limit(3),
            JOB_STAMPS.where(job_among(ids[1:4])).order_by(jobs.c.id),
        ]
        for stmt in statements:
            rows = [tuple(r) for r in await conn.execute(stmt)]
            assert [tuple(r) for r in await fetch_records(conn, stmt)] == rows
        assert len(await fetch_records(conn, queued.offset(2).limit(3))) == 3
        # in the caller's transaction: a row written in it is seen with its new stamp
        before = {r[0]: r[1] for r in await fetch_records(conn, queued)}
        await conn.execute(sa.update(jobs).where(jobs.c.id == ids[0]).values(priority=5))
        after = {r[0]: r[1] for r in await fetch_records(conn, queued)}
        assert after[ids[0]] != before[ids[0]]
        assert after == {r.id: r.stamp for r in await conn.execute(queued)}
