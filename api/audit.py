"""The audit trail of the API: which requests are recorded, and the buffered writer that stores
them off the request's critical path.

Recorded: every mutating request (POST, PUT, PATCH, DELETE) and every refused one (any 4xx),
except the successful high-volume agent traffic (lease renewals, status and inventory reports,
assignment polls: their effects are the cluster's state and its events); an agent's
registration and every refused agent request are recorded.

Guarantee: a record is queued in memory as its response leaves and written within
`FLUSH_INTERVAL_S` in one batch insert; a clean shutdown (SIGTERM, SIGINT) writes every queued
record before the hub exits. A killed process loses at most the last interval's records; while
the database cannot be written, up to `MAX_BUFFERED` records wait and the oldest beyond that
are dropped (counted in `suanpan_audit_dropped_total`, logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from aiohttp import web
from prometheus_client import Counter
from sqlalchemy.exc import SQLAlchemyError

from api.auth import PRINCIPAL
from api.logs import REQUEST_ID
from api.problems import Handler
from federation.aio import sleep_unless_stopped
from federation.k8s_names import DNS_LABEL
from federation.metrics import REGISTRY
from federation.store import audit
from federation.store.database import DATABASE_DOWN, Database, is_outage

FLUSH_INTERVAL_S = 0.1
PRUNE_INTERVAL_S = 600.0
MAX_BUFFERED = 100_000
MAX_BATCH = 5_000
TENANT_PREFIX = "/v1/tenants/"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
QUIET = frozenset({"agent_lease", "agent_status", "agent_inventory", "agent_assignments"})
log = logging.getLogger(__name__)
DROPPED = Counter(
    "suanpan_audit_dropped_total",
    "Audit records dropped because the database could not take them in time",
    registry=REGISTRY,
)


def audited(method: str, operation: str | None, status: int) -> bool:
    """Whether a request with this method, operation id and status is recorded."""
    if 400 <= status < 500:
        return True
    return method in MUTATING and operation not in QUIET


class AuditWriter:
    """Records queued in memory and written to the database in batches by one task."""

    def __init__(self, db: Database, keep: timedelta) -> None:
        self.db = db
        self.keep = keep
        self._queue: deque[audit.AuditRecord] = deque()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()  # one batch in flight: a flush returns after it too
        self.dropped = 0

    def add(self, record: audit.AuditRecord) -> None:
        """Queue a record (never waits)."""
        if len(self._queue) >= MAX_BUFFERED:
            self._queue.popleft()
            DROPPED.inc()
            self.dropped += 1
            if self.dropped % 1000 == 1:  # the first drop and every 1000th
                log.error("audit buffer full: %d oldest records dropped", self.dropped)
        self._queue.append(record)

    async def flush(self) -> None:
        """Write every queued record, `MAX_BATCH` at a time. While the database is down a
        batch is queued again in front (and the error raised); a batch the database refuses
        otherwise is dropped and logged, so that it cannot block every later record. Flushes
        take turns, so when one returns, every record queued before it is stored, also a batch
        another flush had already taken off the queue."""
        async with self._writing:
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
                try:
                    async with self.db.transaction() as conn:
                        await audit.append(conn, batch)
                except DATABASE_DOWN:
                    self._queue.extendleft(reversed(batch))
                    raise
                except SQLAlchemyError as exc:
                    if is_outage(exc):  # the connection was lost mid-insert: nothing written
                        self._queue.extendleft(reversed(batch))
                        raise
                    DROPPED.inc(len(batch))
                    self.dropped += len(batch)
                    # never the error's text: it quotes the statement's parameters
                    log.error("%d audit records refused: %s", len(batch), type(exc).__name__)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        pruned = 0.0
        failing = False
        while not self._stop.is_set():
            await sleep_unless_stopped(self._stop, FLUSH_INTERVAL_S)
            try:
                await self.flush()
                if loop.time() - pruned >= PRUNE_INTERVAL_S:
                    async with self.db.transaction() as conn:
                        await audit.prune(conn, datetime.now(UTC), self.keep)
                    pruned = loop.time()
            except (SQLAlchemyError, *DATABASE_DOWN) as exc:
                if not is_outage(exc):  # flush drops what is refused: only pruning gets here
                    log.error("audit records not pruned: %s", type(exc).__name__)
                    continue
                if not failing:  # once an outage, not every interval
                    log.warning("audit records not written (%s); retrying", type(exc).__name__)
                failing = True
            else:
                if failing:
                    log.warning("audit records written again")
                failing = False

    def start(self) -> None:
        """Start writing in the background."""
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Let the background task finish the batch it is writing (cancelling it there would
        lose that batch), then write what is still queued."""
        self._stop.set()
        if self._task is not None:
            await self._task
        try:
            await self.flush()
        except DATABASE_DOWN:
            log.error("%d audit records could not be written at shutdown", len(self._queue))


AUDIT = web.AppKey("audit_writer", AuditWriter)


def install_audit(app: web.Application, db: Database, keep_s: float) -> None:
    """Give the application an audit writer that runs while the application does."""
    app[AUDIT] = AuditWriter(db, timedelta(seconds=keep_s))
    app.cleanup_ctx.append(_writing)


async def _writing(app: web.Application) -> AsyncIterator[None]:
    writer = app[AUDIT]
    writer.start()
    yield
    await writer.stop()


def _subject(request: web.Request, location: str | None) -> tuple[str | None, uuid.UUID | None]:
    """The object a request acted on: its path parameters and the name of what it created
    (the last segment of `Location`); and the job among them, if any."""
    parts = list(request.match_info.values())
    job = request.match_info.get("job_id")
    if location:
        parts.append(location.rsplit("/", 1)[-1])
        if location.startswith("/v1/jobs/"):
            job = parts[-1]
    job_id = None
    if job is not None:
        with contextlib.suppress(ValueError):  # a malformed id names no job
            job_id = uuid.UUID(job)
    return "/".join(parts).replace("\x00", "")[:256] or None, job_id


def _tenant(request: web.Request, location: str | None) -> str | None:
    """The tenant a request names in its path or created (`Location: /v1/tenants/<name>`), if
    that is a name a tenant can have."""
    name = request.match_info.get("tenant")
    if name is None and location is not None and location.startswith(TENANT_PREFIX):
        name = location.removeprefix(TENANT_PREFIX).split("/", 1)[0]
    valid = name is not None and len(name) <= 63 and re.fullmatch(DNS_LABEL, name)
    return name if valid else None


@web.middleware
async def audit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Queue an audit record of the request once its answer is known (see the module)."""
    response = await handler(request)
    route = request.match_info.route
    operation = getattr(route.handler, "__name__", None) if route.resource else None
    if not audited(request.method, operation, response.status):
        return response
    principal = request.get(PRINCIPAL)
    location = response.headers.get("Location")
    obj, job_id = _subject(request, location)
    request.app[AUDIT].add(
        audit.AuditRecord(
            at=datetime.now(UTC),
            actor=principal.actor if principal else None,
            role=principal.role if principal else None,
            action=f"{request.method} {operation or 'unknown'}",
            object=obj,
            request_id=request[REQUEST_ID],
            source=request.remote or "",
            status=response.status,
            tenant_id=principal.tenant_id if principal else None,
            tenant=_tenant(request, location),
            job_id=job_id,
        )
    )
    return response
