"""HTTP server of the extender: POST /filter, /prioritize, /bind; GET /healthz, /readyz, /metrics.

kube-scheduler POSTs JSON to `<urlPrefix>/<verb>` and expects HTTP 200 with errors in the
`Error` field; prioritize has no such field, so a bad prioritize request gets HTTP 400, which
kube-scheduler ignores (the extender's scores are then left out).
"""

from __future__ import annotations

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from cluster_agents.extender.service import Extender
from cluster_agents.extender.wire import binding_result, filter_result

MAX_BODY = 16 * 1024 * 1024  # a pod plus 5,000 node names is far below this


def _json(value: object) -> web.Response:
    return web.Response(body=orjson.dumps(value), content_type="application/json")


def make_app(extender: Extender) -> web.Application:
    """The aiohttp application serving one extender."""

    async def body(request: web.Request) -> object:
        return orjson.loads(await request.read())  # its JSONDecodeError is a ValueError

    async def filter_(request: web.Request) -> web.Response:
        try:
            return _json(extender.filter(await body(request)))
        except ValueError as exc:
            return _json(filter_result(None, error=f"bad request body: {exc}"))

    async def prioritize(request: web.Request) -> web.Response:
        try:
            return _json(extender.prioritize(await body(request)))
        except ValueError as exc:  # bad JSON, WireError, DemandError
            return web.Response(status=400, text=f"bad request: {exc}")

    async def bind(request: web.Request) -> web.Response:
        try:
            return _json(await extender.bind(await body(request)))
        except ValueError as exc:
            return _json(binding_result(f"bad request body: {exc}"))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problem = extender.problem
        return (
            web.Response(text="ok") if problem is None else web.Response(status=503, text=problem)
        )

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=extender.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/filter", filter_)
    app.router.add_post("/prioritize", prioritize)
    app.router.add_post("/bind", bind)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
