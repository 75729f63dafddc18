"""Apply the alembic migrations programmatically (used by `suanpan-hub migrate`, demo, tests)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

import migrations
from federation.store.database import async_url

_SCRIPTS = Path(migrations.__file__).resolve().parent


def alembic_config(url: str) -> Config:
    """An alembic config for `url` that works from a source checkout or an installed package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


async def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision`."""
    await asyncio.to_thread(command.upgrade, alembic_config(url), revision)


async def downgrade(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision`."""
    await asyncio.to_thread(command.downgrade, alembic_config(url), revision)


async def current_revision(url: str) -> str | None:
    """The schema revision the database at `url` is at (None: never migrated)."""
    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_revision()
            )
    finally:
        await engine.dispose()
