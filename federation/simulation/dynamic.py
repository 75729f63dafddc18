"""Dynamic replay: the trace's own arrival and deletion times, priorities and preemption.

A discrete-event loop around the simulated hub (`hub.Hub`): a pod arrives at `creation_time`,
runs for its trace lifetime (`deletion_time` minus `scheduled_time`, or minus `creation_time` if
it never started; at least 1 s) once placed, and then leaves. `qos` maps to priority classes: LS
high, Burstable/Guaranteed mid, BE low; only low pods are preemptible. Whenever pods arrive or
leave, the real core (`schedule()`, the hub's default configuration, preemption on or off)
runs over the head of the queue (`HEAD` pods by priority then arrival, as the hub reads a head)
with the running pods as placements and the preemptors' reservations; the node policy then
binds each placed pod inside its cluster. Victims leave at once and go back to the queue with
their original arrival time (restarting from scratch, or from their last checkpoint); the core
runs again at the same instant so that the preemptor takes its reservation.

`Timing` says what the core learns about time: run time limits (the trace lifetime times a
factor; without them no reservation is made), periodic checkpoints, reservations on or off.

The trace's own pace leaves the cluster almost idle (it offers 0.2 % of the GPU-seconds its 149
days hold; a few very long pods carry most of the work and most pods live minutes), so arrival
times are compressed towards the 1st percentile of creation times (earlier pods start there)
until the offered GPU load over the arrival window (requested GPU-seconds inside the window /
the cluster's) equals `load` (default 0.35, about the most compression reaches without turning
the trace into one batch); lifetimes are kept. Utilization is averaged over that window.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from federation.nodeplacement import (
    FragModel,
    FragTracker,
    PodRequest,
    Pool,
    make_policy,
    typical_workload,
)
from federation.nodeplacement.pool import FloatArray
from federation.scheduling import (
    DEFAULT_CONFIG,
    AcceleratorRequest,
    FlavorOption,
    Job,
    Placement,
    ReplicaPlacement,
    SchedulerConfig,
    Task,
)
from federation.scheduling.devices import WHOLE, DeviceRequest
from federation.scheduling.model import Elastic
from federation.simulation.adapter import pod_request, pool_node, task_types
from federation.simulation.hub import QUEUE, Hub, PodJob, Where, split_round_robin
from federation.simulation.trace import TraceNode, TracePod

PRIORITY = {"LS": 2, "Guaranteed": 1, "Burstable": 1, "BE": 0}
CLASSES = ("low", "mid", "high")
HEAD = 1000  # waiting pods a cycle considers, by priority then arrival (the hub reads a head too)
PREEMPTION_ROUNDS = 4  # cycles at one instant while the core preempts
HORIZON_S = 3 * 3600.0  # overload: arrivals span this long


@dataclass(frozen=True)
class Timing:
    """What the replay tells the core about time.

    - `runtime_factor`: each pod declares its trace lifetime times this as `max_runtime_s`
      (1: exact; users overestimate, so above 1 is realistic); None: no limits, so running
      pods never end for the estimates and no reservation is made.
    - `checkpoint_s`: every pod checkpoints this often from its start; a victim loses only
      the work since its last checkpoint and restarts from it (None: from scratch).
    - `backfill`: reservations for pods of at least `large_gpus` GPUs (the core's
      `reservation_min_devices`), `reservations` of them per cycle (all pods share one queue:
      the core's `reservations_per_queue`); their queueing delays are reported on their own.
    """

    backfill: bool = True
    runtime_factor: float | None = None
    checkpoint_s: float | None = None
    large_gpus: int = 8
    reservations: int = 1

    @property
    def timed(self) -> bool:
        """Whether running pods' run times matter to the core (limits or checkpoints)."""
        return self.runtime_factor is not None or self.checkpoint_s is not None


@dataclass(frozen=True)
class ElasticLoad:
    """Elastic training jobs replayed beside the trace: `jobs` of them arrive with the first
    pod, at a priority below every trace pod (preemptible), and keep running; each replica
    takes `gpus` whole devices of any model, between `min_replicas` and `max_replicas`."""

    jobs: int = 8
    min_replicas: int = 1
    max_replicas: int = 16
    gpus: int = 1
    cpu_milli: int = 4000
    memory_mib: int = 16 * 1024


ELASTIC_PRIORITY = -1


@dataclass
class _Run:
    pod: int
    where: Where
    placement: Placement
    start: float


@dataclass
class _ElasticRun:
    """An elastic job of the replay: its job, one replica's request, where its replicas are
    bound (replica index order) and its placement (None: waiting)."""

    job: Job
    req: PodRequest
    wheres: list[Where] = field(default_factory=list)
    placement: Placement | None = None


@dataclass
class DynamicResult:
    """Per class: queueing delays (first start - arrival), completion times (end - arrival),
    pods preempted; GPU-hours lost to preemption; utilization and fragmentation over time."""

    policy: str
    delays: dict[str, list[float]]
    preemptions: int
    never_started: int
    times: list[float] = field(default_factory=list)
    utilization: list[float] = field(default_factory=list)
    window_end: float = float("inf")  # last arrival
    completions: dict[str, list[float]] = field(default_factory=dict)
    preempted: dict[str, int] = field(default_factory=dict)
    lost_gpu_hours: dict[str, float] = field(default_factory=dict)  # per class
    fragmentation: list[float] = field(default_factory=list)  # fragmented share of all GPUs
    large_delays: list[float] = field(default_factory=list)  # pods of >= Timing.large_gpus
    gpus: float = 0.0  # the fleet's
    # elastic jobs (`ElasticLoad`), over the whole replay: GPU-hours held, GPU-hours held above
    # their minimum (gained from capacity nothing else used), replicas given back to let
    # higher priority in, and whole evictions
    elastic_gpu_hours: float = 0.0
    elastic_gained_gpu_hours: float = 0.0
    elastic_shrinks: int = 0
    elastic_evictions: int = 0

    def idle_gpu_hours(self) -> float:
        """GPU-hours no pod held over the whole replay (first arrival to last departure)."""
        t, u = np.array(self.times), np.array(self.utilization)
        if t.size < 2:
            return 0.0
        return float(np.sum((1 - u[:-1]) * np.diff(t)) * self.gpus / 3600)

    def summary(self) -> dict[str, Any]:
        """Headline numbers for the CLI and the benchmark."""
        out: dict[str, Any] = {"preemptions": self.preemptions, "never_started": self.never_started}
        out["lost_gpu_hours"] = round(sum(self.lost_gpu_hours.values()), 1)
        out["idle_gpu_hours"] = round(self.idle_gpu_hours(), 1)
        for cls, hours in self.lost_gpu_hours.items():
            out[f"lost_gpu_hours_{cls}"] = round(hours, 2)
        delays = {**self.delays, "large": self.large_delays}
        for name, series in (("delay", delays), ("jct", self.completions)):
            for cls, values in series.items():
                arr = np.array(values) if values else np.zeros(1)
                for q in (50, 95, 99):
                    out[f"{name}_p{q}_s_{cls}"] = round(float(np.percentile(arr, q)), 1)
        for cls, count in self.preempted.items():
            out[f"preempted_{cls}"] = count
        if self.elastic_gpu_hours:
            out["elastic_gpu_hours"] = round(self.elastic_gpu_hours, 1)
            out["elastic_gained_gpu_hours"] = round(self.elastic_gained_gpu_hours, 1)
            out["elastic_shrinks"] = self.elastic_shrinks
            out["elastic_evictions"] = self.elastic_evictions
        t = np.array(self.times)
        inside = t <= self.window_end
        for key, values in (
            ("gpu_utilization_time_avg_pct", self.utilization),
            ("frag_time_avg_pct", self.fragmentation),
        ):
            v = np.array(values)[inside] if values else np.zeros(0)
            ti = t[inside]
            if v.size > 1 and ti[-1] > ti[0]:
                out[key] = round(float(100 * np.sum(v[:-1] * np.diff(ti)) / (ti[-1] - ti[0])), 2)
        return out


def lifetime(p: TracePod) -> float:
    """Seconds the pod ran in the trace (from scheduling, else creation, to deletion; >= 1)."""
    begin = p.scheduled_time if p.scheduled_time is not None else p.creation_time
    end = p.deletion_time if p.deletion_time is not None else begin
    return float(max((end or 0) - (begin or 0), 1))


def offered_load(created: FloatArray, life: FloatArray, gpus: FloatArray, capacity: float) -> float:
    """Mean requested share of the capacity over the arrival window (lifetimes clipped to it)."""
    first, last = float(created.min()), float(created.max())
    if last <= first:
        return float(gpus.sum() / capacity)
    overlap = np.clip(np.minimum(created + life, last) - created, 0.0, None)
    return float((gpus * overlap).sum() / (capacity * (last - first)))


def overload_arrivals(
    pods: Sequence[TracePod], capacity_milli: int, factor: float, horizon_s: float = HORIZON_S
) -> tuple[list[TracePod], list[float]]:
    """The trace repeated back to back over `horizon_s`, each copy's arrivals (order and
    relative gaps kept, the earliest 1 % clamped to the 1st percentile) squeezed into a window
    in which the copy asks `factor` times the fleet's GPU-seconds, lifetimes counted up to the
    horizon: sum(GPUs x min(lifetime, horizon)) = factor x capacity x window."""
    created = np.array([float(p.creation_time or 0) for p in pods])
    if not created.size:
        return [], []
    first = float(np.percentile(created, 1))
    created = np.maximum(created, first)
    work = sum(p.total_gpu_milli * min(lifetime(p), horizon_s) for p in pods)
    window = work / (factor * capacity_milli)
    span = float(created.max()) - first
    offsets = (created - first) * (window / span if span > 0 else 0.0)
    copies = max(1, int(np.ceil(horizon_s / window))) if window > 0 else 1
    arrivals = [first + c * window + float(t) for c in range(copies) for t in offsets]
    return list(pods) * copies, arrivals


def arrival_times(pods: Sequence[TracePod], capacity_milli: int, load: float) -> list[float]:
    """Creation times (the earliest 1 % clamped to the 1st percentile) compressed towards it
    until the offered load is `load` (or as close as compression gets)."""
    created = np.array([float(p.creation_time or 0) for p in pods])
    if not created.size:
        return []
    life = np.array([lifetime(p) for p in pods])
    gpus = np.array([float(p.total_gpu_milli) for p in pods])
    first = float(np.percentile(created, 1))
    created = np.maximum(created, first)
    lo, hi = 1e-6, 1.0  # compression factor: the load grows as it shrinks
    if offered_load(created, life, gpus, capacity_milli) >= load:
        return [float(t) for t in created]
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        scaled = first + (created - first) * mid
        lo, hi = (
            (mid, hi) if offered_load(scaled, life, gpus, capacity_milli) >= load else (lo, mid)
        )
    return [float(t) for t in first + (created - first) * lo]


class _Loop:
    """The event loop around the simulated hub: cycles of the core, then level-2 binding."""

    def __init__(
        self,
        hub: Hub,
        pods: Sequence[TracePod],
        arrivals: Sequence[float],
        config: SchedulerConfig,
        frag_model: FragModel,
        timing: Timing = Timing(),
        fifo: bool = False,
        elastic: ElasticLoad | None = None,
    ) -> None:
        self.hub, self.pool, self.pods, self.config = hub, hub.pool, pods, config
        self.arrivals = arrivals
        self.timing = timing
        self.reqs = [pod_request(p) for p in pods]
        self.prio = [PRIORITY.get(p.qos, 1) for p in pods]  # the class, as reported
        self.rank = [0] * len(pods) if fifo else self.prio  # the priority the queue runs by
        factor = timing.runtime_factor
        self.jobs = [
            hub.job(
                PodJob(
                    str(k),
                    self.rank[k],
                    self.prio[k] == 0,
                    arrivals[k],
                    lifetime(pods[k]) * factor if factor is not None else None,
                    timing.checkpoint_s,
                ),
                self.reqs[k],
            )
            for k in range(len(pods))
        ]
        self.saved = [0.0] * len(pods)  # work kept by checkpoints across preemptions
        self.pending: dict[int, None] = {}  # pods waiting (a set in insertion order)
        self.reserved: dict[str, Placement] = {}  # preemptors' reservations by job id
        self.events: list[tuple[float, int, int]] = []  # (time, 0 finish / 1 arrive, run or pod)
        self.runs: dict[int, _Run] = {}
        self.running: dict[str, int] = {}  # job id -> run
        self.started: dict[int, float] = {}
        self.finished: dict[int, float] = {}
        self.preempted = [0] * len(CLASSES)
        self.lost_milli_s = [0.0] * len(CLASSES)
        self.preemptions = 0
        self.frag = FragTracker(hub.pool, frag_model)
        self.fragmentation: list[float] = []
        self.next_run = 0
        self.times: list[float] = []
        self.util: list[float] = []
        self.elastic = {e.job.id: e for e in _elastic_runs(hub, elastic, min(arrivals, default=0))}
        self.elastic_min = elastic.min_replicas if elastic is not None else 0
        self.elastic_gpu_s = self.elastic_gained_gpu_s = 0.0
        self.elastic_shrinks = self.elastic_evictions = 0

    def start(self, k: int, where: Where, now: float) -> None:
        run = self.next_run
        self.next_run += 1
        self.runs[run] = _Run(k, where, self.hub.placement(self.jobs[k], where), now)
        self.running[self.jobs[k].id] = run
        self.started.setdefault(k, now)
        heapq.heappush(self.events, (now + lifetime(self.pods[k]) - self.saved[k], 0, run))

    def stop(self, run: int) -> int:
        r = self.runs.pop(run)
        del self.running[self.jobs[r.pod].id]
        self.pool.remove(r.where[0], self.reqs[r.pod], r.where[1])
        return r.pod

    def cycle(self, now: float) -> bool:
        """One cycle of the core over the head of the queue; True if it preempted, resized or
        started an elastic job (the next cycle at the same instant may decide more)."""
        head = sorted(self.pending, key=lambda k: (-self.rank[k], self.arrivals[k], k))[:HEAD]
        running = [r.placement for r in self.runs.values()]
        if self.timing.timed:  # the core reads how long each has run
            running = [
                replace(r.placement, job=replace(r.placement.job, runtime_s=now - r.start))
                for r in self.runs.values()
            ]
        waiting = [e.job for e in self.elastic.values() if e.placement is None]
        running += [e.placement for e in self.elastic.values() if e.placement is not None]
        result = self.hub.cycle(
            [self.jobs[k] for k in head] + waiting,
            self.config,
            now,
            running,
            list(self.reserved.values()),
        )
        for resized in [*(r for p in result.preempted for r in p.shrunk), *result.grown]:
            self._resize(self.elastic[resized.placement.job.id], resized.placement)
        again = bool(result.grown)
        for placed in result.placed:
            if placed.placement.job.id in self.elastic:
                self._start_elastic(self.elastic[placed.placement.job.id], placed.placement)
                again = True
                continue
            k = int(placed.placement.job.id)
            where = self.hub.bind(placed.placement.cluster, self.reqs[k])
            if where is not None:  # else the cluster's nodes filled up in this cycle: retry
                del self.pending[k]
                self.reserved.pop(self.jobs[k].id, None)
                self.start(k, where, now)
        for preempted in result.preempted:
            self.reserved[preempted.preemptor.id] = preempted.reservation
            for victim in preempted.victims:
                if victim.job.id in self.elastic:
                    self._evict_elastic(self.elastic[victim.job.id])
                    continue
                run = self.running[victim.job.id]
                k = self.runs[run].pod
                ran = now - self.runs[run].start
                lost = ran % self.timing.checkpoint_s if self.timing.checkpoint_s else ran
                self.saved[k] += ran - lost
                self.lost_milli_s[self.prio[k]] += self.reqs[k].gpu_milli * lost
                self.pending[self.stop(run)] = None
                self.preemptions += 1
                self.preempted[self.prio[k]] += 1
        return again or bool(result.preempted)

    def _bind(self, e: _ElasticRun, cluster: str, flavor: str, replicas: int) -> None:
        """Bind replicas of `e` on `cluster` up to `replicas` (as many as the nodes take)."""
        req = replace(e.req, models=frozenset({flavor}))
        while len(e.wheres) < replicas:
            where = self.hub.bind(cluster, req)
            if where is None:
                break
            e.wheres.append(where)

    def _unbind(self, e: _ElasticRun, keep: int) -> None:
        """Release the replicas of `e` past the first `keep` (the highest indices leave)."""
        while len(e.wheres) > keep:
            node, devices = e.wheres.pop()
            self.pool.remove(node, e.req, devices)

    def _hold(self, e: _ElasticRun, cluster: str, flavor: str) -> None:
        job = e.job.with_replicas(0, len(e.wheres))
        replicas = tuple(
            ReplicaPlacement(0, self.pool.names[node], devices) for node, devices in e.wheres
        )
        e.placement = Placement(job, cluster, (flavor,), replicas)

    def _start_elastic(self, e: _ElasticRun, placed: Placement) -> None:
        floor = e.job.tasks[0].floor
        self._bind(e, placed.cluster, placed.flavors[0], placed.job.tasks[0].replicas)
        if len(e.wheres) < floor:  # the nodes filled up in this cycle: wait for the next
            self._unbind(e, 0)
            return
        self._hold(e, placed.cluster, placed.flavors[0])

    def _resize(self, e: _ElasticRun, resized: Placement) -> None:
        wanted = resized.job.tasks[0].replicas
        if wanted < len(e.wheres):
            self.elastic_shrinks += 1
            self._unbind(e, wanted)
        else:
            self._bind(e, resized.cluster, resized.flavors[0], wanted)
        self._hold(e, resized.cluster, resized.flavors[0])

    def _evict_elastic(self, e: _ElasticRun) -> None:
        self._unbind(e, 0)
        e.placement = None
        self.elastic_evictions += 1

    def _elastic_wants(self) -> bool:
        """Whether an elastic job waits or may grow (a cycle could change it)."""
        return any(
            e.placement is None or len(e.wheres) < e.job.tasks[0].ceiling
            for e in self.elastic.values()
        )

    def _count_elastic(self, since: float, now: float) -> None:
        """Add the GPU-seconds elastic jobs held from `since` to `now`."""
        span = now - since
        for e in self.elastic.values():
            if e.placement is not None and span:
                gpus = e.req.gpu_milli / WHOLE
                self.elastic_gpu_s += len(e.wheres) * gpus * span
                self.elastic_gained_gpu_s += (len(e.wheres) - self.elastic_min) * gpus * span

    def run(self) -> None:
        for k, t in enumerate(self.arrivals):
            heapq.heappush(self.events, (t, 1, k))
        last = self.events[0][0] if self.events else 0.0
        while self.events:
            now = self.events[0][0]
            self._count_elastic(last, now)
            last = now
            changed = False
            while self.events and self.events[0][0] == now:
                _, kind, ident = heapq.heappop(self.events)
                if kind == 0 and ident in self.runs:
                    self.finished[self.stop(ident)] = now
                    changed = True
                elif kind == 1:
                    self.pending[ident] = None
                    changed = True
            # victims leave at once: the preemptor follows; a started elastic job grows
            for _ in range(PREEMPTION_ROUNDS):
                if not (changed and (self.pending or self._elastic_wants()) and self.cycle(now)):
                    break
            self.times.append(now)
            total = max(self.pool.total_milli, WHOLE)
            self.util.append(self.pool.allocated_milli() / total)
            self.fragmentation.append(float(self.frag.current().sum()) / total)


def run_dynamic(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: str,
    load: float = 0.35,
    config: SchedulerConfig = DEFAULT_CONFIG,
    clusters: int = 1,
    overload: float | None = None,
    timing: Timing = Timing(),
    fifo: bool = False,
    elastic: ElasticLoad | None = None,
) -> DynamicResult:
    """Replay `pods` with their (compressed) trace times on the GPU nodes of `nodes`, split into
    `clusters` member clusters, the core run with `config`; with `overload`, the trace repeated
    asks that many times the fleet's capacity (`overload_arrivals`) instead of the offered
    `load`; `timing`: run time limits, checkpoints and reservations. With `fifo` the core sees
    one priority and the queue is in arrival order only (classes are still reported); with
    `elastic`, elastic jobs run beside the trace below every trace pod's priority."""
    gpu_nodes = sorted((n for n in nodes if n.gpu > 0), key=lambda n: n.name)
    pool = Pool([pool_node(n) for n in gpu_nodes])
    timed = [p for p in pods if p.creation_time is not None]
    workload = typical_workload(task_types(pods))
    scorer = make_policy(policy, workload).bind(pool, np.random.default_rng(0))
    member = split_round_robin(gpu_nodes, clusters)
    hub = Hub(pool, scorer, np.array([member[n.name] for n in gpu_nodes]))
    if overload is None:
        arrivals = arrival_times(timed, pool.total_milli, load)
    else:
        timed, arrivals = overload_arrivals(timed, pool.total_milli, overload)
    config = replace(
        config,
        backfill=timing.backfill,
        reservation_min_devices=timing.large_gpus,
        reservations_per_queue=timing.reservations,
    )
    frag = FragModel(workload, pool.model_names)
    loop = _Loop(hub, timed, arrivals, config, frag, timing, fifo, elastic)
    loop.run()
    delays: dict[str, list[float]] = {c: [] for c in CLASSES}
    completions: dict[str, list[float]] = {c: [] for c in CLASSES}
    large: list[float] = []
    for k, t in loop.started.items():
        delays[CLASSES[loop.prio[k]]].append(t - arrivals[k])
        if loop.reqs[k].gpu_milli >= timing.large_gpus * WHOLE:
            large.append(t - arrivals[k])
    for k, t in loop.finished.items():
        completions[CLASSES[loop.prio[k]]].append(t - arrivals[k])
    return DynamicResult(
        policy=policy,
        delays=delays,
        preemptions=loop.preemptions,
        never_started=len(timed) - len(loop.started),
        times=loop.times,
        utilization=loop.util,
        window_end=max(arrivals, default=0.0),
        completions=completions,
        preempted=dict(zip(CLASSES, loop.preempted, strict=True)),
        lost_gpu_hours={
            c: ms / WHOLE / 3600 for c, ms in zip(CLASSES, loop.lost_milli_s, strict=True)
        },
        fragmentation=loop.fragmentation,
        large_delays=large,
        gpus=pool.total_milli / WHOLE,
        elastic_gpu_hours=loop.elastic_gpu_s / 3600,
        elastic_gained_gpu_hours=loop.elastic_gained_gpu_s / 3600,
        elastic_shrinks=loop.elastic_shrinks,
        elastic_evictions=loop.elastic_evictions,
    )


def _elastic_runs(hub: Hub, load: ElasticLoad | None, at: float) -> list[_ElasticRun]:
    """The elastic jobs of `load`, arriving at `at`."""
    if load is None:
        return []
    req = PodRequest(load.cpu_milli, load.memory_mib, DeviceRequest(load.gpus))
    options = tuple(FlavorOption(m, count=load.gpus) for m in hub.models)
    task = Task(
        "train",
        load.min_replicas,
        load.cpu_milli,
        load.memory_mib,
        AcceleratorRequest(options),
        elastic=Elastic(load.min_replicas, load.max_replicas),
    )
    return [
        _ElasticRun(Job(f"elastic-{i}", QUEUE, (task,), ELASTIC_PRIORITY, True, at), req)
        for i in range(load.jobs)
    ]
