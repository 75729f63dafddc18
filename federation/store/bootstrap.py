"""First start: give an empty database its first admin token."""

from __future__ import annotations

from federation.store import tokens
from federation.store.database import Database


async def ensure_admin_token(db: Database, given: str | None) -> str | None:
    """Store the first admin token if none exists; return its clear text when one was created.

    `given` (from `SUANPAN_ADMIN_TOKEN`) is used as is; otherwise a fresh token is generated.
    """
    async with db.transaction() as conn:
        await conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7281001)")
        if await tokens.any_admin(conn):
            return None
        _, clear = await tokens.issue(conn, name="bootstrap-admin", role="admin", token=given)
    return clear
