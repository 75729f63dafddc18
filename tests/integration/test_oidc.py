"""OIDC bearer JWTs against a real JWKS served on loopback, with keys made in the test."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from api.app import create_app
from federation.hubconfig import Bucket, GroupRole, HubConfig, OidcConfig, RateLimits
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from tests.integration.conftest import ADMIN_TOKEN, Hub, HubTestServer

pytestmark = pytest.mark.integration

AUDIENCE = "suanpan"
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass
class Provider:
    """An identity provider on loopback: a discovery document and a JWKS that can change."""

    issuer: str = ""
    keys: dict[str, PrivateKey] = field(default_factory=dict)
    jwks_hits: int = 0

    def add_key(self, kid: str, key: PrivateKey | None = None) -> PrivateKey:
        self.keys[kid] = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self.keys[kid]

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid, key in self.keys.items():
            algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = algorithm.to_jwk(key.public_key(), as_dict=True)
            out.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": out}

    def token(self, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "alice@example.com",
            "iat": now,
            "exp": now + 300,
            "groups": ["ml-team"],
            **claims,
        }
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None},
            self.keys[kid],
            algorithm=alg,
            headers={"kid": kid},
        )


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    idp = Provider()

    async def discovery(_: web.Request) -> web.Response:
        return web.json_response({"issuer": idp.issuer, "jwks_uri": f"{idp.issuer}/jwks"})

    async def jwks(_: web.Request) -> web.Response:
        idp.jwks_hits += 1
        return web.json_response(idp.jwks())

    app = web.Application()
    app.router.add_get("/realms/ml/.well-known/openid-configuration", discovery)
    app.router.add_get("/realms/ml/jwks", jwks)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    idp.issuer = str(server.make_url("/realms/ml"))
    idp.add_key("k1")
    yield idp
    await server.close()


MakeHub = Callable[..., Awaitable[Hub]]


@pytest.fixture
async def make_hub(db: Database, provider: Provider) -> AsyncIterator[MakeHub]:
    """A hub accepting the provider's tokens, with a tenant `ml` (keys refetched per call)."""
    clients: list[TestClient[Any, Any]] = []

    async def make(
        refresh_s: float = 0.0, jwks_uri: str | None = None, limits: RateLimits | None = None
    ) -> Hub:
        oidc = OidcConfig(
            issuer=provider.issuer,
            audience=AUDIENCE,
            jwks_uri=jwks_uri,
            clock_skew_s=5,
            admin_groups=("platform-admins",),
            groups=(
                GroupRole("ml-team", "ml", "member"),
                GroupRole("ml-observers", "ml", "viewer"),
            ),
            jwks_refresh_s=refresh_s,
        )
        await ensure_admin_token(db, ADMIN_TOKEN)
        app = create_app(db, config=HubConfig(oidc=oidc, rate_limits=limits or RateLimits()))
        client: TestClient[Any, Any] = TestClient(HubTestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        hub = Hub(client, db)
        if (await hub.call("GET", "/v1/tenants/ml"))[0] == 404:
            await hub.tenant_with_queue("ml")
        return hub

    yield make
    for client in clients:
        await client.close()


async def test_a_valid_token_gets_the_mapped_role(make_hub: MakeHub, provider: Provider) -> None:
    hub = await make_hub()
    assert await hub.call("GET", "/v1/whoami", token=provider.token()) == (
        200,
        {"role": "member", "tenant": "ml", "subject": "alice@example.com"},
    )
    status, queues = await hub.call("GET", "/v1/queues", token=provider.token())
    assert status == 200 and {q["tenant"] for q in queues["items"]} == {"ml"}
    viewer = provider.token(sub="bob", groups=["other", "ml-observers"])
    assert (await hub.call("GET", "/v1/whoami", token=viewer))[1]["role"] == "viewer"
    provider.add_key("ec1", ec.generate_private_key(ec.SECP256R1()))
    admin = provider.token("ec1", "ES256", sub="root", groups=["platform-admins", "ml-team"])
    assert (await hub.call("GET", "/v1/whoami", token=admin))[1] == {
        "role": "admin",
        "tenant": None,
        "subject": "root",
    }
    assert (await hub.call("GET", "/v1/tokens", token=admin))[0] == 200


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256_with_public_key(provider: Provider) -> str:
    """The algorithm-confusion attack: HMAC keyed with the provider's public key."""
    public = (
        provider.keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    _, claims, _ = provider.token().split(".")
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    signature = hmac.new(public, f"{head}.{claims}".encode(), hashlib.sha256).digest()
    return f"{head}.{claims}.{_b64(signature)}"


def _tampered(provider: Provider) -> str:
    head, claims, signature = provider.token().split(".")
    body = json.loads(base64.urlsafe_b64decode(claims + "=="))
    body["groups"] = ["platform-admins"]
    return f"{head}.{_b64(json.dumps(body).encode())}.{signature}"


def _unsigned(provider: Provider) -> str:
    head = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "k1"}).encode())
    return f"{head}.{provider.token().split('.')[1]}."


def _foreign_key(provider: Provider) -> str:
    """Signed by a key the provider never published, under a known key id."""
    impostor = Provider(issuer=provider.issuer)
    impostor.add_key("k1")
    return impostor.token()


def _unknown_kid(provider: Provider) -> str:
    stranger = Provider(issuer=provider.issuer)
    stranger.add_key("ghost")
    return stranger.token("ghost")


BAD_TOKENS: dict[str, tuple[Callable[[Provider], str], str]] = {
    "alg none": (_unsigned, "JWT algorithm 'none' is not accepted"),
    "HS256 with the public key": (_hs256_with_public_key, "JWT algorithm 'HS256' is not accepted"),
    "wrong issuer": (lambda p: p.token(iss="https://evil.example.com"), "Invalid issuer"),
    "wrong audience": (lambda p: p.token(aud="someone-else"), "Audience doesn't match"),
    "expired": (lambda p: p.token(exp=int(time.time()) - 30), "Signature has expired"),
    "not yet valid": (lambda p: p.token(nbf=int(time.time()) + 120), "not yet valid"),
    "no expiry": (lambda p: p.token(exp=None), 'missing the "exp" claim'),
    "unknown kid": (_unknown_kid, "key 'ghost', unknown to the provider"),
    "tampered payload": (_tampered, "Signature verification failed"),
    "signed by another key": (_foreign_key, "Signature verification failed"),
    "not a JWT": (lambda p: "a.b.c", "malformed JWT"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
async def test_a_bad_token_is_refused(make_hub: MakeHub, provider: Provider, case: str) -> None:
    hub = await make_hub()
    make, detail = BAD_TOKENS[case]
    status, problem = await hub.call("GET", "/v1/whoami", token=make(provider))
    assert status == 401, problem
    assert problem["type"].endswith("/unauthorized") and detail in problem["detail"], problem
    assert (await hub.call("GET", "/v1/whoami", token=provider.token()))[0] == 200


async def test_a_rotated_key_is_picked_up(make_hub: MakeHub, provider: Provider) -> None:
    hub = await make_hub(refresh_s=0.0)
    assert (await hub.call("GET", "/v1/whoami", token=provider.token()))[0] == 200
    del provider.keys["k1"]
    provider.add_key("k2")
    assert (await hub.call("GET", "/v1/whoami", token=provider.token("k2")))[0] == 200


async def test_unknown_key_ids_refetch_the_keys_at_most_once_per_interval(
    make_hub: MakeHub, provider: Provider
) -> None:
    hub = await make_hub(refresh_s=3600)
    assert (await hub.call("GET", "/v1/whoami", token=provider.token()))[0] == 200
    hits = provider.jwks_hits
    stranger = Provider(issuer=provider.issuer)
    for n in range(5):
        stranger.add_key(f"forged-{n}")
        assert (await hub.call("GET", "/v1/whoami", token=stranger.token(f"forged-{n}")))[0] == 401
    assert provider.jwks_hits == hits


async def test_a_user_in_no_mapped_group_is_forbidden(
    make_hub: MakeHub, provider: Provider
) -> None:
    hub = await make_hub()
    outsider = provider.token(sub="mallory", groups=["marketing"])
    for path in ("/v1/tenants/ml", "/v1/tenants/ml/queues", "/v1/jobs"):
        status, problem = await hub.call("GET", path, token=outsider)
        assert status == 403 and "no group mapped" in problem["detail"], problem


async def test_an_unreachable_provider_is_503_not_500(
    make_hub: MakeHub, provider: Provider
) -> None:
    hub = await make_hub(jwks_uri="http://127.0.0.1:9/jwks")
    status, problem = await hub.call("GET", "/v1/whoami", token=provider.token())
    assert status == 503 and problem["type"].endswith("/identity-provider"), problem
    assert (await hub.call("GET", "/v1/whoami"))[0] == 200  # API tokens still work


async def test_each_user_has_a_rate_limit_of_their_own(
    make_hub: MakeHub, provider: Provider
) -> None:
    """Users signed in through the provider have no token id: each is limited as themselves
    (their subject), not in one bucket shared by every user."""
    hub = await make_hub(limits=RateLimits(True, Bucket(0.1, 4), Bucket(100, 1000)))
    alice, bob = provider.token(), provider.token(sub="bob@example.com")
    statuses = [(await hub.call("GET", "/v1/whoami", token=alice))[0] for _ in range(5)]
    assert statuses == [200] * 4 + [429]
    assert (await hub.call("GET", "/v1/whoami", token=bob))[0] == 200
