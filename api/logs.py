"""Request ids: every request gets one (the client's `X-Request-Id` when well formed), its
logs carry it (federation/logs.py writes them) and its response returns it."""

from __future__ import annotations

import logging
import re
import time
import uuid

from aiohttp import web

from api.problems import Handler
from federation.logs import CURRENT_ID

REQUEST_ID_HEADER = "X-Request-Id"
WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
REQUEST_ID = web.RequestKey("request_id", str)
access_log = logging.getLogger("suanpan.access")


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Give the request an id, bind it to the logs written while serving it, answer with it,
    and log the request at INFO (method, path without the query, status, milliseconds)."""
    given = request.headers.get(REQUEST_ID_HEADER, "")
    request_id = given if WELL_FORMED_ID.fullmatch(given) else uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    bound = CURRENT_ID.set(request_id)
    start = time.perf_counter()
    try:
        response = await handler(request)
        response.headers[REQUEST_ID_HEADER] = request_id
        access_log.info(
            "%s %s %d %.1f ms",
            request.method,
            request.path,
            response.status,
            1000 * (time.perf_counter() - start),
        )
        return response
    finally:
        CURRENT_ID.reset(bound)
