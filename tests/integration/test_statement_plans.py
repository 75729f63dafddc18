"""The scheduling loop's connections plan every statement for the rows there are when it runs.

asyncpg prepares each statement; after five executions PostgreSQL may keep a generic plan for
it until the tables are analyzed again. A loop started on an empty database kept plans made
for empty tables while they filled (measured: its scan of 10,000 held jobs took 1.3 s on such a
plan, 36 ms planned afresh). These tests read PostgreSQL's own count of the plans each
prepared statement of a connection was given, for a lookup by primary key (whose generic plan
PostgreSQL always prefers once it may).
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from api.hub_cli import loop_database
from federation.store.database import Database
from federation.store.tables import jobs

pytestmark = pytest.mark.integration

LOOKUP = sa.select(jobs.c.id).where(jobs.c.id == sa.bindparam("job"))
PLANS = sa.text(
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE :text"
).bindparams(text="SELECT jobs.id %FROM jobs %WHERE jobs.id = $1%")


async def _plans_after(db: Database, runs: int) -> tuple[int, int]:
    """Run the lookup `runs` times on one connection of `db`: how many generic and custom
    plans PostgreSQL gave the prepared statement."""
    async with db.connection() as conn:
        for _ in range(runs):
            assert (await conn.execute(LOOKUP, {"job": uuid.uuid4()})).all() == []
        generic, custom = (await conn.execute(PLANS)).one()
    return generic, custom


async def test_the_loops_statements_are_planned_again_each_time(db: Database) -> None:
    loop_db = loop_database(db.url)  # what `suanpan-hub schedule` runs its loop on
    try:
        assert await _plans_after(loop_db, 8) == (0, 8)
    finally:
        await loop_db.close()


async def test_otherwise_postgresql_keeps_a_generic_plan_after_five_runs(db: Database) -> None:
    plain = Database(db.url, pool_size=1)
    try:
        assert await _plans_after(plain, 8) == (3, 5)
    finally:
        await plain.close()
