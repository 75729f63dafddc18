"""Wake-ups over PostgreSQL LISTEN/NOTIFY: writers notify at commit, waiters on any replica wake.

Used for the agents' long-poll of assignments and for the scheduling loop. A missed
notification only delays a waiter until its timeout: correctness never depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

PLACEMENTS = "suanpan_placements"  # payload: cluster id
JOBS = "suanpan_jobs"  # payload: "" (something to schedule)

log = logging.getLogger(__name__)


async def notify(conn: AsyncConnection, channel: str, payload: str = "") -> None:
    """Queue a notification; PostgreSQL delivers it when the transaction commits."""
    await conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})


def asyncpg_dsn(url: str) -> str:
    """A DSN asyncpg understands from any SQLAlchemy-style PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    """One LISTEN connection per process; `wait(channel, key)` returns on a matching notify."""

    def __init__(self, url: str) -> None:
        self._dsn = asyncpg_dsn(url)
        self._conn: asyncpg.Connection | None = None
        self._events: dict[tuple[str, str], set[asyncio.Event]] = defaultdict(set)

    async def start(self, *channels: str) -> None:
        """Connect and listen on `channels`."""
        self._conn = await asyncpg.connect(self._dsn)
        for channel in channels:
            await self._conn.add_listener(channel, self._on_notify)

    async def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    def _on_notify(self, _conn: object, _pid: int, channel: str, payload: str) -> None:
        for key in ((channel, payload), (channel, "")):
            for event in self._events.get(key, ()):
                event.set()

    async def wait(self, channel: str, key: str = "", seconds: float = 30.0) -> bool:
        """Wait for a notification on `channel` with payload `key` ("" = any); False on timeout."""
        event = asyncio.Event()
        waiters = self._events[(channel, key)]
        waiters.add(event)
        try:
            async with asyncio.timeout(seconds):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            waiters.discard(event)
            if not waiters:
                self._events.pop((channel, key), None)
