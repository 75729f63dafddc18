"""Bearer-token authentication: resolves the caller before any handler runs."""

from __future__ import annotations

import time
import uuid

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from api.context import ctx
from api.problems import Handler
from federation.errors import Unauthorized
from federation.store import registration, tokens
from federation.store.records import Principal

PRINCIPAL = web.RequestKey("principal", Principal)
CACHE_TTL_S = 2.0
OUTAGE_GRACE_S = 300.0  # while the database is unreachable, tokens valid this recently pass


class TokenCache:
    """Valid tokens seen recently, so most requests skip the token lookup.

    Only valid tokens are cached, for `CACHE_TTL_S`: a revocation takes effect at once on the
    replica that revoked (it clears the cache) and within the TTL on the others. While the
    database cannot be reached (nothing can be revoked then), a token seen valid within
    `OUTAGE_GRACE_S` still passes, so that `/metrics` can report the outage.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Principal, float]] = {}  # token -> (principal, seen at)

    def get(self, token: str, max_age_s: float = CACHE_TTL_S) -> Principal | None:
        """The cached principal of `token`, if seen valid within `max_age_s`."""
        entry = self._entries.get(token)
        if entry is None or time.monotonic() - entry[1] > max_age_s:
            return None
        return entry[0]

    def put(self, token: str, principal: Principal) -> None:
        """Remember a valid token."""
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[token] = (principal, time.monotonic())

    def clear(self) -> None:
        """Forget every token (after a revocation)."""
        self._entries.clear()


TOKENS = TokenCache()


async def _authenticate(conn: AsyncConnection, token: str) -> Principal | None:
    """The principal of an API token, or of a cluster credential (told apart by prefix)."""
    if token.startswith(registration.CREDENTIAL_PREFIX):
        return await registration.authenticate(conn, token)
    return await tokens.authenticate(conn, token)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Attach `request["principal"]` from the Authorization header; a bad token is 401."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization must be 'Bearer <token>'")
        token = token.strip()
        principal = TOKENS.get(token)
        if principal is None:
            try:
                async with ctx(request).db.connection() as conn:
                    principal = await _authenticate(conn, token)
            except (OSError, SQLAlchemyError):
                principal = TOKENS.get(token, OUTAGE_GRACE_S)
                if principal is None:
                    raise
            if principal is None:
                raise Unauthorized("unknown or revoked token")
            TOKENS.put(token, principal)
        request[PRINCIPAL] = principal
    return await handler(request)


def tenant_scope(principal: Principal) -> uuid.UUID | None:
    """The tenant a caller is confined to (None: sees every tenant)."""
    return principal.tenant_id if principal.role in ("member", "viewer") else None
