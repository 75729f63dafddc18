"""Health, metrics and the OpenAPI document."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import SQLAlchemyError

from api.context import ctx
from api.metrics import DATABASE_UP, STATE
from api.registry import Call, Reply, openapi_document
from api.routes import API
from api.schemas import Health
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
    response = web.Response(body=generate_latest(REGISTRY) + ctx(call.request).loop_metrics())
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    return response


@API.op("GET", "/openapi.json", summary="OpenAPI document", tag="meta", roles=())
async def openapi(call: Call) -> web.Response:
    """The OpenAPI 3.1 document, generated from the same models that validate requests."""
    version = ctx(call.request).version
    return web.json_response(openapi_document(API, title="Suanpan hub API", version=version))
