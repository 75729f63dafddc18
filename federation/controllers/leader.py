"""Leadership among hub replicas: a PostgreSQL session advisory lock held on its own connection.

Only the leader runs the controllers. The lock dies with its connection, so a crashed leader
is replaced as soon as PostgreSQL notices; the leader re-checks the connection before it writes.
"""

from __future__ import annotations

import contextlib

import asyncpg

from federation.store.listener import asyncpg_dsn

LOCK_KEY = 7281002


class Leadership:
    """Try to become, and check whether still, the leader."""

    def __init__(self, url: str, key: int = LOCK_KEY) -> None:
        self._dsn = asyncpg_dsn(url)
        self._key = key
        self._conn: asyncpg.Connection | None = None

    async def acquire(self) -> bool:
        """Take the lock if free; True when this replica leads."""
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn)
        return bool(await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key))

    async def held(self) -> bool:
        """Whether the lock is still held (its connection alive and answering)."""
        if self._conn is None or self._conn.is_closed():
            return False
        try:
            return bool(
                await self._conn.fetchval(
                    "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory'"
                    " AND objid = $1 AND pid = pg_backend_pid() AND granted",
                    self._key,
                )
            )
        except (asyncpg.PostgresError, OSError):
            return False

    async def release(self) -> None:
        """Give up leadership."""
        if self._conn is not None:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await self._conn.close()
            self._conn = None
