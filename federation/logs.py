"""Structured logs of the hub and the agent: one JSON object a line on stderr, carrying the id
of the unit of work being served (the hub's request id), with bearer tokens scrubbed."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime

CURRENT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
# a bearer credential, or anything shaped like a hub secret (API token `sp_`, cluster bootstrap
# token `spb_`, cluster credential `spc_`), wherever it appears in a message
SECRET = re.compile(r"(?i)(bearer\s+)\S+|\bsp[bc]?_[A-Za-z0-9_-]{8,}")


def redact(text: str) -> str:
    """`text` with bearer credentials and hub secrets replaced by `[redacted]`."""
    return SECRET.sub(lambda m: (m.group(1) or "") + "[redacted]", text)


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: time, level, logger, message, request id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        request_id = CURRENT_ID.get()
        if request_id is not None:
            line["requestId"] = request_id
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line)


def configure_logging(level: int | str = logging.WARNING) -> None:
    """Send every log record and warning to stderr as a JSON line. SQLAlchemy's engine stays
    at WARNING whatever the level: at INFO it would log every statement's parameters."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    logging.captureWarnings(True)
