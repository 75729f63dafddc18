"""`suanpan-hub migrate` says what it did: a first migration is not "already at the latest"."""

from __future__ import annotations

import uuid

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from api.hub_cli import _migrate
from federation.store.database import async_url
from federation.store.tables import metadata

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


async def test_the_migrations_build_exactly_the_tables_the_code_declares(pg_url: str) -> None:
    """Alembic's own comparison of the migrated schema with `tables.metadata` finds nothing: a
    column, index or key declared in code but not migrated (or the reverse) fails here."""
    engine = create_async_engine(async_url(pg_url))

    def compare(sync_conn: Connection) -> list[object]:
        context = MigrationContext.configure(sync_conn, opts={"compare_server_default": False})
        return list(compare_metadata(context, metadata))

    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(compare)
    finally:
        await engine.dispose()
    assert diff == []
