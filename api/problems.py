"""RFC 7807 problem documents: every error the API returns has this shape."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from pydantic import ValidationError
from sqlalchemy import exc as sa_exc

from federation.errors import FieldError, InvalidInput, SuanpanError, Unauthorized
from federation.k8s_names import DNS_LABEL
from federation.store.database import DATABASE_DOWN, is_collision, is_outage
from federation.validation import field_path
from federation.wire.http import retry_after_header

PROBLEM_TYPE_BASE = "https://suanpan.io/problems/"
DNS_LABEL_MESSAGE = (
    "must be a DNS-1123 label: lowercase letters, digits and '-', alphanumeric at both ends"
)
NUL_MESSAGE = "must not contain the NUL character (\\u0000)"
log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

RETRY_AFTER_S = 2


def problem_response(
    status: int,
    title: str,
    detail: str,
    kind: str,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> web.Response:
    """A problem+json response."""
    body = {"type": PROBLEM_TYPE_BASE + kind, "title": title, "status": status, "detail": detail}
    body.update(extra)
    return web.Response(
        status=status,
        text=json.dumps(body),
        content_type="application/problem+json",
        headers=headers,
    )


def problem_body(exc: SuanpanError) -> dict[str, Any]:
    """The problem document of a domain error."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + exc.kind,
        "title": exc.title,
        "status": exc.status,
        "detail": exc.detail,
        **exc.extra,
    }
    if exc.errors:
        body["errors"] = [e.as_dict() for e in exc.errors]
    return body


def _expected(error: Any) -> str:
    if error["type"] == "finite_number":  # NaN or an infinity (JSON has neither)
        return "a finite number"
    ctx = error.get("ctx") or {}
    for key, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if key in ctx:
            return f"{sign} {ctx[key]}"
    if "pattern" in ctx:
        return f"matches {ctx['pattern']}"
    if "expected" in ctx:
        return str(ctx["expected"])
    for key, label in (("min_length", "at least"), ("max_length", "at most")):
        if key in ctx:
            return f"{label} {ctx[key]} items/characters"
    return ""


def field_errors(exc: ValidationError, prefix: tuple[str | int, ...] = ()) -> list[FieldError]:
    """Turn a pydantic error into field errors with dotted paths (aliases, as the user wrote)."""
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "string_pattern_mismatch" and err["ctx"]["pattern"] == DNS_LABEL:
            message = DNS_LABEL_MESSAGE
        elif isinstance(err.get("input"), str) and "\x00" in err["input"]:
            message = NUL_MESSAGE
        out.append(FieldError(field_path(prefix + loc) or "(body)", message, _expected(err)))
    return out


def invalid(exc: ValidationError, what: str, prefix: tuple[str | int, ...] = ()) -> InvalidInput:
    """An InvalidInput error for a failed validation of `what`."""
    errors = field_errors(exc, prefix)
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return InvalidInput(f"invalid {what}: {first.path}: {first.message}{more}", errors)


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map domain errors and aiohttp's HTTP errors to problem documents."""
    try:
        return await handler(request)
    except SuanpanError as exc:
        headers = (
            {"WWW-Authenticate": _challenge(request)} if isinstance(exc, Unauthorized) else None
        )
        response = web.Response(
            status=exc.status,
            text=json.dumps(problem_body(exc)),
            content_type="application/problem+json",
            headers=headers,
        )
        if exc.status == 408:  # the rest of the body may still come: the connection is done
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kinds = {404: "not-found", 405: "method-not-allowed", 413: "too-large"}
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return problem_response(
            exc.status, exc.reason, exc.text or exc.reason, kinds.get(exc.status, "http"), allow
        )
    except DATABASE_DOWN as exc:
        return _unavailable(request, exc)
    except sa_exc.StatementError as exc:
        if is_outage(exc):  # the connection was lost in the middle of the statement
            return _unavailable(request, exc)
        if is_collision(exc):  # rolled back whole: the same request may be sent again
            detail = "the request collided with another and nothing was written; retry it"
            return _unavailable(request, exc, detail, retry_after_s=1)
        # never log the exception's text: it carries the statement's parameters (specs, env)
        log.error(
            "database statement failed on %s %s: %s\n%s%s",
            request.method,
            request.path,
            _kind(exc),
            exc.statement,
            "".join(traceback.format_tb(exc.__traceback__)),
        )
        return problem_response(500, "Internal error", "unexpected error; see hub logs", "internal")
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem_response(500, "Internal error", "unexpected error; see hub logs", "internal")


def _unavailable(
    request: web.Request,
    exc: BaseException,
    detail: str = "the database does not answer; retry later",
    retry_after_s: int = RETRY_AFTER_S,
) -> web.Response:
    """503 with `Retry-After`: the database does not answer, or rolled the request back."""
    log.error("database unavailable on %s %s: %s", request.method, request.path, _kind(exc))
    response = problem_response(503, "Service unavailable", detail, "unavailable")
    response.headers.update(retry_after_header(retry_after_s))
    return response


def _challenge(request: web.Request) -> str:
    """The RFC 6750 challenge of a 401: `invalid_token` when a token was sent."""
    if request.headers.get("Authorization"):
        return 'Bearer realm="suanpan", error="invalid_token"'
    return 'Bearer realm="suanpan"'


def _kind(exc: BaseException) -> str:
    """An exception's class and, for a database error, its SQLSTATE (never its message)."""
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    name = type(orig).__name__ if orig is not None else type(exc).__name__
    return f"{name} (SQLSTATE {code})" if code else name
