"""A PostgreSQL outage: the API answers 503 problem+json with Retry-After (never a 500), the
scheduling loop pauses, and both resume by themselves once the same server is back."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import pytest

from deploy.fleet import Fleet
from deploy.local.kube import wait_for
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from federation.store.listener import JOBS, Listener, notify
from tests.integration.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.integration


async def test_a_database_outage_is_a_503_and_everything_resumes(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path / "data")
    url = await server.start()
    await migrate.upgrade(url)
    db = Database(url, pool_size=2)
    await ensure_admin_token(db, ADMIN_TOKEN)
    fleet = Fleet(db, ADMIN_TOKEN)
    await fleet.start_hub()
    fleet.start_loop()
    try:
        await fleet.call("POST", "/v1/tenants", json={"name": "acme"})
        await server.stop()
        for path in ("/v1/tenants", "/v1/clusters", "/readyz"):
            status, headers, body = await get(fleet, path)
            assert status == 503, (path, body)
            if path != "/readyz":
                assert headers["Content-Type"].startswith("application/problem+json")
                assert headers["Retry-After"] == "2" and "database" in body
        listener = Listener(url)
        await listener.start(JOBS)  # started while the database is down: no error
        await asyncio.sleep(3)  # the loop meets the outage too
        assert fleet.loop_task is not None and not fleet.loop_task.done()
        server = EmbeddedPostgres(tmp_path / "data")
        assert await server.start() == url

        async def serving() -> bool:
            return (await get(fleet, "/v1/tenants"))[0] == 200

        await wait_for("the API answering again", serving, 15)
        assert not fleet.loop_task.done()
        await listener.wait(JOBS, seconds=0.1)  # reconnects
        woken = asyncio.create_task(listener.wait(JOBS, seconds=5))
        await asyncio.sleep(0.2)
        async with db.transaction() as conn:
            await notify(conn, JOBS)
        assert await woken  # LISTEN works again after the outage
        await listener.close()
    finally:
        await fleet.close()
        await db.close()
        await server.stop()


async def get(fleet: Fleet, path: str) -> tuple[int, Mapping[str, str], str]:
    """Status, headers and text of GET `path` with the admin token."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with aiohttp.ClientSession(headers=headers) as s, s.get(fleet.url + path) as r:
        return r.status, r.headers, await r.text()
