"""Bearer-token authentication: resolves the caller before any handler runs."""

from __future__ import annotations

import time
import uuid

from aiohttp import web

from api.context import ctx
from api.problems import Handler
from federation.errors import Unauthorized
from federation.store import tokens
from federation.store.records import Principal

PRINCIPAL = web.RequestKey("principal", Principal)
CACHE_TTL_S = 2.0


class TokenCache:
    """Valid tokens seen recently, so most requests skip the token lookup.

    Only valid tokens are cached, for `CACHE_TTL_S`: a revocation takes effect at once on the
    replica that revoked (it clears the cache) and within the TTL on the others.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Principal, float]] = {}

    def get(self, token: str) -> Principal | None:
        """The cached principal of `token`, if fresh."""
        entry = self._entries.get(token)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def put(self, token: str, principal: Principal) -> None:
        """Remember a valid token."""
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[token] = (principal, time.monotonic() + CACHE_TTL_S)

    def clear(self) -> None:
        """Forget every token (after a revocation)."""
        self._entries.clear()


TOKENS = TokenCache()


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
            async with ctx(request).db.connection() as conn:
                principal = await tokens.authenticate(conn, token)
            if principal is None:
                raise Unauthorized("unknown or revoked token")
            TOKENS.put(token, principal)
        request[PRINCIPAL] = principal
    return await handler(request)


def tenant_scope(principal: Principal) -> uuid.UUID | None:
    """The tenant a caller is confined to (None: sees every tenant)."""
    return principal.tenant_id if principal.role in ("member", "viewer") else None
