"""OpenID Connect bearer JWTs: verified against the provider's JWKS, groups mapped to roles.

The signing keys are fetched with aiohttp (from `jwksUri`, or the `jwks_uri` of the issuer's
discovery document) and cached; they are refetched when older than `jwksMaxAgeSeconds`, and
when a token names a key id the cache lacks (a rotated key), at most once per
`jwksRefreshSeconds` so that forged key ids cannot make the hub flood the provider.
Verification is PyJWT's: only the configured asymmetric algorithms, issuer, audience, `exp`,
`nbf` and `iat` (within the clock skew) and the signature; `sub`, `exp`, `iss` and `aud` are
required.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import jwt
from aiohttp import web

from federation.errors import Forbidden, NotFound, SuanpanError, Unauthorized
from federation.hubconfig import OidcConfig
from federation.store import tenancy
from federation.store.database import Database
from federation.store.records import Principal, Role
from federation.store.tokens import TOKEN_PREFIX

FETCH_TIMEOUT_S = 5.0
KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}  # algorithm prefix -> JWK kty


class ProviderUnavailable(SuanpanError):
    """The identity provider's keys cannot be fetched, so a token cannot be checked."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, 503, "Identity provider unavailable", "identity-provider")


def looks_like_jwt(token: str) -> bool:
    """Whether a bearer token has a JWT's shape (API tokens have no dots)."""
    return not token.startswith(TOKEN_PREFIX) and token.count(".") == 2


@dataclass(frozen=True)
class SigningKey:
    """One key of the provider's JWKS: its type, the algorithm it is pinned to, if any."""

    key_type: str
    alg: str | None
    key: Any  # a cryptography public key


def signing_keys(jwks: dict[str, Any]) -> dict[str, SigningKey]:
    """The usable signature keys of a JWKS document by key id (others are skipped)."""
    found: dict[str, SigningKey] = {}
    entries = jwks.get("keys")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        if entry.get("use", "sig") != "sig" or entry.get("kty") not in KEY_TYPES.values():
            continue
        try:
            key = jwt.PyJWK(entry)
        except jwt.PyJWTError:
            continue
        found[entry["kid"]] = SigningKey(entry["kty"], entry.get("alg"), key.key)
    return found


class OidcVerifier:
    """Checks an OIDC provider's JWTs and maps their groups to a role."""

    def __init__(self, config: OidcConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._jwks_uri = config.jwks_uri
        self._discovery: dict[str, Any] | None = None
        self._keys: dict[str, SigningKey] = {}
        self._fetched_at = -float("inf")
        self._lock = asyncio.Lock()

    async def session(self, _app: web.Application) -> AsyncIterator[None]:
        """Own the HTTP session for the application's lifetime (a cleanup context)."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S))
        yield
        await self._session.close()
        self._session = None

    async def authenticate(self, db: Database, token: str) -> Principal:
        """The principal of a valid JWT; raises Unauthorized, Forbidden or ProviderUnavailable."""
        claims = await self.verify(token)
        role, tenant = self.role_of(claims)
        tenant_id = None
        if tenant is not None:
            try:
                async with db.connection() as conn:
                    tenant_id = (await tenancy.get_tenant(conn, tenant)).id
            except NotFound as exc:
                raise Forbidden(
                    f"the group mapping names tenant {tenant!r}, which does not exist"
                ) from exc
        return Principal(
            token_id=None,
            role=role,
            tenant_id=tenant_id,
            expires_at=datetime.fromtimestamp(claims["exp"], UTC),
            subject=str(claims["sub"]),
        )

    async def verify(self, token: str) -> dict[str, Any]:
        """The claims of a JWT whose signature, issuer, audience and times are valid."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"malformed JWT: {exc}") from exc
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.config.algorithms:
            raise Unauthorized(f"JWT algorithm {alg!r} is not accepted")
        if not isinstance(kid, str):
            raise Unauthorized("JWT header names no key id (kid)")
        key = await self._key(kid)
        if key.key_type != KEY_TYPES[alg[:2]] or key.alg not in (alg, None):
            raise Unauthorized(f"JWT algorithm {alg!r} does not match key {kid!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.clock_skew_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            raise Unauthorized(f"JWT refused: {exc}") from exc
        return claims

    def role_of(self, claims: dict[str, Any]) -> tuple[Role, str | None]:
        """The role and tenant the token's groups map to: an admin group makes an admin,
        else the first matching tenant mapping; raises Forbidden when none matches."""
        groups = _claim(claims, self.config.groups_claim)
        if isinstance(groups, str):
            groups = [groups]
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            groups = []
        if set(groups) & set(self.config.admin_groups):
            return "admin", None
        for mapping in self.config.groups:
            if mapping.group in groups:
                return mapping.role, mapping.tenant
        raise Forbidden(f"OIDC subject {claims['sub']!r} is in no group mapped to a role")

    async def _key(self, kid: str) -> SigningKey:
        """The provider's key `kid`, refetching the key set when stale or missing it."""
        if self._wants_fetch(kid):
            async with self._lock:
                if self._wants_fetch(kid):  # another request may have fetched meanwhile
                    await self._fetch()
        key = self._keys.get(kid)
        if key is None:
            raise Unauthorized(f"JWT signed with key {kid!r}, unknown to the provider")
        return key

    def _wants_fetch(self, kid: str) -> bool:
        age = time.monotonic() - self._fetched_at
        if age > self.config.jwks_max_age_s:
            return True
        return kid not in self._keys and age >= self.config.jwks_refresh_s

    async def _fetch(self) -> None:
        """Replace the cached keys by the provider's; on failure keep the old ones, unless
        there are none (then ProviderUnavailable)."""
        self._fetched_at = time.monotonic()
        try:
            if self._jwks_uri is None:
                self._jwks_uri = str((await self._discover())["jwks_uri"])
            keys = signing_keys(await self._get_json(self._jwks_uri))
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
            if not self._keys:
                raise ProviderUnavailable(f"cannot fetch the provider's keys: {exc}") from exc
            return
        self._keys = keys

    async def _discover(self) -> dict[str, Any]:
        """The issuer's discovery document, fetched once (it must name this issuer)."""
        if self._discovery is None:
            doc = await self._get_json(
                self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
            )
            if doc.get("issuer") != self.config.issuer:
                raise ValueError("the discovery document names another issuer")
            self._discovery = doc
        return self._discovery

    async def endpoints(self) -> tuple[str, str]:
        """The provider's authorization and token endpoints (for the console's sign-in);
        raises ProviderUnavailable when they cannot be discovered."""
        try:
            doc = await self._discover()
            return str(doc["authorization_endpoint"]), str(doc["token_endpoint"])
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as exc:
            raise ProviderUnavailable(f"cannot discover the provider's endpoints: {exc}") from exc

    async def _get_json(self, url: str) -> dict[str, Any]:
        assert self._session is not None, "the verifier's session is not started"
        async with self._session.get(url) as resp:
            resp.raise_for_status()
            doc = await resp.json(content_type=None)
        if not isinstance(doc, dict):
            raise ValueError(f"{url} did not return a JSON object")
        return doc


def _claim(claims: dict[str, Any], path: str) -> Any:
    """A claim by dotted path (`realm_access.roles`), None when absent."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


OIDC = web.AppKey("oidc", OidcVerifier)


def install_oidc(app: web.Application, config: OidcConfig) -> None:
    """Accept the provider's JWTs in `app` (the auth middleware finds the verifier)."""
    verifier = OidcVerifier(config)
    app[OIDC] = verifier
    app.cleanup_ctx.append(verifier.session)
