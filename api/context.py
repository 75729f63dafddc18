"""What handlers share: the database and settings stored on the application."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from api.cache import Recent
from api.feasibility import FleetCheck
from federation.catalog import Catalog
from federation.hubconfig import HubConfig
from federation.metrics import in_process_loop_metrics
from federation.store.database import Database
from federation.store.group_commit import GroupCommit
from federation.store.listener import Listener
from federation.store.tenancy import SubmissionTarget

TARGET_TTL_S = 2.0
# who submits (their tenant), the tenant named, the queue and the priority class
TargetKey = tuple[uuid.UUID | None, str | None, str, str]


@dataclass
class HubContext:
    """Services a request handler may use (the listener is set once the app has started)."""

    db: Database
    version: str
    catalog: Catalog
    fleet_check: FleetCheck
    submissions: GroupCommit
    config: HubConfig = field(default_factory=HubConfig)
    # resolved submission targets: a change of tenant policy, or a tenant or queue deleted,
    # clears them here (the replica that changed it) and lapses within the TTL elsewhere
    targets: Recent[TargetKey, SubmissionTarget] = field(
        default_factory=lambda: Recent(TARGET_TTL_S)
    )
    listener: Listener | None = None
    # the scheduling loop's exposition: this process's, or the one its loop process writes
    loop_metrics: Callable[[], bytes] = in_process_loop_metrics


CONTEXT = web.AppKey("suanpan_context", HubContext)


def ctx(request: web.Request) -> HubContext:
    """The hub context of the application serving `request`."""
    return request.app[CONTEXT]
