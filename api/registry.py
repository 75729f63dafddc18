"""Routes declared once: the same declaration validates requests and writes the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml
from aiohttp import web
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from api.auth import PRINCIPAL
from api.problems import invalid
from federation.errors import (
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    SuanpanError,
    Unauthorized,
)
from federation.store.records import Principal, Role

M = TypeVar("M", bound=BaseModel)

ALL_ROLES: frozenset[Role] = frozenset({"admin", "member", "viewer", "agent"})
READERS: frozenset[Role] = frozenset({"admin", "member", "viewer"})
WRITERS: frozenset[Role] = frozenset({"admin", "member"})
ADMIN: frozenset[Role] = frozenset({"admin"})
BODY_TIMEOUT_S = 60.0  # a client that announces a body must send all of it within this
MAX_YAML_BYTES = 1 << 20  # YAML is parsed in Python: for manifests, not for inventories
INLINE_PARSE_BYTES = 256 << 10  # larger bodies are parsed and validated in a worker thread
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
HEADER_PATTERN = "^[!-~]{1,128}$"  # the documented form of the headers operations read


@dataclass
class Call:
    """One validated request: who calls, path parameters, parsed body and query."""

    request: web.Request
    principal: Principal | None
    body: BaseModel | None
    query: BaseModel | None

    def path(self, name: str) -> str:
        """A path parameter."""
        return self.request.match_info[name]

    def body_as(self, model: type[M]) -> M:
        """The parsed body, typed."""
        assert isinstance(self.body, model)
        return self.body

    def query_as(self, model: type[M]) -> M:
        """The parsed query, typed."""
        assert isinstance(self.query, model)
        return self.query

    @property
    def who(self) -> Principal:
        """The authenticated caller (operations without auth have none)."""
        assert self.principal is not None
        return self.principal


@dataclass(frozen=True)
class Reply:
    """A handler's answer: a status, a model (or None) and extra headers."""

    status: int
    body: BaseModel | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Awaitable[Reply | web.StreamResponse]]


@dataclass(frozen=True)
class Operation:
    """One API operation."""

    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    roles: frozenset[Role]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    errors: tuple[int, ...] = ()
    headers: tuple[str, ...] = ()
    max_body: int = 1 << 20

    @property
    def operation_id(self) -> str:
        return self.handler.__name__

    @property
    def takes_yaml(self) -> bool:
        """Whether the body may be YAML (only where bodies are small: YAML parses slowly)."""
        return self.max_body <= MAX_YAML_BYTES


class _YamlLoader(yaml.SafeLoader):
    """Safe YAML read by the YAML 1.2 core schema, so that it means what its JSON form means:
    only `true`/`false` are booleans (`on`, `off`, `yes`, `no` stay strings), integers are
    decimal (`010` is ten; `0o`, `0x` prefixes), no sexagesimal `1:20`, no timestamps; and no
    aliases (the seed of expansion bombs)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not accepted")
        return super().compose_node(parent, index)

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        """A YAML 1.2 core integer (pyyaml's own reads `010` as octal and `1:20` as 80)."""
        text = str(self.construct_scalar(node))
        if text[:2] in ("0o", "0x"):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text)


for _tag, _pattern, _first in (
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        "float",
        r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        "-+.0123456789",
    ),
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
):
    _YamlLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(rf"^(?:{_pattern})$"), list(_first)
    )
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_core_int)


class BodyTimeout(SuanpanError):
    """The client announced a body and did not send it in time."""

    def __init__(self) -> None:
        super().__init__(
            f"the request body did not arrive within {BODY_TIMEOUT_S:g} s",
            408,
            "Request timeout",
            "timeout",
        )


def _as_json(raw: bytes, content_type: str) -> bytes:
    """The body as JSON text: YAML bodies are converted, JSON ones passed through."""
    if not raw:
        raise InvalidInput("a request body is required")
    if content_type not in YAML_TYPES:
        return raw
    try:
        data = yaml.load(raw, Loader=_YamlLoader)
        return json.dumps(data, allow_nan=False).encode()
    except RecursionError as exc:
        raise InvalidInput("body is not valid YAML: nested too deeply") from exc
    except (ValueError, TypeError, yaml.YAMLError) as exc:
        raise InvalidInput(f"body is not valid YAML: {str(exc).splitlines()[0]}") from exc


def parse_body(model: type[M], raw: bytes, content_type: str) -> M:
    """Validate a JSON or YAML body against `model` strictly: JSON types exactly as declared."""
    try:
        return model.model_validate_json(_as_json(raw, content_type), strict=True)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            raise InvalidInput(f"body is not valid JSON: {first['ctx']['error']}") from exc
        raise invalid(exc, "request body") from exc


def parse_query(model: type[M], request: web.Request) -> M:
    """Validate query parameters against `model`; each may be given once."""
    repeated = sorted({k for k in request.query if len(request.query.getall(k)) > 1})
    if repeated:
        raise InvalidInput(
            f"query parameter {repeated[0]!r} is given more than once",
            [FieldError(f"query.{k}", "given more than once", "one value") for k in repeated],
        )
    try:
        return model.model_validate(dict(request.query), strict=True)
    except ValidationError as exc:
        raise invalid(exc, "query", ("query",)) from exc


class Api:
    """A registry of operations."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def op(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        tag: str,
        roles: Iterable[Role] = READERS,
        body: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        status: int = 200,
        errors: tuple[int, ...] = (),
        headers: tuple[str, ...] = (),
        max_body: int = 1 << 20,
    ) -> Callable[[Handler], Handler]:
        """Declare an operation; the decorated handler receives a validated `Call`."""

        def register(handler: Handler) -> Handler:
            self.operations.append(
                Operation(
                    method,
                    path,
                    handler,
                    summary,
                    tag,
                    frozenset(roles),
                    body,
                    query,
                    response,
                    status,
                    errors,
                    headers,
                    max_body,
                )
            )
            return handler

        return register

    def install(self, app: web.Application) -> None:
        """Add every operation to an aiohttp application."""
        for op in self.operations:
            app.router.add_route(op.method, op.path, _endpoint(op))


def _endpoint(op: Operation) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def endpoint(request: web.Request) -> web.StreamResponse:
        principal = request.get(PRINCIPAL)
        if op.roles:
            if principal is None:
                raise Unauthorized()
            if principal.role not in op.roles:
                raise Forbidden(f"role {principal.role!r} may not {op.summary.lower()}")
        for name, value in request.match_info.items():
            if "\x00" in value:  # no stored name holds NUL: nothing by that name exists
                raise NotFound(name, value)
        query = None if op.query is None else parse_query(op.query, request)
        body = None
        if op.body is not None:
            if (request.content_length or 0) > op.max_body:
                raise web.HTTPRequestEntityTooLarge(
                    max_size=op.max_body, actual_size=request.content_length or 0
                )
            try:
                async with asyncio.timeout(BODY_TIMEOUT_S):
                    raw = await request.read()
            except TimeoutError as exc:
                raise BodyTimeout() from exc
            if len(raw) > op.max_body:
                raise web.HTTPRequestEntityTooLarge(max_size=op.max_body, actual_size=len(raw))
            if request.content_type in YAML_TYPES and not op.takes_yaml:
                raise web.HTTPUnsupportedMediaType(
                    text="this operation takes JSON only: its bodies are too large for YAML"
                )
            if len(raw) > INLINE_PARSE_BYTES:  # off the event loop: other requests go on
                body = await asyncio.to_thread(parse_body, op.body, raw, request.content_type)
            else:
                body = parse_body(op.body, raw, request.content_type)
        reply = await op.handler(Call(request, principal, body, query))
        if isinstance(reply, web.StreamResponse):
            return reply
        if reply.body is None:
            return web.Response(status=reply.status, headers=reply.headers)
        return web.Response(
            status=reply.status,
            text=reply.body.model_dump_json(by_alias=True),
            content_type="application/json",
            headers=reply.headers,
        )

    endpoint.__name__ = op.operation_id
    return endpoint


_ERROR_TEXT = {
    400: "Bad request: the request line or a header is too long or malformed",
    401: "No valid bearer token",
    403: "The token's role may not do this",
    404: "Not found (or not visible to this token)",
    409: "Conflict with the current state",
    408: "The announced body did not arrive in time",
    413: "Body too large",
    415: "Not JSON (this operation takes no YAML)",
    422: "Invalid input: problem document with field errors",
    429: "Over the token's or the tenant's request rate; retry after Retry-After seconds",
    503: "The database does not answer; retry later",
}


def openapi_document(api: Api, *, title: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every registered operation."""
    # bodies as they are validated, responses as they are serialized (aliases, computed names)
    keyed: set[tuple[type[BaseModel], JsonSchemaMode]] = set()
    for op in api.operations:
        if op.body is not None:
            keyed.add((op.body, "validation"))
        if op.response is not None:
            keyed.add((op.response, "serialization"))
    refs, schema = models_json_schema(
        sorted(keyed, key=lambda k: (k[0].__name__, k[1])),
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    components = dict(schema.get("$defs", {}))
    components["Problem"] = {
        "type": "object",
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "message": {"type": "string"},
                        "expected": {"type": "string"},
                    },
                    "required": ["path", "message"],
                },
            },
        },
        "required": ["type", "title", "status", "detail"],
    }
    paths: dict[str, dict[str, Any]] = {}
    for op in api.operations:
        item: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "tags": [op.tag],
            "responses": {},
        }
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _path_params(op.path)
        ]
        if op.query is not None:
            for name, prop in op.query.model_json_schema(by_alias=True)["properties"].items():
                params.append({"name": name, "in": "query", "required": False, "schema": prop})
        params += [
            {
                "name": h,
                "in": "header",
                "required": False,
                "schema": {"type": "string", "pattern": HEADER_PATTERN},
            }
            for h in op.headers
        ]
        if params:
            item["parameters"] = params
        if op.roles:
            item["security"] = [{"bearer": []}]
        if op.body is not None:
            ref = refs[(op.body, "validation")]
            types = (
                ("application/json", "application/yaml") if op.takes_yaml else ("application/json",)
            )
            item["requestBody"] = {
                "required": True,
                "content": {t: {"schema": ref} for t in types},
            }
        ok: dict[str, Any] = {"description": "OK"}
        if op.response is not None:
            ok["content"] = {"application/json": {"schema": refs[(op.response, "serialization")]}}
        links = _links(op, api.operations)
        if links:
            ok["links"] = links
        item["responses"][str(op.status)] = ok
        codes = (
            set(op.errors)
            | {400, 503}  # an unreadable request; the database is down
            | ({401, 403} if op.roles else set())
            | ({429} if op.roles and op.tag != "meta" else set())  # api/ratelimit.py
            | ({422} if op.body or op.query else set())
            | ({408, 413} if op.body else set())
            | ({415} if op.body and not op.takes_yaml else set())
        )
        for code in sorted(codes):
            item["responses"][str(code)] = {
                "description": _ERROR_TEXT.get(code, "Error"),
                "content": {
                    "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                },
            }
        paths.setdefault(op.path, {})[op.method.lower()] = item
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _links(producer: Operation, operations: Iterable[Operation]) -> dict[str, Any]:
    """OpenAPI links from an operation that creates a resource to those that act on it.

    `POST /v1/tenants` creates what `/v1/tenants/{tenant}...` names when that is the only new
    path parameter: it comes from the response (`id` for `*_id` parameters, else `name`), the
    others from the creating request's own path.
    """
    if producer.method != "POST" or producer.status != 201:
        return {}
    known = set(_path_params(producer.path))
    out: dict[str, Any] = {}
    for op in operations:
        new = [p for p in _path_params(op.path) if p not in known]
        if not op.path.startswith(producer.path + "/{") or len(new) != 1:
            continue
        params = {name: f"$request.path.{name}" for name in _path_params(op.path) if name in known}
        params[new[0]] = "$response.body#/" + ("id" if new[0].endswith("_id") else "name")
        out[op.operation_id] = {"operationId": op.operation_id, "parameters": params}
    return out


def _path_params(path: str) -> list[str]:
    return [part[1:-1].split(":")[0] for part in path.split("/") if part.startswith("{")]
