"""`suanpan-hub migrate` says what it did: a first migration is not "already at the latest"."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from api.hub_cli import _migrate
from federation.store.database import async_url

pytestmark = pytest.mark.integration


async def test_migrate_reports_a_first_migration_then_that_nothing_is_left(pg_url: str) -> None:
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(async_url(pg_url), isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.exec_driver_sql(f"CREATE DATABASE {name}")
    fresh = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    try:
        first = await _migrate(fresh)
        assert first.startswith("database migrated from an empty schema to "), first
        assert "already" not in first
        assert (await _migrate(fresh)).startswith("database already at the latest schema")
    finally:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.dispose()
