"""The web console (`/ui`) and the API reference (`/docs`, Swagger UI): static files served
from the package, each page with a Content-Security-Policy that runs no inline script."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from swagger_ui_bundle import swagger_ui_path

from api.registry import Call
from api.routes import API
from api.security import PAGE_HEADERS
from federation.errors import NotFound

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


def _serve(files: dict[str, tuple[bytes, str]], name: str) -> web.Response:
    if name not in files:
        raise NotFound("file", name)
    body, content_type = files[name]
    headers = {**PAGE_HEADERS, "Cache-Control": "no-cache"}
    return web.Response(body=body, content_type=content_type, headers=headers)


@API.op("GET", "/ui", summary="Web console", tag="meta", roles=())
async def console(call: Call) -> web.Response:
    """The web console: fleet, queues, jobs and actions, all read and done through this API
    with the token the user signs in with (the page itself holds no data)."""
    return _serve(CONSOLE, "index.html")


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
