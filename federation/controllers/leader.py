"""Leadership among hub replicas: a PostgreSQL session advisory lock held on its own connection.

Only the leader runs the controllers. The lock dies with its connection, so a crashed leader
is replaced as soon as PostgreSQL notices. The scheduler itself is fenced: each write
transaction first takes a shared transaction lock on `FENCE_KEY` and checks, inside that
transaction, that this replica's lock connection still holds the leader lock; a new leader
takes `FENCE_KEY` exclusively once before it does anything, which waits for any write a deposed
leader began before the takeover. So a deposed leader's write either commits before the new
leader starts or is refused (LostLeadership), never interleaves.

A frozen leader (a paused VM, SIGSTOP) keeps its connections open, and so its lock: the lock
connection therefore runs with `idle_session_timeout` and the leader pings it (`keep_alive`)
five times as often; frozen for `FROZEN_AFTER_S`, it loses the connection and the lock, and
another replica takes over. The lock connection and its pings live on an event loop in a thread
of their own (`LoopThread`): a leader whose own loop is busy (a snapshot read of seconds under
CPU contention, a long GC pause) is not frozen and keeps its lock; a frozen process stops every
thread. Its write transactions run with
`idle_in_transaction_session_timeout`, so a transaction it froze in does not keep the new leader
waiting on the fence either.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.aio import LoopThread
from federation.store.listener import asyncpg_dsn

LOCK_KEY = 7281002
FENCE_KEY = LOCK_KEY + 1
FROZEN_AFTER_S = 5.0  # a leader silent this long on its database loses the lock

_HOLDS = sa.text(
    "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = :key"
    " AND pid = :pid AND granted"
)


class LostLeadership(Exception):
    """The advisory lock is gone: another replica may lead now."""


class Leadership:
    """Try to become, and check whether still, the leader."""

    def __init__(self, url: str, key: int = LOCK_KEY) -> None:
        self._dsn = asyncpg_dsn(url)
        self._key = key
        self._thread = LoopThread("leadership")  # owns the lock connection
        self._conn: asyncpg.Connection | None = None
        self._pid: int | None = None  # the backend of the lock's connection while leading

    async def acquire(self) -> bool:
        """Take the lock if free, then wait out a deposed leader's write in flight; True when
        this replica leads."""
        return await self._thread.call(self._acquire())

    async def _acquire(self) -> bool:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn)
        if not await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key):
            return False
        await self._conn.execute("SELECT pg_advisory_lock($1)", FENCE_KEY)
        await self._conn.execute("SELECT pg_advisory_unlock($1)", FENCE_KEY)
        await self._conn.execute(f"SET idle_session_timeout = {FROZEN_AFTER_S * 1000:.0f}")
        self._pid = self._conn.get_server_pid()
        return True

    async def keep_alive(self) -> None:
        """Ping the lock connection five times per `FROZEN_AFTER_S` while leading (run as a
        task; it ends when the connection does; cancelled, the pings stop), so that only a
        frozen leader's session times out."""
        await self._thread.call(self._keep_alive())

    async def _keep_alive(self) -> None:
        while self._conn is not None and not self._conn.is_closed():
            try:
                await self._conn.execute("SELECT 1", timeout=FROZEN_AFTER_S)
            except (
                asyncpg.PostgresError,
                asyncpg.InterfaceError,
                asyncpg.InternalClientError,
                OSError,
                TimeoutError,
            ):
                return  # the next fence finds the lock gone
            await asyncio.sleep(FROZEN_AFTER_S / 5)

    async def fence(self, conn: AsyncConnection) -> None:
        """First thing in a write transaction: raise LostLeadership unless this replica still
        leads; a takeover then waits for the transaction to end (or for the session to time out
        when this replica froze in it)."""
        await conn.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock_shared(:key),"
                " set_config('idle_in_transaction_session_timeout', :ms, true)"
            ),
            {"key": FENCE_KEY, "ms": f"{FROZEN_AFTER_S * 1000:.0f}"},
        )
        if self._pid is None or not await conn.scalar(_HOLDS, {"key": self._key, "pid": self._pid}):
            raise LostLeadership()

    async def release(self) -> None:
        """Give up leadership."""
        await self._thread.call(self._release())
        await self._thread.stop()

    async def _release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await self._conn.close()
            self._conn = None
