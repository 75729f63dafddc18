"""Request ids and the hub's structured logs: one JSON object a line, carrying the id of the
request being served, with bearer tokens scrubbed from every message."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
import uuid
from datetime import UTC, datetime

from aiohttp import web

from api.problems import Handler

REQUEST_ID_HEADER = "X-Request-Id"
WELL_FORMED_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
REQUEST_ID = web.RequestKey("request_id", str)
CURRENT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
# a bearer credential, or anything shaped like a hub token, wherever it appears in a message
SECRET = re.compile(r"(?i)(bearer\s+)\S+|\bsp_[A-Za-z0-9_-]{8,}")
access_log = logging.getLogger("suanpan.access")


def redact(text: str) -> str:
    """`text` with bearer credentials and hub tokens replaced by `[redacted]`."""
    return SECRET.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Give the request an id (the client's `X-Request-Id` when well formed), bind it to the
    logs written while serving it, answer with it, and log the request at INFO."""
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


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            line["requestId"] = request_id
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = CURRENT_ID.get()
        return True


def configure_logging(level: int | str = logging.WARNING) -> None:
    """Send every log record and warning to stderr as a JSON line. SQLAlchemy's engine stays
    at WARNING whatever the level: at INFO it would log every statement's parameters."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(_RequestIdFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    logging.captureWarnings(True)
