"""Signing in to the console at an OpenID Connect provider, in headless Chromium: the
authorization-code flow with PKCE as a public client, against a minimal issuer this test
serves on loopback (discovery, JWKS, authorize, token; RS256 JWTs signed with PyJWT). No
OIDC provider small enough to run in a test installs from PyPI; the issuer checks what a
real one checks of a public client: registered client and redirect URI, S256 challenge, a
single-use code bound to them and to the verifier."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import jwt
import pytest
import pytest_asyncio
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from deploy.browser import Page, chromium
from deploy.fleet import Fleet, local_fleet
from deploy.local.processes import free_ports
from federation.hubconfig import ConsoleClient, GroupRole, HubConfig, OidcConfig

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ADMIN = "sp_console_oidc_admin"
AUDIENCE = "suanpan"
CLIENT = "suanpan-console"


@dataclass
class Issuer:
    """An identity provider whose signed-in user is `user` (its login page is not modelled:
    every authorization request is the user's consent)."""

    url: str
    redirect_uri: str = ""  # the console's, registered for CLIENT
    user: dict[str, Any] = field(default_factory=dict)
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    exchanged: int = 0

    def sign(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "iat": now, "exp": now + 300, **self.user, **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})

    async def discovery(self, _: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks",
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def jwks(self, _: web.Request) -> web.Response:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return web.json_response({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]})

    async def authorize(self, request: web.Request) -> web.Response:
        q = request.query
        if q.get("client_id") != CLIENT or q.get("redirect_uri") != self.redirect_uri:
            return web.Response(status=400, text="unknown client or redirect URI")
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
            return web.Response(status=400, text="code flow with S256 only")
        if "openid" not in q.get("scope", "").split():
            return web.Response(status=400, text="openid scope missing")
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"challenge": q["code_challenge"], "nonce": q.get("nonce")}
        answer = urlencode({"code": code, "state": q.get("state", "")})
        raise web.HTTPFound(f"{self.redirect_uri}?{answer}")

    async def token(self, request: web.Request) -> web.Response:
        cors = {"Access-Control-Allow-Origin": request.headers.get("Origin", "*")}
        form = await request.post()
        grant = self.codes.pop(str(form.get("code")), None)  # single use
        verifier = str(form.get("code_verifier", "")).encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if (
            grant is None
            or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != CLIENT
            or form.get("redirect_uri") != self.redirect_uri
            or challenge.decode() != grant["challenge"]
        ):
            return web.json_response({"error": "invalid_grant"}, status=400, headers=cors)
        self.exchanged += 1
        tokens = {
            "token_type": "Bearer",
            "expires_in": 300,
            "access_token": self.sign(aud=AUDIENCE),
            "id_token": self.sign(aud=CLIENT, nonce=grant["nonce"]),
        }
        return web.json_response(tokens, headers=cors)


@dataclass
class Signed:
    fleet: Fleet
    issuer: Issuer
    page: Page


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def signed() -> AsyncIterator[Signed]:
    port = free_ports(1)[0]
    issuer = Issuer(f"http://127.0.0.1:{port}/realms/ml")
    app = web.Application()
    for path, handler in [
        ("/.well-known/openid-configuration", issuer.discovery),
        ("/jwks", issuer.jwks),
        ("/authorize", issuer.authorize),
    ]:
        app.router.add_get("/realms/ml" + path, handler)
    app.router.add_post("/realms/ml/token", issuer.token)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    oidc = OidcConfig(
        issuer=issuer.url,
        audience=AUDIENCE,
        admin_groups=("platform-admins",),
        groups=(GroupRole("ml-observers", "ml", "viewer"),),
        console=ConsoleClient(CLIENT, ("openid", "profile")),
    )
    try:
        async with local_fleet(ADMIN, config=HubConfig(oidc=oidc)) as fleet, chromium() as page:
            await fleet.call("POST", "/v1/tenants", json={"name": "ml"})
            await fleet.add_cluster("beijing-a", "dc-beijing")
            issuer.redirect_uri = f"{fleet.url}/ui"
            yield Signed(fleet, issuer, page)
    finally:
        await runner.cleanup()


async def _sign_in_at_provider(s: Signed, user: dict[str, Any]) -> dict[str, Any]:
    """Open the console, press the provider's button; what the console shows once back."""
    s.issuer.user = user
    await s.page.goto(s.fleet.url + "/ui#/queues")
    await s.page.evaluate("sessionStorage.clear()")
    await s.page.goto(s.fleet.url + "/ui#/queues")
    await s.page.wait("!document.getElementById('oidc-signin').hidden")
    await s.page.evaluate("document.getElementById('oidc-signin').click()")
    # back from the provider and signed in: a token in this tab again (the page before the
    # click may still show the queues of an earlier sign-in while the browser leaves it)
    await s.page.wait(
        "sessionStorage.getItem('suanpan-token') !== null"
        " && document.getElementById('main').dataset.page === 'queues'"
    )
    await s.page.evaluate("location.hash = '#/fleet'")
    try:
        await s.page.wait(
            "document.querySelector('#clusters tr[data-cluster=beijing-a]') !== null", 30
        )
    except TimeoutError:
        shown = await s.page.evaluate(
            "({error: document.getElementById('error').textContent, hash: location.hash,"
            " page: document.getElementById('main').dataset.route})"
        )
        raise AssertionError(f"the fleet page did not show beijing-a: {shown}") from None
    shown: dict[str, Any] = await s.page.evaluate(
        "({who: document.getElementById('who-role').textContent, url: location.href,"
        " local: localStorage.length, token: sessionStorage.getItem('suanpan-token'),"
        " login: sessionStorage.getItem('suanpan-oidc-login'),"
        " actions: document.querySelectorAll('[data-action]').length})"
    )
    return shown


async def test_a_user_signs_in_at_the_provider_with_pkce_and_gets_the_groups_role(
    signed: Signed,
) -> None:
    exchanged = signed.issuer.exchanged
    shown = await _sign_in_at_provider(signed, {"sub": "alice", "groups": ["platform-admins"]})
    assert signed.issuer.exchanged == exchanged + 1
    assert shown["who"] == "admin · alice"
    assert shown["url"] == f"{signed.fleet.url}/ui#/fleet"  # code and state gone
    assert shown["local"] == 0 and shown["login"] is None
    assert jwt.decode(shown["token"], options={"verify_signature": False})["aud"] == AUDIENCE
    assert shown["actions"] == 2  # cordon and drain


async def test_a_viewer_of_the_provider_is_offered_no_action(signed: Signed) -> None:
    shown = await _sign_in_at_provider(signed, {"sub": "bob", "groups": ["ml-observers"]})
    assert shown["who"] == "viewer · ml · bob"
    assert shown["actions"] == 0


async def test_an_answer_this_tab_did_not_ask_for_signs_nobody_in(signed: Signed) -> None:
    await signed.page.goto(signed.fleet.url + "/ui#/fleet")
    await signed.page.evaluate("sessionStorage.clear()")
    await signed.page.goto(signed.fleet.url + "/ui?code=stolen&state=forged#/fleet")
    error = await signed.page.wait("document.getElementById('error').textContent")
    assert "does not match a sign-in of this tab" in error
    assert await signed.page.evaluate("sessionStorage.getItem('suanpan-token')") is None
    assert await signed.page.evaluate("location.search") == ""


async def test_the_console_page_may_reach_the_token_endpoint_and_runs_no_inline_script(
    signed: Signed,
) -> None:
    tls = signed.fleet.client_tls() or True
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as s,
        s.get(signed.fleet.url + "/ui") as page,
        s.get(signed.fleet.url + "/v1/console") as settings,
    ):
        csp = page.headers["Content-Security-Policy"]
        body = await settings.json()
    policy = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert policy["script-src"] == "'self'"
    origin = urlsplit(signed.issuer.url)
    assert policy["connect-src"] == f"'self' {origin.scheme}://{origin.netloc}"
    assert body == {
        "oidc": {
            "issuer": signed.issuer.url,
            "clientId": CLIENT,
            "scopes": ["openid", "profile"],
            "audience": AUDIENCE,
            "authorizationEndpoint": f"{signed.issuer.url}/authorize",
            "tokenEndpoint": f"{signed.issuer.url}/token",
        }
    }
