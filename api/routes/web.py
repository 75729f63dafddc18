"""The web console (`/ui`) and the API reference (`/docs`, Swagger UI): static files served
from the package, each page with a Content-Security-Policy that runs no inline script."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web
from swagger_ui_bundle import swagger_ui_path

from api.oidc import OIDC, OidcVerifier, ProviderUnavailable
from api.registry import Call, Reply
from api.routes import API
from api.schemas import ConsoleOidc, ConsoleSettings
from api.security import page_headers
from federation.errors import NotFound
from federation.hubconfig import ConsoleClient

WEB = Path(__file__).resolve().parent.parent / "web"
SWAGGER = Path(str(swagger_ui_path))
TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
}


def _files(*paths: Path) -> dict[str, tuple[bytes, str]]:
    """Each file's name to its bytes and content type, read once."""
    return {p.name: (p.read_bytes(), TYPES[p.suffix]) for p in paths}


CONSOLE = _files(WEB / "index.html", WEB / "console.js", WEB / "console.css")
DOCS = _files(
    WEB / "docs.html",
    WEB / "docs-init.js",
    SWAGGER / "swagger-ui-bundle.js",
    SWAGGER / "swagger-ui.css",
    SWAGGER / "favicon-32x32.png",
)


def _serve(files: dict[str, tuple[bytes, str]], name: str, *connect: str) -> web.Response:
    if name not in files:
        raise NotFound("file", name)
    body, content_type = files[name]
    headers = {**page_headers(*connect), "Cache-Control": "no-cache"}
    return web.Response(body=body, content_type=content_type, headers=headers)


def _console_client(call: Call) -> tuple[OidcVerifier, ConsoleClient] | None:
    """The OIDC verifier and the console's client at its provider, where the hub names one."""
    verifier = call.request.app.get(OIDC)
    if verifier is None or verifier.config.console is None:
        return None
    return verifier, verifier.config.console


@API.op("GET", "/ui", summary="Web console", tag="meta", roles=())
async def console(call: Call) -> web.Response:
    """The web console: fleet, queues, jobs and actions, all read and done through this API
    with the token the user signs in with (the page itself holds no data). With a console
    client, its policy also lets the page reach the provider's token endpoint."""
    client = _console_client(call)
    if client is None:
        return _serve(CONSOLE, "index.html")
    try:
        _, token_endpoint = await client[0].endpoints()
    except ProviderUnavailable:
        return _serve(CONSOLE, "index.html")  # the console says so when the user signs in
    parts = urlsplit(token_endpoint)
    return _serve(CONSOLE, "index.html", f"{parts.scheme}://{parts.netloc}")


@API.op(
    "GET",
    "/v1/console",
    summary="Console sign-in settings",
    tag="meta",
    roles=(),
    response=ConsoleSettings,
)
async def console_settings(call: Call) -> Reply:
    """How the console signs users in: with an API token, and with the OIDC provider where
    the hub names a console client (its endpoints from the provider's discovery document;
    503 while they cannot be read)."""
    client = _console_client(call)
    if client is None:
        return Reply(200, ConsoleSettings(oidc=None))
    verifier, console_client = client
    authorize, token = await verifier.endpoints()
    oidc = ConsoleOidc(
        issuer=verifier.config.issuer,
        client_id=console_client.client_id,
        scopes=list(console_client.scopes),
        audience=verifier.config.audience,
        authorization_endpoint=authorize,
        token_endpoint=token,
    )
    return Reply(200, ConsoleSettings(oidc=oidc))


@API.op("GET", "/ui/{file}", summary="Web console file", tag="meta", roles=(), errors=(404,))
async def console_file(call: Call) -> web.Response:
    """A script or style sheet of the console."""
    return _serve(CONSOLE, call.path("file"))


@API.op("GET", "/docs", summary="API reference page", tag="meta", roles=())
async def docs(call: Call) -> web.Response:
    """This document rendered by Swagger UI (served from the package, no network), with
    try-it-out against this hub."""
    return _serve(DOCS, "docs.html")


@API.op("GET", "/docs/{file}", summary="API reference file", tag="meta", roles=(), errors=(404,))
async def docs_file(call: Call) -> web.Response:
    """A file of Swagger UI or its start script."""
    return _serve(DOCS, call.path("file"))
