"""Bearer-token authentication: resolves the caller before any handler runs (an API token,
or an OIDC provider's JWT where one is configured)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

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


class TokenCache:
    """Valid tokens seen recently, so most requests skip the token lookup.

    Only valid tokens are cached, for `CACHE_TTL_S` and never past their expiry: a revocation
    takes effect at once on the replica that revoked (it clears the cache) and within the TTL
    on the others. While the
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
        if entry[0].expired(datetime.now(UTC)):
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
        principal = TOKENS.get(token)
        if principal is None:
            try:
                principal = await _authenticate(request, token)
            except (OSError, SQLAlchemyError):
                principal = TOKENS.get(token, OUTAGE_GRACE_S)
                if principal is None:
                    raise
            TOKENS.put(token, principal)
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
