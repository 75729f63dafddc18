"""Shared fixtures: a real PostgreSQL (embedded by default, `DATABASE_URL` to use another), and
the pinned helm and promtool (deploy/tools; built right after collection when a selected test
needs one, so a cold build does not count against one test's timeout; a failed build fails
the fixture, never skips)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from deploy.local.binaries import BuildError
from deploy.tools import Tool, ensure_tool
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


TOOL_FIXTURES: dict[str, Tool] = {"helm_bin": "helm", "promtool_bin": "promtool"}
_tools: dict[Tool, Path | BuildError] = {}


def _tool(tool: Tool) -> Path | BuildError:
    if tool not in _tools:
        try:
            _tools[tool] = ensure_tool(tool)
        except BuildError as exc:
            _tools[tool] = exc
    return _tools[tool]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the tools the selected tests need before the first test runs."""
    if session.config.option.collectonly:
        return
    for fixture, tool in TOOL_FIXTURES.items():
        if any(fixture in getattr(item, "fixturenames", ()) for item in session.items):
            _tool(tool)


def _tool_path(tool: Tool) -> Path:
    result = _tool(tool)
    if isinstance(result, BuildError):
        pytest.fail(f"cannot build {tool}: {result}", pytrace=False)
    return result


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    """The pinned helm binary."""
    return _tool_path("helm")


@pytest.fixture(scope="session")
def promtool_bin() -> Path:
    """The pinned promtool binary."""
    return _tool_path("promtool")
