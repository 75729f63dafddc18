"""Wake-ups over PostgreSQL LISTEN/NOTIFY: writers notify at commit, waiters on any replica wake.

Used for the agents' long-poll of assignments and for the scheduling loop. A missed
notification only delays a waiter until its timeout: correctness never depends on it. A
connection lost with the database (or never made, the database down at start) is made again
by the next waiter, at most once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

PLACEMENTS = "suanpan_placements"  # payload: cluster id
JOBS = "suanpan_jobs"  # payload: "" (something to schedule)
LOGS = "suanpan_logs"  # payload: "<log request id>:<frame>" (federation.store.logs)

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
        self._queues: dict[tuple[str, str], set[asyncio.Queue[str]]] = defaultdict(set)
        self._channels: tuple[str, ...] = ()
        self._tried = 0.0  # when a connection was last attempted (monotonic)

    async def start(self, *channels: str) -> None:
        """Listen on `channels` (connecting now if the database answers, else later)."""
        self._channels = channels
        await self._connect()

    async def _connect(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            return
        if time.monotonic() - self._tried < 1.0:
            return
        self._tried = time.monotonic()
        try:
            conn = await asyncpg.connect(self._dsn, timeout=5)
            for channel in self._channels:
                await conn.add_listener(channel, self._on_notify)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("LISTEN connection unavailable (%r); waiters poll meanwhile", exc)
            return
        self._conn = conn

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
        for queue in self._queues.get((channel, payload.partition(":")[0]), ()):
            queue.put_nowait(payload.partition(":")[2])

    @contextlib.asynccontextmanager
    async def subscribe(self, channel: str, key: str) -> AsyncIterator[asyncio.Queue[str]]:
        """Every payload `<key>:<rest>` on `channel` while the block runs, as `<rest>` in order.

        Unlike `wait`, a message lost here is lost: callers must expect a gap when the LISTEN
        connection drops, and LISTEN is in place before this returns (or raises)."""
        await self._connect()
        if self._conn is None or self._conn.is_closed():
            raise ConnectionError("no LISTEN connection to the database")
        queue: asyncio.Queue[str] = asyncio.Queue()
        queues = self._queues[(channel, key)]
        queues.add(queue)
        try:
            yield queue
        finally:
            queues.discard(queue)
            if not queues:
                self._queues.pop((channel, key), None)

    async def wait(self, channel: str, key: str = "", seconds: float = 30.0) -> bool:
        """Wait for a notification on `channel` with payload `key` ("" = any); False on timeout."""
        await self._connect()
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
