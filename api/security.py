"""The HTTP server's edges: safe headers on every response, problem documents for requests
aiohttp refuses before any handler runs, and the limits and timeouts of a connection."""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from api.problems import PROBLEM_TYPE_BASE

SERVER = "suanpan"  # neither the framework nor the Python version
HEADER_TIMEOUT_S = 30.0  # an idle connection, or one whose request head never completes, closes
MAX_LINE_BYTES = 8190  # request line and each header
MAX_HEADERS = 100
LINGER_S = 2.0  # after an error, how long the rest of an unread body is drained before closing
QUOTED = re.compile(r"""b?['"].*""", re.DOTALL)  # from the first quote on
BASE_HEADERS = {"Server": SERVER, "X-Content-Type-Options": "nosniff"}
FRAME_DENY = {"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}


def page_headers(*connect: str) -> dict[str, str]:
    """Headers of a page the hub serves: a Content-Security-Policy that runs only the hub's
    own script files and lets them call the hub and the origins in `connect`."""
    policy = "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",  # files served by the hub; no inline script runs
            "style-src 'self' 'unsafe-inline'",  # Swagger UI sets style attributes
            " ".join(["connect-src 'self'", *connect]),
            "img-src 'self' data:",  # Swagger UI's icons are data: SVGs
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return {"Content-Security-Policy": policy, **FRAME_DENY}


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: headers every response carries.

    A response to an authenticated request carries private data (and, for an issued token,
    a secret): no cache may keep it.
    """
    response.headers.update(BASE_HEADERS)
    if "Authorization" in request.headers:
        response.headers["Cache-Control"] = "no-store"


class ProblemRequestHandler(RequestHandler):
    """A connection whose errors before routing (a request line or header too long, a
    malformed request) are answered with a problem document, like every other error."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        plain = super().handle_error(request, status, exc, message)
        reason = getattr(exc, "message", None) or message or "the request could not be read"
        # the parser quotes what it could not read (b'...'): a header's value may be a secret
        detail = " ".join(QUOTED.sub("(value not shown)", str(reason)).split())[:300]
        body = {
            "type": PROBLEM_TYPE_BASE + ("bad-request" if status < 500 else "internal"),
            "title": plain.reason,
            "status": status,
            "detail": detail if status < 500 else "unexpected error; see hub logs",
        }
        resp = web.Response(
            status=status,
            text=json.dumps(body),
            content_type="application/problem+json",
            headers=BASE_HEADERS,
        )
        resp.force_close()
        return resp


class _ProblemServer(web.Server):
    def __call__(self) -> RequestHandler:
        return ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


class HubRunner(web.AppRunner):
    """An AppRunner with the hub's connection handling: problem documents for parser errors,
    bounded request heads, and a timeout on connections that send nothing."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", HEADER_TIMEOUT_S)
        kwargs.setdefault("max_line_size", MAX_LINE_BYTES)
        kwargs.setdefault("max_field_size", MAX_LINE_BYTES)
        kwargs.setdefault("max_headers", MAX_HEADERS)
        kwargs.setdefault("lingering_time", LINGER_S)
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _ProblemServer  # same state; only the connection class differs
        return server
