"""Fail fast: refuse at submission a job that no cluster of the fleet could ever run.

The check runs the scheduling core on the fleet as if it were empty (every node free, every
cluster ready) with the real queues and quotas. The fleet is re-read at most every few
seconds; verdicts are cached per job shape until then. An empty fleet refuses nothing: the
first clusters may simply not have registered yet.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from federation.catalog import Catalog
from federation.controllers.snapshot import clusters_of_fleet, queue_models
from federation.scheduling.cycle import schedule
from federation.scheduling.decisions import Rejected
from federation.scheduling.framework import SchedulerConfig
from federation.scheduling.model import Cluster, Job, Node, Queue, Snapshot
from federation.store.database import Database

NO_PREEMPTION = SchedulerConfig(preemption=False)


def _empty_node(node: Node) -> Node:
    return replace(
        node,
        used_cpu_milli=0,
        used_memory_mib=0,
        used_pods=0,
        ready=True,
        devices=tuple(d.emptied(heal=True) for d in node.devices),
    )


def emptied(cluster: Cluster) -> Cluster:
    """The cluster as if nothing ran on it and everything were healthy, open and accepted."""
    return replace(
        cluster,
        ready=True,
        cordoned=False,
        accepted=True,
        nodes=tuple(_empty_node(n) for n in cluster.nodes),
    )


def shape_key(job: Job) -> str:
    """What the verdict depends on: the core job without its id, creation time and task names
    (the compiled job's images, environment and names never reach the core), so a sweep of
    jobs that differ only there shares one verdict."""
    return repr(
        replace(job, id="", created_at=0.0, tasks=tuple(replace(t, name="") for t in job.tasks))
    )


class FleetCheck:
    """Cached `could this job ever run anywhere` verdicts."""

    def __init__(self, db: Database, catalog: Catalog, ttl_s: float = 5.0) -> None:
        self.db = db
        self.catalog = catalog
        self.ttl_s = ttl_s
        self._fleet: tuple[tuple[Cluster, ...], tuple[Queue, ...]] | None = None
        self._read_at = 0.0
        self._verdicts: dict[str, Rejected | None] = {}
        self._lock = asyncio.Lock()

    async def _snapshot(self) -> tuple[tuple[Cluster, ...], tuple[Queue, ...]]:
        async with self._lock:
            if self._fleet is None or time.monotonic() - self._read_at > self.ttl_s:
                async with self.db.connection() as conn:
                    fleet, _ = await clusters_of_fleet(conn, self.catalog)
                    queues = await queue_models(conn)
                self._fleet = (tuple(emptied(c) for c in fleet), tuple(queues))
                self._read_at = time.monotonic()
                self._verdicts.clear()
            return self._fleet

    async def rejection(self, job: Job) -> Rejected | None:
        """Why `job` can never run in this fleet, or None when it could (or nothing is known)."""
        clusters, queues = await self._snapshot()
        if not clusters:
            return None
        key = shape_key(job)
        if key not in self._verdicts:
            snapshot = Snapshot(clusters=clusters, queues=queues)
            result = await asyncio.to_thread(
                schedule, snapshot, [job], now=0.0, config=NO_PREEMPTION
            )
            self._verdicts[key] = result.rejected[0] if result.rejected else None
        return self._verdicts[key]
