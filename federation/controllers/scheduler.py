"""The hub's scheduling loop: the async shell around the pure core.

Numbered phases per cycle (Armada's shape): 1. read a consistent snapshot; 2. run the core
off the event loop; 3. write all decisions in one transaction fenced by leadership (leader.py);
4. only then advance what is carried to the next cycle (holds, parked jobs: carried.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from federation import metrics
from federation.aio import cancel_all, sleep_unless_stopped
from federation.catalog import Catalog
from federation.controllers import health, snapshot, writer
from federation.controllers.carried import Carried
from federation.controllers.leader import Leadership, LostLeadership
from federation.controllers.pacing import Pace
from federation.controllers.services import Reconciled, ServiceController
from federation.hubconfig import HubConfig
from federation.scheduling.cycle import schedule
from federation.scheduling.model import Placement
from federation.store import history
from federation.store.database import DATABASE_DOWN, Database
from federation.store.listener import JOBS, Listener

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CycleReport:
    """What one cycle did, for logs, metrics and tests."""

    pending: int
    written: writer.Written
    seconds: float
    read_s: float = 0.0  # phase 1: the snapshot
    core_s: float = 0.0  # phase 2: the pure core
    write_s: float = 0.0  # phase 4: the decisions
    cpu_s: float = 0.0  # CPU time of this process (all its threads) during the cycle
    parked: int = 0  # waiting jobs the next cycle skips until something they could use appears


class SchedulerLoop:
    """Runs cycles while this replica leads."""

    def __init__(
        self,
        db: Database,
        catalog: Catalog,
        *,
        config: HubConfig | None = None,
        listener: Listener | None = None,
    ) -> None:
        self.db = db
        self.catalog = catalog
        self.config = config or HubConfig()
        self._compiled = snapshot.CompiledCache()
        self._fleet = snapshot.FleetCache()
        self.listener = listener
        self.leadership = Leadership(db.url)
        self.pace = Pace(self.config.cycle_target_s)  # how much of a long queue a cycle reads
        self._carried = Carried(self.config.hold_margin_s)  # holds and parked jobs
        self._reasons = writer.ReasonsWritten()  # when each pending reason was last written
        self._sampled_at = -float("inf")  # monotonic time of the last history sample
        self.services = ServiceController(self.config.services)
        self._services_at = -float("inf")  # monotonic time the service controller last ran
        self._health_said: set[str] = set()  # health messages of the last check (logged once)
        # when leading (with a working database) last began; leases count from then at most
        self.leading_since: datetime | None = None

    async def cycle(self) -> CycleReport:
        """One scheduling cycle (the caller must lead)."""
        start, cpu_start = time.perf_counter(), time.process_time()
        now = time.time()  # one instant for run times and the core: expected ends stay put
        async with self.db.transaction() as conn:
            await conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            read = await snapshot.read(
                conn,
                self.catalog,
                now=now,
                cache=self._compiled,
                fleet_cache=self._fleet,
                window=self.pace.window,
            )
        read_done = time.perf_counter()
        snap, parked, expired = self._carried.begin(read.snapshot, read.refs, now)
        for hold in expired:
            metrics.HOLDS_EXPIRED.inc()
            log.warning(
                "job %s: not placed %.0f s after its victims had to leave; the capacity"
                " freed for it on %s (perhaps taken outside the hub) is no longer held",
                hold.reservation.job.id,
                self._carried.holds.margin_s,
                hold.reservation.cluster,
            )
        result = await asyncio.to_thread(
            schedule, snap, read.pending, now=now, config=self.config.core, parked=parked
        )
        core_done = time.perf_counter()
        async with self.db.transaction() as conn:
            await self.leadership.fence(conn)
            written = await writer.write(conn, read, result, self._reasons)
        write_done = time.perf_counter()
        self._carried.written(result, now, read.refs)
        report = CycleReport(
            len(read.pending),
            written,
            time.perf_counter() - start,
            read_done - start,
            core_done - read_done,
            write_done - core_done,
            time.process_time() - cpu_start,
            len(result.parked.jobs) if result.parked is not None else 0,
        )
        self.pace.observe(report.pending, report.seconds)
        metrics.CYCLE_SECONDS.observe(report.seconds)
        metrics.WINDOW.set(self.pace.size)
        metrics.PENDING.set(len(result.pending))
        metrics.PARKED.set(report.parked)
        for kind in ("placed", "preempted", "rejected"):
            metrics.DECISIONS.labels(kind).inc(getattr(written, kind))
        _observe(written.placements, now=time.time())
        return report

    async def check_health(self) -> list[str]:
        """Apply lease timeouts, reachability and drains; leases are counted from the moment
        this replica (re)gained a working database at the earliest, so neither a hub restart
        nor a database outage makes healthy clusters lose their work."""
        async with self.db.transaction() as conn:
            await self.leadership.fence(conn)
            if self.leading_since is None:
                self.leading_since = await conn.scalar(sa.select(sa.func.now()))
            return await health.check(conn, self.config.health, self.leading_since)

    async def sample_history(self) -> None:
        """Record allocation history when `history_interval_s` has passed since the last."""
        now = time.monotonic()
        if now - self._sampled_at < self.config.history_interval_s:
            return
        self._sampled_at = now
        keep = timedelta(seconds=self.config.history_keep_s)
        async with self.db.transaction() as conn:
            await history.record(conn, datetime.now(UTC), keep)

    async def run_services(self) -> Reconciled | None:
        """Run the service controller when `services.interval_s` has passed since it last
        ran (None: not yet)."""
        now = time.monotonic()
        if now - self._services_at < self.config.services.interval_s:
            return None
        self._services_at = now
        async with self.db.transaction() as conn:
            await self.leadership.fence(conn)
            done = await self.services.reconcile(conn, now)
        if done.changed or done.scaled:
            log.info("services: %s", done)
        return done

    async def run(self, stop: asyncio.Event) -> None:
        """Lead when possible and run cycles until `stop` is set."""
        while not stop.is_set():
            try:
                if not await self.leadership.acquire():
                    await sleep_unless_stopped(stop, 2.0)
                    continue
                log.warning("this hub replica leads the scheduling loop")
                metrics.LEADER.set(1)
                alive = asyncio.create_task(self.leadership.keep_alive())
                try:
                    await self._lead(stop)
                finally:
                    await cancel_all([alive])
            except LostLeadership:
                log.warning("lost leadership; stepping down")
            except DATABASE_DOWN as exc:
                log.warning("database unavailable (%r); pausing", exc)
                await sleep_unless_stopped(stop, 1.0)
            except Exception:
                log.exception("scheduling cycle failed; retrying")
                await sleep_unless_stopped(stop, 1.0)
            finally:
                self.leading_since = None
                metrics.LEADER.set(0)
                if stop.is_set():
                    await self.leadership.release()

    async def _lead(self, stop: asyncio.Event) -> None:
        """Cycles while leading, until `stop` (LostLeadership when deposed)."""
        while not stop.is_set():
            changes = await self.check_health()
            for change in set(changes) - self._health_said:
                log.warning("health: %s", change)
            self._health_said = set(changes)
            await self.run_services()
            report = await self.cycle()
            await self.sample_history()
            decided = report.written.placed or report.written.preempted
            if decided or report.written.rejected:
                log.info("cycle: %s", report)
            # a cycle that decided something is followed at once by the next (more may fit,
            # or wait outside its window); one that decided nothing is not: while
            # submissions stream in, each would wake a cycle over the whole queue
            if not decided:
                await self._wait(stop, report.seconds)

    async def _wait(self, stop: asyncio.Event, settle_s: float) -> None:
        """Until a job is submitted or changes (at least `settle_s`), or the interval ends."""
        interval = self.config.interval_s
        if self.listener is None:
            await sleep_unless_stopped(stop, interval)
            return
        woken = asyncio.create_task(self.listener.wait(JOBS, seconds=interval))
        stopped = asyncio.create_task(stop.wait())
        try:
            await sleep_unless_stopped(stop, min(settle_s, interval))
            if not stop.is_set():  # a stop ends the wait too: the hub shuts down at once
                await asyncio.wait({woken, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_all([woken, stopped])


def _observe(placed: list[Placement], now: float) -> None:
    """Placements by cluster and vendor; each placed job's wait by tenant, queue, priority."""
    for p in placed:
        for vendor in {f.split("/", 1)[0] if f else "cpu" for f in p.flavors}:
            metrics.PLACEMENTS.labels(p.cluster, vendor).inc()
        tenant, _, queue = p.job.queue.partition("/")
        wait = max(0.0, now - p.job.created_at)
        metrics.QUEUE_WAIT.labels(tenant, queue, str(p.job.priority)).observe(wait)
