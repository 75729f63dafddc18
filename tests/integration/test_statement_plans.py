"""The scheduling loop's connections plan every statement for the rows there are when it runs.

asyncpg prepares each statement; after five executions PostgreSQL may keep a generic plan for
it until the tables are analyzed again. A loop started on an empty database would keep plans
made for empty tables while they fill (measured: its scan of 10,000 held jobs took 1.3 s on
such a plan, 36 ms planned afresh). These tests read PostgreSQL's own count of the plans each
prepared statement of the connection was given.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from federation.controllers.row_stamps import HELD_STAMPS
from federation.store.database import Database

pytestmark = pytest.mark.integration

PLANS = sa.text(
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE :scan"
).bindparams(scan="SELECT jobs.id, concat_ws(%")


async def _plans_after(db: Database, runs: int) -> tuple[int, int]:
    """Run the held-rows scan `runs` times on one connection of `db` (its tables empty):
    how many generic and custom plans PostgreSQL gave the prepared statement."""
    async with db.connection() as conn:
        for _ in range(runs):
            assert (await conn.execute(HELD_STAMPS)).all() == []
        generic, custom = (await conn.execute(PLANS)).one()
    return generic, custom


async def test_the_loops_statements_are_planned_again_each_time(db: Database) -> None:
    loop_db = Database(db.url, pool_size=1, custom_plans=True)
    try:
        assert await _plans_after(loop_db, 8) == (0, 8)
    finally:
        await loop_db.close()


async def test_without_it_postgresql_keeps_a_generic_plan_made_on_empty_tables(
    db: Database,
) -> None:
    plain = Database(db.url, pool_size=1)
    try:
        generic, custom = await _plans_after(plain, 8)
    finally:
        await plain.close()
    assert custom == 5 and generic == 3
