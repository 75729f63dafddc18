"""The JSON log lines of the hub and the agent: one object a line, the request id while one is
bound, tokens scrubbed from messages and tracebacks."""

from __future__ import annotations

import json
import logging
import sys

from federation.logs import CURRENT_ID, JsonFormatter, redact

TOKEN = "sp_AbCdEf0123456789_-xyz"


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    info = sys.exc_info() if exc else None
    return logging.LogRecord("suanpan.test", logging.ERROR, __file__, 1, message, args, info)


def test_a_line_is_json_with_the_bound_request_id() -> None:
    formatter = JsonFormatter()
    assert "requestId" not in json.loads(formatter.format(_record("alone")))
    bound = CURRENT_ID.set("req-7")
    try:
        line = json.loads(formatter.format(_record("got %d", 3)))
    finally:
        CURRENT_ID.reset(bound)
    assert line["message"] == "got 3" and line["requestId"] == "req-7"
    assert (line["level"], line["logger"]) == ("ERROR", "suanpan.test")


def test_tokens_are_scrubbed_from_messages_and_tracebacks() -> None:
    assert redact(f"Authorization: Bearer {TOKEN}") == "Authorization: Bearer [redacted]"
    assert redact(f"token={TOKEN}.") == "token=[redacted]."
    assert redact("bearer abc.def-ghi and more") == "bearer [redacted] and more"
    for cluster_secret in ("spb_AbCdEf0123456789", "spc_AbCdEf0123456789"):  # bootstrap, credential
        assert redact(f'{{"token": "{cluster_secret}"}}') == '{"token": "[redacted]"}'
    try:
        raise ValueError(f"bad header {TOKEN}")
    except ValueError:
        text = JsonFormatter().format(_record("failed for %s", TOKEN, exc=True))
    assert TOKEN not in text
    assert "[redacted]" in json.loads(text)["exception"]
