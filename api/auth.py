"""Bearer-token authentication: resolves the caller before any handler runs (an API token,
or an OIDC provider's JWT where one is configured)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from api.cache import Recent
from api.context import ctx
from api.oidc import OIDC, looks_like_jwt
from api.problems import Handler
from api.tls import peer_names
from federation.errors import Forbidden, Unauthorized
from federation.store import clusters, registration, tokens
from federation.store.records import Principal

PRINCIPAL = web.RequestKey("principal", Principal)
CACHE_TTL_S = 2.0
OUTAGE_GRACE_S = 300.0  # while the database is unreachable, tokens valid this recently pass


class TokenCache(Recent[str, Principal]):
    """Tokens seen valid recently, so most requests skip the token lookup.

    Only valid tokens are cached, for `CACHE_TTL_S` and never past their expiry: a revocation
    takes effect at once on the replica that revoked (it clears the cache) and within the TTL
    on the others. Requests that miss together share one lookup. While the database cannot be
    reached (nothing can be revoked then), a token seen valid within `OUTAGE_GRACE_S` still
    passes, so that `/metrics` can report the outage.
    """

    def __init__(self) -> None:
        super().__init__(CACHE_TTL_S)

    async def principal(self, token: str, load: Callable[[], Awaitable[Principal]]) -> Principal:
        """The principal of `token`: recently seen, or looked up by `load` (which raises for
        an invalid token)."""
        now = datetime.now(UTC)
        try:
            principal = await self.get(token, load)
        except (OSError, SQLAlchemyError):
            seen = self.recent(token, OUTAGE_GRACE_S)
            if seen is None:
                raise
            principal = seen
        if principal.expired(now):  # seen valid before it expired
            raise Unauthorized("token expired")
        return principal


TOKENS = TokenCache()
# a cluster's name never changes: looked up once per cluster, not on every agent request
CLUSTER_NAMES: dict[uuid.UUID, str] = {}


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Attach `request["principal"]` from the Authorization header; a bad token is 401."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization must be 'Bearer <token>'")
        token = token.strip()
        principal = await TOKENS.principal(token, lambda: _authenticate(request, token))
        await _bind_client_cert(request, principal)
        request[PRINCIPAL] = principal
    return await handler(request)


async def _authenticate(request: web.Request, token: str) -> Principal:
    """The principal of a JWT (where OIDC is configured), of a cluster credential or of an API
    token (told apart by prefix); else 401."""
    verifier = request.app.get(OIDC)
    if verifier is not None and looks_like_jwt(token):
        return await verifier.authenticate(ctx(request).db, token)
    async with ctx(request).db.connection() as conn:
        if token.startswith(registration.CREDENTIAL_PREFIX):
            principal = await registration.authenticate(conn, token)
        else:
            principal = await tokens.authenticate(conn, token)
    if principal is None:
        raise Unauthorized("unknown or revoked token")
    if principal.expired(datetime.now(UTC)):
        raise Unauthorized("token expired")
    return principal


async def _bind_client_cert(request: web.Request, principal: Principal) -> None:
    """An agent presenting a client certificate acts only for the cluster the certificate
    names (CN or DNS SAN): a token of another cluster is refused (403)."""
    names = peer_names(request)
    if names is None or principal.cluster_id is None:
        return
    cluster = CLUSTER_NAMES.get(principal.cluster_id)
    if cluster is None:
        async with ctx(request).db.connection() as conn:
            cluster = await clusters.name_of(conn, principal.cluster_id)
        if cluster is not None:
            CLUSTER_NAMES[principal.cluster_id] = cluster
    if cluster not in names:
        named = ", ".join(sorted(names))
        raise Forbidden(f"the client certificate is for {named}, not this token's cluster")


def tenant_scope(principal: Principal) -> uuid.UUID | None:
    """The tenant a caller is confined to (None: sees every tenant)."""
    return principal.tenant_id if principal.role in ("member", "viewer") else None
