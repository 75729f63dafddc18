"""The simulator's hub: level 1 is the real core (`federation.scheduling.schedule`), level 2 the
node placement policy inside the chosen cluster (`federation.nodeplacement`, as the extender).

The fleet is one `Pool` whose rows are dealt into K member clusters. Before every cycle the
shell turns the pool into a `Snapshot` (a node's `Node` is rebuilt only when its pool version
changed, a cluster's tuple only when one of its nodes did), runs `schedule()`, and then lets the
node policy choose the node and devices among the chosen cluster's nodes, as the extender would
answer kube-scheduler. A trace pod is a one-task, one-replica job whose flavor options are the
device models it accepts (all the fleet's models when it names none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from federation.nodeplacement import NodeScores, PodRequest, Pool, Scorer, select
from federation.nodeplacement.pool import IntArray
from federation.scheduling import (
    AcceleratorRequest,
    Cluster,
    CycleResult,
    FlavorOption,
    Job,
    Node,
    Placement,
    Queue,
    ReplicaPlacement,
    SchedulerConfig,
    Snapshot,
    Task,
    schedule,
)
from federation.simulation.trace import TraceNode

QUEUE = "openb"
MAX_PODS = 1 << 20  # openb nodes are limited by CPU, memory and devices, not by pod count
Where = tuple[int, tuple[int, ...]]  # node index in the pool, device indices


def split_round_robin(nodes: Sequence[TraceNode], k: int) -> dict[str, int]:
    """Member cluster of every node name: round-robin over nodes sorted by model and size."""
    ordered = sorted(nodes, key=lambda n: (n.model, n.gpu, n.cpu_milli, n.name))
    return {n.name: i % k for i, n in enumerate(ordered)}


@dataclass(frozen=True, slots=True)
class PodJob:
    """What the shell knows of one trace pod besides its request."""

    id: str
    priority: int = 0
    preemptible: bool = True
    created_at: float = 0.0
    max_runtime_s: float | None = None
    checkpoint_interval_s: float | None = None


class Hub:
    """Snapshots of the pool for the core, and level-2 placement of what the core decides."""

    def __init__(self, pool: Pool, scorer: Scorer, cluster_of: IntArray) -> None:
        self.pool = pool
        self.scorer = scorer
        self.cluster_of = cluster_of
        k = int(cluster_of.max(initial=-1)) + 1
        self.names = [f"c{c}" for c in range(k)]
        self.members = [np.flatnonzero(cluster_of == c) for c in range(k)]
        self.inside = [cluster_of == c for c in range(k)]
        self.index = {name: i for i, name in enumerate(pool.names)}
        self.models = tuple(pool.model_names)
        self._nodes: list[Node | None] = [None] * len(pool)
        self._seen = np.full(len(pool), -1, dtype=np.int64)
        self._clusters: list[Cluster | None] = [None] * k
        self.queues = (Queue(QUEUE),)
        self._tasks: dict[PodRequest, tuple[Task, ...]] = {}

    def job(self, meta: PodJob, req: PodRequest) -> Job:
        """The core's job for one pod: one replica, one option per accepted device model."""
        accelerators = None
        if req.device is not None and req not in self._tasks:
            models = [m for m in self.models if not req.models or m in req.models]
            count, milli = req.device.count, req.device.milli
            accelerators = AcceleratorRequest(
                tuple(FlavorOption(m, count=count, milli=milli) for m in models)
            )
        tasks = self._tasks.get(req)
        if tasks is None:  # one tasks tuple per request shape: the core charges quota per shape
            task = Task("pod", 1, req.cpu_milli, req.memory_mib, accelerators, True)
            tasks = self._tasks[req] = (task,)
        return Job(
            meta.id,
            QUEUE,
            tasks,
            priority=meta.priority,
            preemptible=meta.preemptible,
            created_at=meta.created_at,
            max_runtime_s=meta.max_runtime_s,
            checkpoint_interval_s=meta.checkpoint_interval_s,
        )

    def placement(self, job: Job, where: Where) -> Placement:
        """The placement of `job` running at `where` (for `Snapshot.placements`)."""
        node, devices = where
        model = self.models[int(self.pool.model_id[node])] if devices else ""
        replica = ReplicaPlacement(0, self.pool.names[node], devices)
        return Placement(job, self.names[int(self.cluster_of[node])], (model,), (replica,))

    def snapshot(
        self, placements: Sequence[Placement] = (), reservations: Sequence[Placement] = ()
    ) -> Snapshot:
        """The fleet as the core sees it now."""
        pool = self.pool
        changed = np.flatnonzero(pool.version != self._seen)
        for i in changed:
            self._nodes[i] = self._node(int(i))
            self._clusters[int(self.cluster_of[i])] = None
        self._seen[changed] = pool.version[changed]
        for c, cluster in enumerate(self._clusters):
            if cluster is None:
                nodes = tuple(self._nodes[i] for i in self.members[c])
                self._clusters[c] = Cluster(self.names[c], nodes=nodes)  # type: ignore[arg-type]
        return Snapshot(
            clusters=tuple(c for c in self._clusters if c is not None),
            queues=self.queues,
            placements=tuple(placements),
            reservations=tuple(reservations),
        )

    def _node(self, i: int) -> Node:
        pool = self.pool
        cpu, mem = int(pool.cpu_cap[i]), int(pool.mem_cap[i])
        devices = pool.node_devices(i)
        return Node(
            pool.names[i],
            cpu,
            mem,
            pods=MAX_PODS,
            used_cpu_milli=cpu - int(pool.cpu_free[i]),
            used_memory_mib=mem - int(pool.mem_free[i]),
            devices=(devices,) if devices is not None else (),
        )

    def cycle(
        self,
        jobs: Sequence[Job],
        config: SchedulerConfig,
        now: float = 0.0,
        placements: Sequence[Placement] = (),
        reservations: Sequence[Placement] = (),
    ) -> CycleResult:
        """One run of the core over `jobs` on the current pool."""
        return schedule(self.snapshot(placements, reservations), jobs, now=now, config=config)

    def bind(self, cluster: str, req: PodRequest) -> Where | None:
        """Level 2: the node policy places `req` on a node of `cluster` (None: none fits)."""
        inside = self.inside[self.names.index(cluster)]
        feasible = self.pool.feasible(req) & inside
        if not feasible.any():
            return None
        scores = self.scorer.score(req, feasible)
        i = select(NodeScores(np.where(inside, scores.values, -np.inf), scores.share_device))
        if i is None:
            return None
        chosen = scores.devices_for(self.pool, i, req)
        self.pool.place(i, req, chosen)
        return i, chosen
