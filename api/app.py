"""The hub's aiohttp application."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from api.audit import audit_middleware, install_audit
from api.auth import auth_middleware
from api.context import CONTEXT, HubContext
from api.feasibility import FleetCheck
from api.logs import request_id_middleware
from api.metrics import metrics_middleware
from api.oidc import install_oidc
from api.problems import problem_middleware
from api.ratelimit import install_rate_limits, rate_limit_middleware
from api.routes import API
from api.security import secure_headers
from federation.catalog import Catalog, load_catalog
from federation.hubconfig import HubConfig
from federation.store.database import Database
from federation.store.group_commit import GroupCommit
from federation.store.listener import JOBS, LOGS, PLACEMENTS, Listener

MAX_BODY_BYTES = 64 << 20  # the most any operation accepts (inventory); most take 1 MiB
VERSION = "0.1.0"


def create_app(
    db: Database,
    *,
    version: str = VERSION,
    catalog: Catalog | None = None,
    config: HubConfig | None = None,
) -> web.Application:
    """Build the REST application over `db` (the caller owns the database's lifetime)."""
    catalog = catalog or load_catalog()
    config = config or HubConfig()
    app = web.Application(
        middlewares=[
            request_id_middleware,
            audit_middleware,
            metrics_middleware,
            problem_middleware,
            auth_middleware,
            rate_limit_middleware,
        ],
        client_max_size=MAX_BODY_BYTES,
    )
    app[CONTEXT] = HubContext(
        db=db,
        version=version,
        catalog=catalog,
        fleet_check=FleetCheck(db, catalog),
        submissions=GroupCommit(db),
        config=config,
    )
    if config.oidc is not None:
        install_oidc(app, config.oidc)
    app.cleanup_ctx.append(_listen)
    install_audit(app, db, app[CONTEXT].config.audit_keep_s)
    install_rate_limits(app, app[CONTEXT].config.rate_limits)
    app.on_response_prepare.append(secure_headers)
    API.install(app)
    return app


async def _listen(app: web.Application) -> AsyncIterator[None]:
    """Own a LISTEN connection for the app's lifetime (agents' long-poll wake-ups)."""
    context = app[CONTEXT]
    listener = Listener(context.db.url)
    await listener.start(PLACEMENTS, JOBS, LOGS)
    context.listener = listener
    yield
    context.listener = None
    await listener.close()
