"""Health, metrics, the OpenAPI document and its docs page."""

from __future__ import annotations

import asyncio
import html
import json
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import SQLAlchemyError

from api.context import ctx
from api.metrics import DATABASE_UP, STATE
from api.registry import Call, Reply, openapi_document
from api.routes import API
from api.schemas import Health
from api.security import page_headers
from federation.errors import Forbidden
from federation.metrics import REGISTRY
from federation.store import clusters as cluster_store
from federation.store import jobs as job_store
from federation.store.records import Role

READY_TIMEOUT_S = 5.0


@API.op("GET", "/healthz", summary="Liveness", tag="meta", roles=(), response=Health)
async def healthz(call: Call) -> Reply:
    """The process is up."""
    return Reply(200, Health(status="ok", version=ctx(call.request).version))


@API.op("GET", "/readyz", summary="Readiness", tag="meta", roles=(), response=Health, errors=(503,))
async def readyz(call: Call) -> Reply:
    """The database answers (within `READY_TIMEOUT_S`); else 503."""
    async with asyncio.timeout(READY_TIMEOUT_S), ctx(call.request).db.connection() as conn:
        await conn.exec_driver_sql("SELECT 1")
    return Reply(200, Health(status="ok", version=ctx(call.request).version))


METRICS_ROLES: frozenset[Role] = frozenset({"admin", "viewer"})


@API.op(
    "GET",
    "/metrics",
    summary="Prometheus metrics",
    tag="meta",
    roles=METRICS_ROLES,
)
async def metrics(call: Call) -> web.Response:
    """Metrics in the Prometheus text format, for an admin or a viewer token bound to no tenant
    (they name every tenant, queue and cluster); served, with `suanpan_database_up 0`, also
    when the database cannot be read."""
    if call.who.tenant_id is not None:
        raise Forbidden("metrics cover every tenant: use a viewer token bound to no tenant")
    try:
        async with asyncio.timeout(5), ctx(call.request).db.connection() as conn:
            STATE.jobs = await job_store.state_counts(conn)
            STATE.queued = await job_store.queued_counts(conn)
            summaries = await cluster_store.summaries(conn)
        DATABASE_UP.set(1)
    except (OSError, TimeoutError, SQLAlchemyError):
        DATABASE_UP.set(0)
    else:
        now = time.time()
        STATE.capacity = [
            (c.name, f.flavor, f.total, f.allocated_milli) for c in summaries for f in c.flavors
        ]
        STATE.clusters = [
            (c.name, c.state, now - c.last_heartbeat.timestamp() if c.last_heartbeat else None)
            for c in summaries
        ]
    response = web.Response(body=generate_latest(REGISTRY))
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


def _document(call: Call) -> dict[str, Any]:
    return openapi_document(API, title="Suanpan hub API", version=ctx(call.request).version)


@API.op("GET", "/openapi.json", summary="OpenAPI document", tag="meta", roles=())
async def openapi(call: Call) -> web.Response:
    """The OpenAPI 3.1 document, generated from the same models that validate requests."""
    return web.json_response(_document(call))


@API.op("GET", "/docs", summary="API reference page", tag="meta", roles=())
async def docs(call: Call) -> web.Response:
    """A self-contained HTML reference of every operation and schema (no external assets)."""
    doc = _document(call)
    rows = []
    paths: dict[str, dict[str, Any]] = doc["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            codes = ", ".join(op["responses"])
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code></td>"
                f"<td>{html.escape(op['summary'])}</td><td>{codes}</td></tr>"
            )
    schemas = json.dumps(doc["components"], indent=2)
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Suanpan API</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:2px 10px}"
        "pre{background:#f4f4f4;padding:1em}</style></head><body>"
        "<h1>Suanpan hub API v1</h1><p>Machine-readable: <a href='/openapi.json'>/openapi.json</a>."
        " Authenticate with <code>Authorization: Bearer &lt;token&gt;</code>.</p>"
        "<table><tr><th>Method</th><th>Path</th><th>Summary</th><th>Responses</th></tr>"
        + "".join(rows)
        + "</table><h2>Schemas</h2><pre>"
        + html.escape(schemas)
        + "</pre></body></html>"
    )
    return web.Response(text=page, content_type="text/html", headers=page_headers(page))


_WEB_PAGE = (Path(__file__).resolve().parent.parent / "web" / "index.html").read_text()
_WEB_HEADERS = page_headers(_WEB_PAGE, connect=True)


@API.op("GET", "/ui", summary="Web view", tag="meta", roles=())
async def web_view(call: Call) -> web.Response:
    """A read-only web view of clusters, accelerators and jobs (it calls the API with the token
    the user types; the page itself holds no data)."""
    return web.Response(text=_WEB_PAGE, content_type="text/html", headers=_WEB_HEADERS)
