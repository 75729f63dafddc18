"""What handlers share: the database and settings stored on the application."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from api.feasibility import FleetCheck
from federation.catalog import Catalog
from federation.hubconfig import HubConfig
from federation.metrics import in_process_loop_metrics
from federation.store.database import Database
from federation.store.group_commit import GroupCommit
from federation.store.listener import Listener


@dataclass
class HubContext:
    """Services a request handler may use (the listener is set once the app has started)."""

    db: Database
    version: str
    catalog: Catalog
    fleet_check: FleetCheck
    submissions: GroupCommit
    config: HubConfig = field(default_factory=HubConfig)
    listener: Listener | None = None
    # the scheduling loop's exposition: this process's, or the one its loop process writes
    loop_metrics: Callable[[], bytes] = in_process_loop_metrics


CONTEXT = web.AppKey("suanpan_context", HubContext)


def ctx(request: web.Request) -> HubContext:
    """The hub context of the application serving `request`."""
    return request.app[CONTEXT]
