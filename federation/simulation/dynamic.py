"""Dynamic replay: the trace's own arrival and deletion times, priorities and preemption.

A simple discrete-event loop (no sampling, one run): a pod arrives at `creation_time`, waits in
a queue ordered by priority then arrival, runs for its trace lifetime (`deletion_time` minus
`scheduled_time`, or minus `creation_time` if it never started; at least 1 s) once placed, and
then leaves. `qos` maps to priority classes: LS high, Burstable/Guaranteed mid, BE low; only low
pods are preemptible. When a high or mid pod fits nowhere, the loop looks for the node where
evicting the fewest low pods (then the least device capacity) makes it fit, evicts them (they
go back to the queue with their original arrival time and restart from scratch) and places the
pod there. The queue is retried whenever capacity is freed; a new arrival is tried at once.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from federation.scheduling.devices import WHOLE
from federation.scheduling.placement import PodRequest, Pool, make_policy, typical_workload
from federation.scheduling.placement.pool import FloatArray
from federation.simulation.adapter import pod_request, pool_node, task_types
from federation.simulation.replay import Placer
from federation.simulation.trace import TraceNode, TracePod

PRIORITY = {"LS": 2, "Guaranteed": 1, "Burstable": 1, "BE": 0}
CLASSES = ("low", "mid", "high")
VICTIM_NODES = 8  # candidate nodes examined per preemption attempt


@dataclass
class _Run:
    pod: int
    node: int
    devices: tuple[int, ...]


@dataclass
class DynamicResult:
    """Queueing delays by class, preemptions and GPU utilization over time."""

    policy: str
    delays: dict[str, list[float]]
    preemptions: int
    never_started: int
    times: list[float] = field(default_factory=list)
    utilization: list[float] = field(default_factory=list)
    window_end: float = float("inf")  # last arrival

    def summary(self) -> dict[str, Any]:
        """Headline numbers for the CLI and the benchmark."""
        out: dict[str, Any] = {"preemptions": self.preemptions, "never_started": self.never_started}
        for cls, values in self.delays.items():
            arr = np.array(values) if values else np.zeros(1)
            out[f"delay_p50_s_{cls}"] = round(float(np.percentile(arr, 50)), 1)
            out[f"delay_p99_s_{cls}"] = round(float(np.percentile(arr, 99)), 1)
        t, u = np.array(self.times), np.array(self.utilization)
        inside = t <= self.window_end
        t, u = t[inside], u[inside]
        if t.size > 1:
            out["gpu_utilization_time_avg_pct"] = round(
                float(100 * np.sum(u[:-1] * np.diff(t)) / (t[-1] - t[0])), 2
            )
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
    def __init__(
        self,
        pool: Pool,
        placer: Placer,
        pods: Sequence[TracePod],
        arrivals: Sequence[float],
        preempt: bool,
    ) -> None:
        self.pool, self.placer, self.pods, self.preempt = pool, placer, pods, preempt
        self.arrivals = arrivals
        self.reqs = [pod_request(p) for p in pods]
        self.prio = [PRIORITY.get(p.qos, 1) for p in pods]
        self.pending: list[tuple[int, int, int]] = []  # (-priority, arrival, pod)
        self.events: list[tuple[float, int, int]] = []  # (time, 0 finish / 1 arrive, run or pod)
        self.runs: dict[int, _Run] = {}
        self.started: dict[int, float] = {}
        self.preemptions = 0
        self.next_run = 0
        self.times: list[float] = []
        self.util: list[float] = []

    def duration(self, k: int) -> float:
        return lifetime(self.pods[k])

    def start(self, k: int, node: int, devices: tuple[int, ...], now: float) -> None:
        run = self.next_run
        self.next_run += 1
        self.runs[run] = _Run(k, node, devices)
        self.started.setdefault(k, now)
        heapq.heappush(self.events, (now + self.duration(k), 0, run))

    def stop(self, run: int) -> _Run:
        r = self.runs.pop(run)
        self.pool.remove(r.node, self.reqs[r.pod], r.devices)
        return r

    def try_place(self, k: int, now: float) -> bool:
        req = self.reqs[k]
        placed = self.placer.place(req)
        if placed is None and self.preempt and self.prio[k] > 0:
            node = self.preempt_for(k)
            if node is not None:
                placed = node, self.pool.choose_devices(node, req)
                self.pool.place(node, req, placed[1])
        if placed is None:
            return False
        self.start(k, placed[0], placed[1], now)
        return True

    def preempt_for(self, k: int) -> int | None:
        req = self.reqs[k]
        victims_by_node: dict[int, list[int]] = {}
        for run, r in self.runs.items():
            if self.prio[r.pod] == 0:
                victims_by_node.setdefault(r.node, []).append(run)
        allowed = self.pool.model_allowed(req)
        ranked = sorted(
            (n for n in victims_by_node if allowed[n]),
            key=lambda n: sum(self.reqs[self.runs[v].pod].gpu_milli for v in victims_by_node[n]),
        )
        best: tuple[int, int, int, list[int]] | None = None
        for n in ranked[:VICTIM_NODES]:
            chosen = self._victims_on(n, req, victims_by_node[n])
            if chosen is not None:
                cost = sum(self.reqs[self.runs[v].pod].gpu_milli for v in chosen)
                if best is None or (len(chosen), cost) < (best[1], best[2]):
                    best = (n, len(chosen), cost, chosen)
        if best is None:
            return None
        for run in best[3]:
            victim = self.stop(run).pod
            self.preemptions += 1
            heapq.heappush(self.pending, (0, int(self.arrivals[victim]), victim))
        return best[0]

    def _victims_on(self, n: int, req: PodRequest, runs: list[int]) -> list[int] | None:
        """Fewest low-priority runs on node `n` (largest first) whose eviction makes `req` fit."""
        order = sorted(runs, key=lambda v: -self.reqs[self.runs[v].pod].gpu_milli)
        taken: list[int] = []
        for run in order:
            r = self.runs[run]
            self.pool.remove(n, self.reqs[r.pod], r.devices)
            taken.append(run)
            if self.pool.feasible(req)[n]:
                break
        fits = bool(self.pool.feasible(req)[n])
        for run in reversed(taken):
            r = self.runs[run]
            self.pool.place(n, self.reqs[r.pod], r.devices)
        return taken if fits else None

    def run(self) -> None:
        for k, t in enumerate(self.arrivals):
            heapq.heappush(self.events, (t, 1, k))
        while self.events:
            now = self.events[0][0]
            freed, arrived = False, []
            while self.events and self.events[0][0] == now:
                _, kind, ident = heapq.heappop(self.events)
                if kind == 0 and ident in self.runs:
                    self.stop(ident)
                    freed = True
                elif kind == 1:
                    arrived.append(ident)
            for k in arrived:
                if not self.try_place(k, now):
                    heapq.heappush(self.pending, (-self.prio[k], int(self.arrivals[k]), k))
            if freed and self.pending:
                waiting, self.pending = sorted(self.pending), []
                stuck: set[tuple[PodRequest, int]] = set()  # shapes that found no room
                for item in waiting:
                    shape = (self.reqs[item[2]], self.prio[item[2]])
                    if shape in stuck or not self.try_place(item[2], now):
                        stuck.add(shape)
                        self.pending.append(item)
                heapq.heapify(self.pending)
            self.times.append(now)
            self.util.append(self.pool.allocated_milli() / max(self.pool.total_milli, WHOLE))


def run_dynamic(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    policy: str,
    load: float = 0.35,
    preempt: bool = True,
) -> DynamicResult:
    """Replay `pods` with their (compressed) trace times on the GPU nodes of `nodes`."""
    gpu_nodes = sorted((n for n in nodes if n.gpu > 0), key=lambda n: n.name)
    pool = Pool([pool_node(n) for n in gpu_nodes])
    timed = [p for p in pods if p.creation_time is not None]
    scorer = make_policy(policy, typical_workload(task_types(pods))).bind(
        pool, np.random.default_rng(0)
    )
    arrivals = arrival_times(timed, pool.total_milli, load)
    loop = _Loop(pool, Placer(pool, scorer), timed, arrivals, preempt)
    loop.run()
    delays: dict[str, list[float]] = {c: [] for c in CLASSES}
    for k, t in loop.started.items():
        delays[CLASSES[loop.prio[k]]].append(t - arrivals[k])
    return DynamicResult(
        policy=policy,
        delays=delays,
        preemptions=loop.preemptions,
        never_started=len(timed) - len(loop.started),
        times=loop.times,
        utilization=loop.util,
        window_end=max(arrivals, default=0.0),
    )
