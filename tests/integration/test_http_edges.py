"""The HTTP server's edges: requests aiohttp refuses before routing get problem documents,
slow clients cannot hold a connection, readiness says 503 while the database is down, metrics
need a token, failed statements do not log their parameters, and every response carries
safe headers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from aiohttp import web
from aiohttp.test_utils import TestClient

import api.registry
from api.app import create_app
from api.problems import problem_middleware
from api.security import HubRunner
from federation.store import migrate
from federation.store.bootstrap import ensure_admin_token
from federation.store.database import Database
from federation.store.embedded import EmbeddedPostgres
from tests.integration.conftest import ADMIN_TOKEN, Hub, HubTestServer

pytestmark = pytest.mark.integration


async def _raw(hub: Hub, data: bytes, *, read_for: float = 5.0) -> bytes:
    """Send raw bytes on a fresh connection; what the server answers before it closes."""
    reader, writer = await asyncio.open_connection(hub.client.host, hub.client.port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), read_for)
    finally:
        writer.close()


def _split(raw: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 10_000 + b"\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-%d: 1\r\n" % i for i in range(200))
        + b"\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 32 + b"\r\n\r\n",  # TLS hello
        b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=[
        "long-request-line",
        "long-header",
        "many-headers",
        "header-without-colon",
        "nul-in-header",
        "tls-on-http-port",
        "bad-version",
        "negative-length",
        "bad-chunk",
    ],
)
async def test_requests_refused_by_the_parser_get_a_problem_document(
    hub: Hub, request_bytes: bytes
) -> None:
    status, headers, problem = _split(await _raw(hub, request_bytes))
    assert 400 <= status < 500
    assert headers["content-type"].startswith("application/problem+json")
    assert problem["status"] == status and problem["detail"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["server"] == "suanpan"


async def test_a_body_that_never_arrives_times_out_with_408(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.registry, "BODY_TIMEOUT_S", 0.5)
    token = await hub.tenant_with_queue("acme")
    head = (
        f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    status, _, problem = _split(await _raw(hub, head.encode()))
    assert status == 408 and problem["type"].endswith("/timeout")


async def test_a_request_head_that_never_completes_is_closed() -> None:
    app = web.Application()
    runner = HubRunner(app, keepalive_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
        writer.close()
    finally:
        await runner.cleanup()


@pytest.fixture
async def stoppable() -> AsyncIterator[tuple[EmbeddedPostgres, TestClient[Any, Any]]]:
    """A hub over its own PostgreSQL, which the test may stop."""
    server = EmbeddedPostgres()
    url = await server.start()
    await migrate.upgrade(url)
    db = Database(url, pool_size=2)
    await ensure_admin_token(db, ADMIN_TOKEN)
    client: TestClient[Any, Any] = TestClient(HubTestServer(create_app(db), host="127.0.0.1"))
    await client.start_server()
    try:
        yield server, client
    finally:
        await client.close()
        await db.close()
        await server.stop()


async def test_readiness_is_503_while_the_database_is_down(
    stoppable: tuple[EmbeddedPostgres, TestClient[Any, Any]],
) -> None:
    server, client = stoppable
    assert (await client.get("/readyz")).status == 200
    await server.stop()
    for path in ("/readyz", "/v1/clusters"):
        resp = await client.get(path, headers={"Authorization": "Bearer sp_other"})
        assert resp.status == 503, await resp.text()
        assert resp.content_type == "application/problem+json"
        assert (await resp.json())["type"].endswith("/unavailable")


async def test_metrics_need_a_fleet_wide_token(hub: Hub) -> None:
    member = await hub.tenant_with_queue("acme")
    _, bound = await hub.call(
        "POST", "/v1/tokens", json={"name": "v1", "role": "viewer", "tenant": "acme"}
    )
    _, fleet = await hub.call("POST", "/v1/tokens", json={"name": "prom", "role": "viewer"})
    resp = await hub.client.get("/metrics")
    assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await hub.call("GET", "/metrics", member))[0] == 403
    assert (await hub.call("GET", "/metrics", bound["token"]))[0] == 403
    for token in (ADMIN_TOKEN, fleet["token"]):
        status, text = await hub.call("GET", "/metrics", token)
        assert status == 200 and "suanpan_jobs" in text


async def test_a_failed_statement_logs_no_parameters(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-very-secret-env-value"

    async def failing(_: web.Request) -> web.Response:
        async with db.connection() as conn:
            await conn.execute(sa.text("SELECT CAST(:v AS integer)"), {"v": secret})
        return web.Response()

    app = web.Application(middlewares=[problem_middleware])
    app.router.add_get("/boom", failing)
    client: TestClient[Any, Any] = TestClient(HubTestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        with caplog.at_level(logging.DEBUG):
            resp = await client.get("/boom")
        assert resp.status == 500 and secret not in await resp.text()
    finally:
        await client.close()
    assert "database statement failed" in caplog.text
    assert secret not in caplog.text
    with pytest.raises(sa.exc.DBAPIError) as raised:
        async with db.connection() as conn:
            await conn.execute(sa.text("SELECT CAST(:v AS integer)"), {"v": secret})
    # the engine hides parameters; the driver's own message may still quote a bad argument,
    # which is why the API logs only the error's class, SQLSTATE and statement
    assert "parameters hidden" in str(raised.value)


async def test_every_response_carries_safe_headers(hub: Hub) -> None:
    for path, token in [
        ("/healthz", None),
        ("/v1/clusters", ADMIN_TOKEN),
        ("/v1/nothing-here", ADMIN_TOKEN),
        ("/v1/clusters", None),
        ("/openapi.json", None),
    ]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        resp = await hub.client.get(path, headers=headers)
        assert resp.headers["X-Content-Type-Options"] == "nosniff", path
        assert resp.headers["Server"] == "suanpan", path
        if token:
            assert resp.headers["Cache-Control"] == "no-store", path


async def test_an_issued_token_is_never_cached(hub: Hub) -> None:
    resp = await hub.client.post(
        "/v1/tokens",
        json={"name": "t", "role": "viewer"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert resp.status == 201 and (await resp.json())["token"]
    assert resp.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("auth", "error"),
    [(None, False), ("Bearer sp_unknown", True), ("Basic dXNlcjpwdw==", True), ("Bearer ", True)],
)
async def test_401_carries_a_bearer_challenge(hub: Hub, auth: str | None, error: bool) -> None:
    resp = await hub.client.get("/v1/clusters", headers={"Authorization": auth} if auth else {})
    assert resp.status == 401
    challenge = resp.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer realm=")
    assert ('error="invalid_token"' in challenge) is error


@pytest.mark.parametrize("path", ["/ui", "/docs"])
async def test_pages_forbid_framing_and_foreign_scripts(hub: Hub, path: str) -> None:
    resp = await hub.client.get(path)
    assert resp.status == 200
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0]
    assert resp.headers["X-Frame-Options"] == "DENY"


def test_the_web_view_keeps_no_token_in_local_storage() -> None:
    page = (Path(api.registry.__file__).parent / "web" / "index.html").read_text()
    assert "localStorage" not in page and "sessionStorage" in page


async def test_an_undeclared_method_is_a_405_with_allow(hub: Hub) -> None:
    resp = await hub.client.request("TRACE", "/healthz")
    assert resp.status == 405 and "GET" in resp.headers["Allow"]
    assert resp.content_type == "application/problem+json"


async def test_the_document_describes_what_is_sent_and_links_what_is_created(hub: Hub) -> None:
    _, doc = await hub.call("GET", "/openapi.json", None)
    schemas = doc["components"]["schemas"]
    assert "memoryMib" in schemas["FlavorOut"]["properties"]
    assert "preemptibleDefault" in schemas["PriorityClassOut"]["properties"]
    created = doc["paths"]["/v1/tenants"]["post"]["responses"]["201"]["links"]
    assert created["get_tenant"]["parameters"] == {"tenant": "$response.body#/name"}
    queue = doc["paths"]["/v1/tenants/{tenant}/queues"]["post"]["responses"]["201"]["links"]
    assert queue["get_queue"]["parameters"] == {
        "tenant": "$request.path.tenant",
        "queue": "$response.body#/name",
    }
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert {"400", "503"} <= set(op["responses"]), (method, path)
