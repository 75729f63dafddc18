"""API tokens: issued once in clear, stored only as a SHA-256 digest; they expire, and are
rotated by issuing a successor while the old one keeps working until revoked or its overlap
ends."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from federation.errors import Conflict, NotFound
from federation.store.records import Principal, Role
from federation.store.tables import api_tokens

TOKEN_PREFIX = "sp_"
DEFAULT_TTL_S = 90 * 86400  # tokens issued through the API expire after 90 days unless told


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
    expires_at: datetime | None
    rotated_from: uuid.UUID | None


_INFO = (
    api_tokens.c.id,
    api_tokens.c.name,
    api_tokens.c.role,
    api_tokens.c.tenant_id,
    api_tokens.c.cluster_id,
    api_tokens.c.created_at,
    api_tokens.c.revoked_at,
    api_tokens.c.expires_at,
    api_tokens.c.rotated_from,
)


def new_token(prefix: str = TOKEN_PREFIX) -> str:
    """A fresh high-entropy token string (API tokens `sp_`; cluster bootstrap tokens and
    credentials have prefixes of their own)."""
    return prefix + secrets.token_urlsafe(32)


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
    ttl_s: int | None = None,
    rotated_from: uuid.UUID | None = None,
) -> tuple[TokenInfo, str]:
    """Store a token (a fresh one unless given) valid for `ttl_s` seconds (None: forever);
    return its metadata and clear text."""
    clear = token or new_token()
    row = (
        await conn.execute(
            sa.insert(api_tokens)
            .values(
                name=name,
                token_hash=digest(clear),
                role=role,
                tenant_id=tenant_id,
                cluster_id=cluster_id,
                expires_at=None if ttl_s is None else sa.func.now() + timedelta(seconds=ttl_s),
                rotated_from=rotated_from,
            )
            .returning(*_INFO)
        )
    ).one()
    return TokenInfo(**row._mapping), clear


async def authenticate(conn: AsyncConnection, token: str) -> Principal | None:
    """The principal of an unrevoked token (possibly expired: see `Principal.expired`),
    else None."""
    row = (
        await conn.execute(
            sa.select(
                api_tokens.c.id,
                api_tokens.c.role,
                api_tokens.c.tenant_id,
                api_tokens.c.cluster_id,
                api_tokens.c.expires_at,
            ).where(api_tokens.c.token_hash == digest(token), api_tokens.c.revoked_at.is_(None))
        )
    ).one_or_none()
    if row is None:
        return None
    return Principal(
        token_id=row.id,
        role=row.role,
        tenant_id=row.tenant_id,
        cluster_id=row.cluster_id,
        expires_at=row.expires_at,
    )


async def rotate(
    conn: AsyncConnection, token_id: uuid.UUID, *, ttl_s: int | None, overlap_s: int | None
) -> tuple[TokenInfo, str]:
    """Issue a successor of a live token (same name, role and binding) valid for `ttl_s`
    (None: as long as the old token was, or `DEFAULT_TTL_S` if it never expires); the old
    token keeps working until revoked or, given `overlap_s`, at most that much longer.
    Returns the successor's metadata and clear text."""
    old = (
        await conn.execute(
            sa.select(api_tokens, (api_tokens.c.expires_at <= sa.func.now()).label("expired"))
            .where(api_tokens.c.id == token_id)
            .with_for_update()
        )
    ).one_or_none()
    if old is None:
        raise NotFound("token", str(token_id))
    if old.revoked_at is not None or old.expired:
        raise Conflict(f"token {token_id} is revoked or expired; issue a new one")
    if overlap_s is not None:
        await conn.execute(
            sa.update(api_tokens)
            .where(api_tokens.c.id == token_id)
            .values(
                expires_at=sa.func.least(
                    api_tokens.c.expires_at, sa.func.now() + timedelta(seconds=overlap_s)
                )
            )
        )
    if ttl_s is None:
        lifetime = old.expires_at - old.created_at if old.expires_at else None
        ttl_s = round(lifetime.total_seconds()) if lifetime else DEFAULT_TTL_S
    return await issue(
        conn,
        name=old.name,
        role=old.role,
        tenant_id=old.tenant_id,
        cluster_id=old.cluster_id,
        ttl_s=ttl_s,
        rotated_from=token_id,
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
    """Whether a live (unrevoked, unexpired) admin token exists (bootstrap check)."""
    found = await conn.scalar(
        sa.select(sa.literal(True))
        .where(
            api_tokens.c.role == "admin",
            api_tokens.c.revoked_at.is_(None),
            sa.or_(api_tokens.c.expires_at.is_(None), api_tokens.c.expires_at > sa.func.now()),
        )
        .limit(1)
    )
    return bool(found)


async def list_tokens(conn: AsyncConnection) -> list[TokenInfo]:
    """Every token's metadata (never the secret)."""
    rows = await conn.execute(sa.select(*_INFO).order_by(api_tokens.c.created_at))
    return [TokenInfo(**r._mapping) for r in rows]


async def revoke_cluster_tokens(conn: AsyncConnection, cluster_id: uuid.UUID) -> None:
    """Revoke every agent token bound to a cluster (the cluster was revoked)."""
    await conn.execute(
        sa.update(api_tokens)
        .where(api_tokens.c.cluster_id == cluster_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=sa.func.now())
    )
