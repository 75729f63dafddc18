"""API tokens: issued once in clear, stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import NotFound
from federation.store.records import Principal, Role
from federation.store.tables import api_tokens

TOKEN_PREFIX = "sp_"


@dataclass(frozen=True)
class TokenInfo:
    """A token's metadata (never its secret)."""

    id: uuid.UUID
    name: str
    role: str
    tenant_id: uuid.UUID | None
    cluster_id: uuid.UUID | None
    created_at: datetime
    revoked_at: datetime | None


def new_token() -> str:
    """A fresh high-entropy token string."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """The stored form of a token (tokens are random, so a plain hash suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


async def issue(
    conn: AsyncConnection,
    *,
    name: str,
    role: Role,
    tenant_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    token: str | None = None,
) -> tuple[uuid.UUID, str]:
    """Store a token (a fresh one unless given) and return its id and clear text."""
    clear = token or new_token()
    token_id = await conn.scalar(
        sa.insert(api_tokens)
        .values(
            name=name,
            token_hash=digest(clear),
            role=role,
            tenant_id=tenant_id,
            cluster_id=cluster_id,
        )
        .returning(api_tokens.c.id)
    )
    assert token_id is not None
    return token_id, clear


async def authenticate(conn: AsyncConnection, token: str) -> Principal | None:
    """The principal of a valid, unrevoked token, else None."""
    row = (
        await conn.execute(
            sa.select(
                api_tokens.c.id, api_tokens.c.role, api_tokens.c.tenant_id, api_tokens.c.cluster_id
            ).where(api_tokens.c.token_hash == digest(token), api_tokens.c.revoked_at.is_(None))
        )
    ).one_or_none()
    if row is None:
        return None
    return Principal(
        token_id=row.id, role=row.role, tenant_id=row.tenant_id, cluster_id=row.cluster_id
    )


async def revoke(conn: AsyncConnection, token_id: uuid.UUID) -> None:
    """Revoke a token; revoking twice is harmless."""
    result = await conn.execute(
        sa.update(api_tokens)
        .where(api_tokens.c.id == token_id)
        .values(revoked_at=sa.func.coalesce(api_tokens.c.revoked_at, sa.func.now()))
    )
    if result.rowcount == 0:
        raise NotFound("token", str(token_id))


async def any_admin(conn: AsyncConnection) -> bool:
    """Whether an unrevoked admin token exists (bootstrap check)."""
    found = await conn.scalar(
        sa.select(sa.literal(True))
        .where(api_tokens.c.role == "admin", api_tokens.c.revoked_at.is_(None))
        .limit(1)
    )
    return bool(found)


async def list_tokens(conn: AsyncConnection) -> list[TokenInfo]:
    """Every token's metadata (never the secret)."""
    rows = await conn.execute(
        sa.select(
            api_tokens.c.id,
            api_tokens.c.name,
            api_tokens.c.role,
            api_tokens.c.tenant_id,
            api_tokens.c.cluster_id,
            api_tokens.c.created_at,
            api_tokens.c.revoked_at,
        ).order_by(api_tokens.c.created_at)
    )
    return [TokenInfo(**r._mapping) for r in rows]


async def revoke_cluster_tokens(conn: AsyncConnection, cluster_id: uuid.UUID) -> None:
    """Revoke every agent token bound to a cluster (the cluster was revoked)."""
    await conn.execute(
        sa.update(api_tokens)
        .where(api_tokens.c.cluster_id == cluster_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=sa.func.now())
    )
