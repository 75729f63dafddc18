"""The hub's aiohttp application."""

from __future__ import annotations

from aiohttp import web

from api.auth import auth_middleware
from api.context import CONTEXT, HubContext
from api.metrics import metrics_middleware
from api.problems import problem_middleware
from api.routes import API
from federation.store.database import Database

MAX_BODY_BYTES = 1 << 20
VERSION = "0.1.0"


def create_app(db: Database, *, version: str = VERSION) -> web.Application:
    """Build the REST application over `db` (the caller owns the database's lifetime)."""
    app = web.Application(
        middlewares=[metrics_middleware, problem_middleware, auth_middleware],
        client_max_size=MAX_BODY_BYTES,
    )
    app[CONTEXT] = HubContext(db=db, version=version)
    API.install(app)
    return app
