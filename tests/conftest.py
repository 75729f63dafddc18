"""Shared fixtures: a real PostgreSQL (embedded by default, `DATABASE_URL` to use another)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from federation.store import migrate
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.store.tables import metadata

KEEP = {"priority_classes"}


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a migrated PostgreSQL for the whole session."""
    url = os.environ.get("DATABASE_URL")
    embedded = None
    if not url:
        embedded = EmbeddedPostgres()
        url = asyncio.run(embedded.start())
    asyncio.run(migrate.upgrade(url))
    yield url
    if embedded is not None:
        asyncio.run(embedded.stop())


@pytest.fixture
async def db(pg_url: str) -> AsyncIterator[Database]:
    """A database emptied of everything but the seeded priority classes after each test."""
    database = Database(pg_url, pool_size=5)
    yield database
    names = ", ".join(t.name for t in metadata.sorted_tables if t.name not in KEEP)
    async with database.transaction() as conn:
        await conn.exec_driver_sql(f"TRUNCATE {names} CASCADE")
    await database.close()
