"""Fail fast: refuse at submission a job that no cluster of the fleet could ever run.

The check runs the scheduling core on the fleet as if it were empty (every node free, every
cluster ready) with the real queues and quotas. Every few seconds the queues are re-read, and
the fleet too when its shape changed (`fleet_shape`: a sum of hashes the database computes;
what runs on the fleet does not change it, so a busy fleet is not re-read for nothing);
verdicts are cached per job shape until either changes. An empty fleet refuses nothing: the
first clusters may simply not have registered yet.

The core runs on a sample of the fleet, not all of it: a job of R replicas occupies at most R
nodes, so R nodes of each kind (what a node holds empty: its capacity, devices and taints, not
its name or labels, which the core does not read) fit it exactly when the whole cluster does,
and the core's reasons count the same (it stops counting what fits at R). A 10,000-node fleet
of a few node kinds is checked on a few dozen nodes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace

from federation.catalog import Catalog
from federation.controllers.snapshot import clusters_of_fleet, fleet_shape, queue_models
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


def node_kind(node: Node) -> str:
    """What an emptied node could hold: all of it but its name and labels."""
    return repr(replace(node, name="", labels={}))


def kinds_of(cluster: Cluster) -> tuple[tuple[Node, ...], ...]:
    """The cluster's nodes grouped by kind."""
    groups: dict[str, list[Node]] = {}
    for node in cluster.nodes:
        groups.setdefault(node_kind(node), []).append(node)
    return tuple(tuple(group) for group in groups.values())


def sampled(cluster: Cluster, kinds: tuple[tuple[Node, ...], ...], most: int) -> Cluster:
    """`cluster` with at most `most` nodes of each kind."""
    return replace(cluster, nodes=tuple(n for group in kinds for n in group[:most]))


def replicas_at_most(job: Job) -> int:
    """The most replicas `job` may hold at once: the most nodes it may occupy."""
    return sum(task.ceiling for task in job.tasks)


def shape_key(job: Job) -> str:
    """What the verdict depends on: the core job without its id, creation time and task names
    (the compiled job's images, environment and names never reach the core), so a sweep of
    jobs that differ only there shares one verdict."""
    return repr(
        replace(job, id="", created_at=0.0, tasks=tuple(replace(t, name="") for t in job.tasks))
    )


@dataclass
class _Emptied:
    """The fleet as if empty, as read at `read_at`, and the verdicts given on it."""

    shape: int  # fleet_shape when read
    clusters: tuple[Cluster, ...]
    kinds: tuple[tuple[tuple[Node, ...], ...], ...]  # per cluster
    queues: tuple[Queue, ...]
    read_at: float
    verdicts: dict[str, Rejected | None] = field(default_factory=dict)
    samples: dict[int, tuple[Cluster, ...]] = field(default_factory=dict)

    def sample(self, most: int) -> tuple[Cluster, ...]:
        """The clusters with at most `most` nodes of each kind."""
        if most not in self.samples:
            self.samples[most] = tuple(
                sampled(c, kinds, most) for c, kinds in zip(self.clusters, self.kinds, strict=True)
            )
        return self.samples[most]


class FleetCheck:
    """Cached `could this job ever run anywhere` verdicts."""

    def __init__(self, db: Database, catalog: Catalog, ttl_s: float = 5.0) -> None:
        self.db = db
        self.catalog = catalog
        self.ttl_s = ttl_s
        self._fleet: _Emptied | None = None
        self._lock = asyncio.Lock()

    async def _snapshot(self) -> _Emptied:
        async with self._lock:
            old = self._fleet
            if old is not None and time.monotonic() - old.read_at <= self.ttl_s:
                return old
            async with self.db.connection() as conn:
                shape = await fleet_shape(conn)
                queues = tuple(await queue_models(conn))
                if old is None or shape != old.shape:
                    fleet, _ = await clusters_of_fleet(conn, self.catalog)
                    clusters = tuple(emptied(c) for c in fleet)
                    kinds = tuple(kinds_of(c) for c in clusters)
                else:
                    clusters, kinds = old.clusters, old.kinds
            if old is not None and shape == old.shape and queues == old.queues:
                old.read_at = time.monotonic()  # nothing a verdict depends on changed
                return old
            self._fleet = _Emptied(shape, clusters, kinds, queues, time.monotonic())
            return self._fleet

    async def rejection(self, job: Job) -> Rejected | None:
        """Why `job` can never run in this fleet, or None when it could (or nothing is known)."""
        fleet = await self._snapshot()
        if not fleet.clusters:
            return None
        key = shape_key(job)
        if key not in fleet.verdicts:
            snapshot = Snapshot(clusters=fleet.sample(replicas_at_most(job)), queues=fleet.queues)
            result = await asyncio.to_thread(
                schedule, snapshot, [job], now=0.0, config=NO_PREEMPTION
            )
            fleet.verdicts[key] = result.rejected[0] if result.rejected else None
        return fleet.verdicts[key]
