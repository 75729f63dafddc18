"""Reservations for large waiting gangs, and backfill around them (EASY backfill, per cycle).

A gang near the head of its queue (the first `reservations_per_queue` pending jobs of a queue,
or of a cohort, that need at least `reservation_min_devices` whole devices, waited at least
`reservation_min_wait_s` and neither fit nor preempt) gets a reservation. On each cluster where
capacity is what stops it, the running jobs that free something it needs are taken away in the
order they are expected to end (`Job.ends_at`: start + `max_runtime_s`; a job without one never
ends for this estimate) until it fits. The earliest such time over the clusters is its expected
start, and where it would fit then is its reserved placement.

The reservation holds now what the gang needs at its start beyond what the jobs ending by then
give back: the reserved devices that are free now (whole, or what is left of a shared one), and
per node CPU, memory and pods less what those jobs free there. A lower-ranked job that ends by
the expected start (now + its `max_runtime_s`) may use the held capacity; once it is placed the
hold shrinks by what it took on those nodes (it gives that back in time). Every other job fits
outside the hold. The jobs a reservation counts on are no preemption victims for the rest of
the cycle; later reservations are estimated with the earlier ones in full, and with the
cycle's preemptions done (victims gone, preemptors holding their room), so two never count on
the same capacity; jobs being evicted never end for the estimate (their capacity goes to their
preemptors). Holds cover capacity, not quota. Nothing outlives the cycle: the
next one computes the reservations again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from federation.scheduling.decisions import Preempted, Reserved
from federation.scheduling.devices import WHOLE, DeviceRequest
from federation.scheduling.flavors import FitCheck, Verdict
from federation.scheduling.framework import JobContext, SchedulerConfig
from federation.scheduling.model import Assignment, Job, Placement
from federation.scheduling.state import ClusterState, NodeState, State, Usage
from federation.scheduling.status import Code, Status

Free = tuple[int, int, int]  # CPU, memory, pods of one node
ONE_DEVICE = DeviceRequest()


def _free(node: NodeState) -> Free:
    return (node.cpu_free, node.memory_free, node.pods_free)


@dataclass(slots=True)
class Hold:
    """What one reservation holds in its cluster now."""

    reserved: Reserved
    cluster: str
    devices: tuple[tuple[int, str, int], ...]  # node, model, index of each reserved device
    amounts: dict[int, Free]  # per node: CPU, memory and pods held
    taken: list[Usage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Found:
    cluster: ClusterState
    start: float
    verdict: Verdict
    then: dict[int, Free]  # free capacity of the reserved nodes at the start
    relies_on: tuple[str, ...]


def large_gang(job: Job, first: Assignment, config: SchedulerConfig) -> bool:
    """Whether `job`, with its first flavor choice `first`, asks the whole devices a
    reservation needs (`reservation_min_devices`; shares never earn one)."""
    options = [(t, o) for t, o in zip(job.tasks, first, strict=True) if o is not None]
    if any(o.milli < WHOLE for _, o in options):
        return False
    return sum(t.replicas * o.count for t, o in options) >= config.reservation_min_devices


class Backfill:
    """The reservations of one cycle and the capacity they hold in its state."""

    def __init__(
        self, state: State, config: SchedulerConfig, now: float, preempted: list[Preempted]
    ) -> None:
        self.state = state
        self.config = config
        self.now = now
        self.holds: list[Hold] = []
        self.tried: dict[str, int] = {}  # reservations tried per queue or cohort
        self.notes: dict[str, str] = {}  # per cluster: what is reserved there
        self.preempted = preempted  # the cycle's preemptions so far (the cycle's own list)

    # --- jobs that end in time ---------------------------------------------------------------

    def passable(self, job: Job) -> list[Hold]:
        """The holds `job` may use: those of reservations that start once it has ended."""
        if not self.holds or job.max_runtime_s is None:
            return []
        end = self.now + job.max_runtime_s
        return [h for h in self.holds if h.reserved.start >= end]

    def release(self, holds: Sequence[Hold]) -> dict[tuple[str, int], Free]:
        """Give back what `holds` hold; the free capacity of their nodes afterwards."""
        for hold in holds:
            self._give(hold)
        return {
            (h.cluster, n): _free(self.state.clusters[h.cluster].nodes[n])
            for h in holds
            for n in h.amounts
        }

    def retake(self, holds: Sequence[Hold], before: Mapping[tuple[str, int], Free]) -> None:
        """Hold again after a job that ends in time was placed: the reserved devices still
        free, and per node the amounts less what the job took there (counted once)."""
        took = {
            key: _less(was, _free(self.state.clusters[key[0]].nodes[key[1]]))
            for key, was in before.items()
        }
        for hold in holds:
            amounts: dict[int, Free] = {}
            for n, held in hold.amounts.items():
                used = took[(hold.cluster, n)]
                amounts[n] = _less(held, used)
                took[(hold.cluster, n)] = _less(used, held)
            self._set(hold, "amounts", amounts)
            self._take(hold)

    # --- reservations --------------------------------------------------------------------------

    def reserve(
        self, ctx: JobContext, clusters: Sequence[ClusterState], fits: FitCheck
    ) -> Reserved | None:
        """A reservation for `ctx.job` on the cluster where it can start first, held from now
        on; None when it earns none or no running job's end lets it fit."""
        if not self._eligible(ctx):
            return None
        queue = self.state.quota.queues[ctx.job.queue]
        key = f"cohort:{queue.cohort}" if queue.cohort else f"queue:{queue.name}"
        if self.tried.get(key, 0) >= self.config.reservations_per_queue:
            return None
        self.tried[key] = self.tried.get(key, 0) + 1
        best: _Found | None = None
        for cluster in clusters:
            found = self._earliest(ctx, cluster, fits)
            if found is not None and (
                best is None or (found.start, cluster.order) < (best.start, best.cluster.order)
            ):
                best = found
        return self._hold(ctx, best) if best is not None else None

    def annotate(self, reasons: Mapping[str, Status]) -> dict[str, Status]:
        """`reasons` with what is reserved added to each capacity shortfall."""
        out = dict(reasons)
        for cluster, note in self.notes.items():
            status = out.get(cluster)
            if status is not None and status.code is Code.UNSCHEDULABLE:
                out[cluster] = Status(status.code, f"{status.reason}; {note}", status.plugin)
        return out

    def _eligible(self, ctx: JobContext) -> bool:
        job, config = ctx.job, self.config
        if not job.gang or not ctx.assignments or job.id in self.state.held:
            return False
        wait = config.reservation_min_wait_s
        if wait > 0 and self.now - job.created_at < wait:
            return False
        return large_gang(job, ctx.assignments[0], config)

    def _earliest(self, ctx: JobContext, cluster: ClusterState, fits: FitCheck) -> _Found | None:
        """When and where the job would fit `cluster` as its running jobs end."""
        state, now = self.state, self.now
        options = [o for a in ctx.assignments for o in a]
        if any(o is None for o in options):
            near: dict[str, Placement] = state.by_cluster.get(cluster.name, {})
        else:
            near = {}
            for flavor in sorted({o.flavor for o in options if o is not None}):
                near.update(state.by_flavor.get((cluster.name, flavor), {}))
        ending = sorted(  # victims being evicted leave their capacity to their preemptors
            (p.job.ends_at(now), p.job.id, p)
            for p in near.values()
            if p.job.max_runtime_s is not None and p.job.id not in state.preempting
        )
        if not ending:
            return None
        with state.trial():
            # this cycle's preemptions here done and earlier reservations here running, each
            # taking its devices as soon as they are free
            waiting: dict[int, list[Usage]] = {}
            for preempted in self.preempted:
                if preempted.reservation.cluster == cluster.name:
                    for victim in preempted.victims:
                        if victim.cluster == cluster.name:
                            state.vacate(victim)
                    self._occupy(preempted.reservation, waiting)
            for hold in self.holds:
                if hold.cluster == cluster.name:
                    self._give(hold)
                    self._occupy(hold.reserved.placement, waiting)
            self._claim(cluster, waiting, list(waiting))
            gone: list[Placement] = []
            for end, group in groupby(ending, key=lambda e: e[0]):
                touched = []
                for _, _, placement in group:
                    state.vacate(placement)
                    gone.append(placement)
                    touched += [cluster.node_index.get(r.node) for r in placement.replicas]
                self._claim(cluster, waiting, touched)
                verdict = fits(ctx, cluster)
                if verdict.status.ok and verdict.estimate is not None:
                    nodes = {cluster.node_index[r.node] for r in verdict.estimate.replicas}
                    relies_on = tuple(
                        sorted(
                            p.job.id
                            for p in gone
                            if any(cluster.node_index.get(r.node) in nodes for r in p.replicas)
                        )
                    )
                    then = {n: _free(cluster.nodes[n]) for n in nodes}
                    return _Found(cluster, end, verdict, then, relies_on)
                if verdict.status.code is Code.UNRESOLVABLE:
                    return None
        return None

    def _occupy(self, placement: Placement, waiting: dict[int, list[Usage]]) -> None:
        """Take CPU, memory and pods of `placement` now; add its devices to `waiting`."""
        name = placement.cluster
        for usage in self.state.clusters[name].usages(placement):
            self.state.take_free(name, [Usage(usage.node, usage.cpu_milli, usage.memory_mib)])
            if usage.request is not None:
                device = Usage(usage.node, 0, 0, usage.model, usage.request, usage.devices, 0)
                waiting.setdefault(usage.node, []).append(device)

    def _claim(
        self, cluster: ClusterState, waiting: dict[int, list[Usage]], nodes: Sequence[int | None]
    ) -> None:
        """Take the waiting devices of `nodes` that are free now."""
        for node in set(nodes):
            found = waiting.get(node) if node is not None else None
            if node is not None and found:
                waiting[node] = [u for u in found if not self.state.take_free(cluster.name, [u])]

    def _hold(self, ctx: JobContext, found: _Found) -> Reserved:
        cluster, verdict = found.cluster, found.verdict
        assert verdict.assignment is not None and verdict.estimate is not None
        placement = Placement.of(
            ctx.job, cluster.name, verdict.assignment, verdict.estimate.replicas
        )
        need: dict[int, Free] = {}
        devices: list[tuple[int, str, int]] = []
        for usage in cluster.usages(placement):
            cpu, memory, pods = need.get(usage.node, (0, 0, 0))
            need[usage.node] = (cpu + usage.cpu_milli, memory + usage.memory_mib, pods + 1)
            if usage.request is not None:
                devices += [(usage.node, usage.model, i) for i in usage.devices]
        # hold now what the start needs beyond what is free then and not now
        amounts = {
            n: _less(wanted, _less(found.then[n], _free(cluster.nodes[n]), floor=None))
            for n, wanted in need.items()
        }
        reserved = Reserved(placement, found.start, found.relies_on)
        hold = Hold(reserved, cluster.name, tuple(devices), amounts)
        self._take(hold)
        self.holds.append(hold)
        self.state.pinned.update(found.relies_on)
        note = f"capacity reserved for job {ctx.job.id} (expected start {found.start:.0f})"
        known = self.notes.get(cluster.name)
        self.notes[cluster.name] = f"{known}; {note}" if known else note
        return reserved

    # --- holding -------------------------------------------------------------------------------

    def _take(self, hold: Hold) -> None:
        cluster = self.state.clusters[hold.cluster]
        usages = [Usage(n, c, m, pods=p) for n, (c, m, p) in hold.amounts.items() if c or m or p]
        for n, model, i in hold.devices:
            usage = _device_hold(cluster.nodes[n], n, model, i)
            if usage is not None:
                usages.append(usage)
        self._set(hold, "taken", self.state.take_free(hold.cluster, usages))

    def _give(self, hold: Hold) -> None:
        self.state.give_back(hold.cluster, hold.taken)
        self._set(hold, "taken", [])

    def _set(self, hold: Hold, name: str, value: object) -> None:
        old = getattr(hold, name)
        setattr(hold, name, value)
        self.state.on_undo(_setter(hold, name, old))


def _setter(hold: Hold, name: str, value: object) -> Callable[[], None]:
    return lambda: setattr(hold, name, value)


def _less(a: Free, b: Free, *, floor: int | None = 0) -> Free:
    """`a - b` per field, at least `floor` (None: no floor)."""
    if floor is None:
        return (a[0] - b[0], a[1] - b[1], a[2] - b[2])
    return (max(floor, a[0] - b[0]), max(floor, a[1] - b[1]), max(floor, a[2] - b[2]))


def _device_hold(node: NodeState, n: int, model: str, i: int) -> Usage | None:
    """What keeps anyone else off device `i`: all of it when free, else its room for shares."""
    devices = node.devices.get(model)
    if devices is None or not devices.healthy[i]:
        return None
    if devices.is_free(i):
        return Usage(n, 0, 0, model, ONE_DEVICE, (i,), pods=0)
    milli = WHOLE - devices.used_milli[i]
    unit = max(devices.sharing.memory_unit_mib, 1)
    memory = (devices.memory_mib[i] - devices.used_memory_mib[i]) // unit * unit
    if not 0 < milli < WHOLE or memory <= 0:
        return None
    return Usage(n, 0, 0, model, DeviceRequest(1, milli, memory), (i,), pods=0)
