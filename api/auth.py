"""Bearer-token authentication: resolves the caller before any handler runs."""

from __future__ import annotations

import uuid

from aiohttp import web

from api.context import ctx
from api.problems import Handler
from federation.errors import Unauthorized
from federation.store import tokens
from federation.store.records import Principal

PRINCIPAL = web.RequestKey("principal", Principal)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Attach `request["principal"]` from the Authorization header; a bad token is 401."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization must be 'Bearer <token>'")
        async with ctx(request).db.connection() as conn:
            principal = await tokens.authenticate(conn, token.strip())
        if principal is None:
            raise Unauthorized("unknown or revoked token")
        request[PRINCIPAL] = principal
    return await handler(request)


def tenant_scope(principal: Principal) -> uuid.UUID | None:
    """The tenant a caller is confined to (None: sees every tenant)."""
    return principal.tenant_id if principal.role in ("member", "viewer") else None
